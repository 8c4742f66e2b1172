package scenarios

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
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
		// A large scenario is minutes of work per input (LargeTag).
		if err == nil && !d.IsDir() && !IsLarge(strings.TrimSuffix(p, ".yaml")) {
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

// FuzzKubeProxyConfig feeds arbitrary bytes to proxy.config's reader, as
// the file a scenario names: it must report problems, never panic; and the
// two readings must agree, --strict refusing no less than the lenient one
// and warning of nothing it accepts. The seed corpus is the testdata
// configurations (testdata/byoc).
func FuzzKubeProxyConfig(f *testing.F) {
	files, _ := filepath.Glob("testdata/byoc/*/*.yaml")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil && !strings.Contains(string(b), "\nname: ") {
			f.Add(b)
		}
	}
	scenario := []byte("name: s\nproxy: {version: v1.34.0, config: kp.yaml, nodeIPs: [192.168.1.5]}\ntimeline: [{at: 1s, note: x}]\n")
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := fsFolder(fstest.MapFS{"kp.yaml": {Data: data}}, ".")
		lenient, lerr := parse("s.yaml", scenario, dir, "", LoadOptions{})
		strict, serr := parse("s.yaml", scenario, dir, "", LoadOptions{Strict: true})
		for _, err := range []error{lerr, serr} {
			if ps, ok := err.(Problems); err != nil && (!ok || len(ps) == 0) {
				t.Fatalf("error is not a list of problems: %T %v", err, err)
			}
		}
		if serr == nil && lerr != nil {
			t.Fatalf("--strict accepts what the lenient reading refuses: %v", lerr)
		}
		if serr == nil {
			for _, w := range strict.Warnings {
				if strings.Contains(w.Msg, "--strict refuses it") {
					t.Fatalf("--strict accepts a file with a warning it should refuse: %v", w)
				}
			}
			if len(lenient.Warnings) != len(strict.Warnings) {
				t.Fatalf("a file --strict accepts warns differently: %v and %v", lenient.Warnings, strict.Warnings)
			}
		}
	})
}
