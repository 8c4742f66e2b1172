package migrate

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

var update = flag.Bool("update-migrate", false, "rewrite the migration reports' goldens (testdata/golden/*.txt) instead of comparing with them")

// Every story of the library holds: its exit code, nodes and Services.
func TestStoriesHold(t *testing.T) {
	files, _ := filepath.Glob("stories/*/story.yaml")
	if len(files) < 6 {
		t.Fatalf("only %d stories", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(filepath.Dir(f)), func(t *testing.T) {
			st, err := LoadStory(f)
			if err != nil {
				t.Fatal(err)
			}
			o, err := st.Options()
			if err != nil {
				t.Fatal(err)
			}
			r, err := Compare(o)
			if err != nil {
				t.Fatal(err)
			}
			if fs := st.Check(r); len(fs) > 0 {
				var b strings.Builder
				_ = r.Text(&b)
				t.Fatalf("%v\n%s", fs, b.String())
			}
		})
	}
}

var wantFail = regexp.MustCompile(`(?m)^# want-fail: (\d+)$`)

// Each story's failing twin, which claims what a broken comparison would
// say, fails exactly at its "# want-fail: LINE" lines.
func TestFailingTwinsFailWhereDeclared(t *testing.T) {
	files, _ := filepath.Glob("testdata/failing/*.yaml")
	stories, _ := filepath.Glob("stories/*/story.yaml")
	if len(files) != len(stories) {
		t.Fatalf("%d failing twins for %d stories", len(files), len(stories))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var want, got []string
			for _, m := range wantFail.FindAllStringSubmatch(string(src), -1) {
				want = append(want, m[1])
			}
			st, err := LoadStory(f)
			if err != nil {
				t.Fatal(err)
			}
			o, err := st.Options()
			if err != nil {
				t.Fatal(err)
			}
			r, err := Compare(o)
			if err != nil {
				t.Fatal(err)
			}
			fails := st.Check(r)
			for _, fl := range fails {
				got = append(got, fmt.Sprint(fl.Line))
			}
			sort.Strings(want)
			sort.Strings(got)
			got = slices.Compact(got)
			if len(want) == 0 || strings.Join(got, " ") != strings.Join(want, " ") {
				t.Fatalf("failures at lines %v, want %v:\n%v", got, want, fails)
			}
		})
	}
}

// clusters are the dumps migrate runs on for the goldens: the stories'
// and the kubeadm one of the import tests.
func clusters(t *testing.T) map[string][2]string {
	out := map[string][2]string{"kubeadm": {"../testdata/byoc/kubeadm/cluster.yaml", "../testdata/byoc/kubeadm/kube-proxy.yaml"}}
	dirs, _ := filepath.Glob("stories/*")
	for _, d := range dirs {
		out[filepath.Base(d)] = [2]string{filepath.Join(d, "cluster.yaml"), filepath.Join(d, "kube-proxy.yaml")}
	}
	if len(out) < 7 {
		t.Fatalf("only %d clusters", len(out))
	}
	return out
}

// pairs are the migrations the issue names.
var pairs = [][2]string{{"ipvs", "nftables"}, {"ipvs", "iptables"}, {"iptables", "nftables"}}

var modeLine = regexp.MustCompile(`(?m)^(\s*)mode: \S*$`)

// withMode reads files as they are, but the configuration with its mode
// set to mode.
func withMode(config, mode string) func(string) ([]byte, error) {
	return func(path string) ([]byte, error) {
		b, err := os.ReadFile(path)
		if err != nil || path != config {
			return b, err
		}
		if !modeLine.Match(b) {
			return nil, fmt.Errorf("%s: no mode line", path)
		}
		return modeLine.ReplaceAll(b, []byte("${1}mode: "+mode)), nil
	}
}

// migrate runs on every cluster for each pair of modes, and its text
// report equals the golden (go test -update-migrate rewrites them).
func TestReportsMatchGoldens(t *testing.T) {
	cs := clusters(t)
	for _, name := range sortedKeys(cs) {
		for _, p := range pairs {
			c := cs[name]
			t.Run(name+"/"+p[0]+"-"+p[1], func(t *testing.T) {
				r, err := Compare(Options{Cluster: c[0], Config: c[1], To: p[1], ReadFile: withMode(c[1], p[0])})
				if err != nil {
					t.Fatal(err)
				}
				if r.From != p[0] {
					t.Fatalf("from %s, want %s", r.From, p[0])
				}
				var b bytes.Buffer
				if err := r.Text(&b); err != nil {
					t.Fatal(err)
				}
				golden := filepath.Join("testdata", "golden", name+"-"+p[0]+"-"+p[1]+".txt")
				if *update {
					if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
						t.Fatal(err)
					}
					return
				}
				want, err := os.ReadFile(golden)
				if err != nil {
					t.Fatalf("%v (go test ./scenarios/migrate -update-migrate writes it)", err)
				}
				if !bytes.Equal(want, b.Bytes()) {
					t.Fatalf("the report differs from %s (review, then -update-migrate):\n%s", golden, b.String())
				}
			})
		}
	}
}
