package scenarios

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Each file under testdata/invalid starts with "# want: LINE:COL PATH", the
// place and field of the first problem the loader must report.
func TestInvalidScenariosNameLineAndField(t *testing.T) {
	files, _ := filepath.Glob("testdata/invalid/*.yaml")
	if len(files) < 20 {
		t.Fatalf("only %d invalid scenarios; want at least 20", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			want := wantOf(t, f)
			_, err := Load(f)
			var ps Problems
			if !errors.As(err, &ps) || len(ps) == 0 {
				t.Fatalf("Load(%s) = %v; want problems", f, err)
			}
			got := ps[0].Error()
			if !strings.HasPrefix(got, f+":"+want+":") && !strings.HasPrefix(got, f+":"+want+" ") {
				t.Fatalf("first problem:\n got  %s\n want %s:%s: ...\nall:\n%s", got, f, want, ps.Error())
			}
		})
	}
}

func wantOf(t *testing.T, file string) string {
	fh, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	sc.Scan()
	line := sc.Text()
	want, ok := strings.CutPrefix(line, "# want: ")
	if !ok {
		t.Fatalf("%s: first line must be '# want: LINE:COL PATH'", file)
	}
	lc, path, _ := strings.Cut(want, " ")
	return lc + ": " + path
}

func TestAllProblemsAtOnce(t *testing.T) {
	_, err := Load("testdata/invalid/32-many-problems.yaml")
	var ps Problems
	if !errors.As(err, &ps) {
		t.Fatal(err)
	}
	text := ps.Error()
	for _, want := range []string{"proxy.versoin", "proxy.minSyncPeriod", "timeline[1].at", "timeline[1].restart"} {
		if !strings.Contains(text, want) {
			t.Errorf("missing %s in:\n%s", want, text)
		}
	}
}

func TestLibraryScenariosAreValid(t *testing.T) {
	for _, name := range LibraryNames() {
		if _, err := LoadLibrary(name); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
