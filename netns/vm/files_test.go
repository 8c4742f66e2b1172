package vm

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestFilesMapFoldersAndFilesIntoTheGuest(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"a.yaml", "manifests/web.yaml"} {
		p := filepath.Join(dir, "scen", f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var files Files
	g, err := files.AddFolder(filepath.Join(dir, "scen"))
	if err != nil || g != "/work/0" {
		t.Fatalf("AddFolder: %q, %v", g, err)
	}
	// the same folder again, by another spelling: one copy
	again, err := files.AddFolder(filepath.Join(dir, "scen", "manifests", ".."))
	if err != nil || again != g {
		t.Fatalf("AddFolder again: %q, %v", again, err)
	}
	f, err := files.AddFile(filepath.Join(dir, "scen", "a.yaml"))
	if err != nil || f != "/work/1/a.yaml" {
		t.Fatalf("AddFile: %q, %v", f, err)
	}
	want := map[string]string{
		"work/0/a.yaml":             filepath.Join(dir, "scen", "a.yaml"),
		"work/0/manifests/web.yaml": filepath.Join(dir, "scen", "manifests", "web.yaml"),
		"work/1/a.yaml":             filepath.Join(dir, "scen", "a.yaml"),
	}
	if !reflect.DeepEqual(files.copies, want) {
		t.Fatalf("copies %v, want %v", files.copies, want)
	}
	if _, err := files.AddFolder(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("a missing folder was accepted")
	}
	if _, err := files.AddFile(filepath.Join(dir, "scen")); err == nil {
		t.Fatal("a folder was accepted as a file")
	}
}
