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
	"time"

	"github.com/proxysim/proxysim/sim"
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

// The indexed tracers (FrozenTracer) give every connection of every
// cluster exactly what each mode's own tracer gives, masquerade included.
func TestFrozenTracersAgreeWithTheModes(t *testing.T) {
	cs := clusters(t)
	n := 0
	for _, name := range sortedKeys(cs) {
		c := cs[name]
		for _, p := range pairs {
			r, err := Compare(Options{Cluster: c[0], Config: c[1], To: p[1], ReadFile: withMode(c[1], p[0])})
			if err != nil {
				t.Fatal(err)
			}
			for _, sd := range r.sides {
				for _, pr := range r.cluster.probes() {
					pkt, _ := packet(pr)
					a1, m1, err1 := sd.tracer[pr.Via].RouteMasquerade(pkt)
					dp, err := sd.dataplane(pr.Via)
					if err != nil {
						t.Fatal(err)
					}
					a2, m2, err2 := dp.RouteMasquerade(pkt)
					if (err1 == nil) != (err2 == nil) || a1.String() != a2.String() || m1.String() != m2.String() {
						t.Fatalf("%s %s %s: frozen %v %v %v, the mode's %v %v %v", name, sd.Mode, pr.Key(), a1, m1, err1, a2, m2, err2)
					}
					n++
				}
			}
		}
	}
	if n < 500 {
		t.Fatalf("only %d connections compared", n)
	}
}

// With both modes' costs, timing gives each node's initial sync in each
// mode by the cost of its work; without one, it says so.
func TestTimingUsesTheCosts(t *testing.T) {
	c := clusters(t)["nodeport-localhost"]
	perWrite := func(w sim.SyncWork) time.Duration {
		switch {
		case w.IPTables != nil:
			return time.Duration(w.IPTables.Total().Lines) * time.Millisecond
		case w.NFTables != nil:
			return time.Duration(w.NFTables.Ops.Total()) * time.Millisecond
		}
		return 0
	}
	r, err := Compare(Options{Cluster: c[0], Config: c[1], To: "nftables", Costs: map[string]sim.WorkCost{"iptables": sim.WorkCostFunc(perWrite), "nftables": sim.WorkCostFunc(perWrite)}})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Timing.Compared || len(r.Timing.Nodes) != 2 {
		t.Fatalf("%+v", r.Timing)
	}
	for i, n := range r.Timing.Nodes {
		want := [2]time.Duration{perWrite(r.sides[0].results[n.Node].Runs[0].Work), perWrite(r.sides[1].results[n.Node].Runs[0].Work)}
		if n.Before != want[0] || n.After != want[1] || n.Before == 0 || n.After == 0 {
			t.Errorf("node %d: %+v, want %v", i, n, want)
		}
	}
	r, err = Compare(Options{Cluster: c[0], Config: c[1], To: "nftables", Costs: map[string]sim.WorkCost{"nftables": sim.WorkCostFunc(perWrite)}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Timing.Compared || r.Timing.Note != "timing is not compared: no cost profile for the iptables mode (sim/costprofile)" {
		t.Fatalf("%+v", r.Timing)
	}
}
