package scenarios

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"
)

// FuzzParse feeds arbitrary bytes to the loader: it must report problems,
// never panic. The seed corpus is every scenario in the repository (the
// library and the invalid test files) plus testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	add := func(path string) {
		if b, err := os.ReadFile(path); err == nil {
			f.Add(b)
		}
	}
	files, _ := filepath.Glob("testdata/invalid/*.yaml")
	for _, p := range files {
		add(p)
	}
	_ = fs.WalkDir(Library(), ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, err := fs.ReadFile(Library(), p); err == nil {
				f.Add(b)
			}
		}
		return nil
	})
	manifests, _ := fs.ReadFile(Library(), "manifests/web.yaml")
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse("fuzz.yaml", data, fstest.MapFS{"manifests/web.yaml": {Data: manifests}})
		if err == nil && s == nil {
			t.Fatal("no scenario and no error")
		}
		if err != nil {
			if ps, ok := err.(Problems); !ok || len(ps) == 0 {
				t.Fatalf("error is not a list of problems: %T %v", err, err)
			}
		}
	})
}
