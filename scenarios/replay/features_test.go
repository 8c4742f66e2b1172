package replay

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/sim/trace"
)

// Every file under testdata/features is a scenario that exercises one or
// more features of the format and must pass.
func TestFeatureScenariosPass(t *testing.T) {
	files, _ := filepath.Glob("../testdata/features/*.yaml")
	if len(files) == 0 {
		t.Fatal("no scenarios under testdata/features")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			res := replayFile(t, f)
			if res.Checks == 0 {
				t.Fatal("a scenario that checks nothing proves nothing")
			}
			if !res.Passed() {
				t.Fatal(failureText(res.Failures))
			}
		})
	}
}

// Every file under testdata/failing declares, in "# want-fail: LINE WHAT at
// INSTANT" comments, each expectation that must fail: the line it is
// written on, what it checks (as Failure.What) and the virtual instant of
// the failure. The replay must fail exactly there and nowhere else. These
// expectations are wrong only because the feature they watch works: each
// has a passing twin under testdata/features or in the library.
func TestFailingScenariosFailExactlyWhereDeclared(t *testing.T) {
	files, _ := filepath.Glob("../testdata/failing/*.yaml")
	if len(files) < 2 {
		t.Fatalf("only %d failing scenarios", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			want := wantFailures(t, f)
			res := replayFile(t, f)
			var got []string
			for _, fl := range res.Failures {
				got = append(got, fmt.Sprintf("%d %s at %v", fl.Pos.Line, fl.What, fl.At))
			}
			sort.Strings(got)
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("failures differ\n got:\n  %s\n want:\n  %s\ndetails:\n%s",
					strings.Join(got, "\n  "), strings.Join(want, "\n  "), failureText(res.Failures))
			}
		})
	}
}

func replayFile(t *testing.T, file string) *Result {
	t.Helper()
	s, err := scenarios.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Replay(s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func failureText(fs []Failure) string {
	var b strings.Builder
	for _, f := range fs {
		fmt.Fprintf(&b, "%s (%s)\n  expected: %s\n  got:      %s\n", f, f.What, f.Expected, f.Got)
	}
	return b.String()
}

// wantFailures reads a file's "# want-fail: LINE WHAT at INSTANT" comments,
// normalised and sorted.
func wantFailures(t *testing.T, file string) []string {
	t.Helper()
	fh, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	var want []string
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "# want-fail:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 4 || f[2] != "at" {
			t.Fatalf("%s: %q: want '# want-fail: LINE WHAT at INSTANT'", file, sc.Text())
		}
		line, err1 := strconv.Atoi(f[0])
		at, err2 := time.ParseDuration(f[3])
		if err1 != nil || err2 != nil {
			t.Fatalf("%s: %q: bad line or instant", file, sc.Text())
		}
		want = append(want, fmt.Sprintf("%d %s at %v", line, f[1], at))
	}
	if len(want) == 0 {
		t.Fatalf("%s declares no '# want-fail:' line", file)
	}
	sort.Strings(want)
	return want
}

// A resync changes nothing a scenario can check, by design; the trace shows
// it. configSyncPeriod 2m gives one resync of each object at 2m and 4m; 0
// turns resync off (checked past 15m, the default); unset leaves 15m.
func TestConfigSyncPeriodDeliversResyncs(t *testing.T) {
	s, err := scenarios.Load("../testdata/features/config-sync-period.yaml")
	if err != nil {
		t.Fatal(err)
	}
	resyncs := func(s *scenarios.Scenario) string {
		res, err := Replay(s, Options{})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range res.Trace.Events() {
			if e.Kind == trace.Resync {
				got = append(got, fmt.Sprintf("%v %s", time.Duration(e.At), e.Object))
			}
		}
		return strings.Join(got, ", ")
	}
	want := "2m0s Service default/web, 2m0s EndpointSlice default/web-abc, 4m0s Service default/web, 4m0s EndpointSlice default/web-abc"
	if got := resyncs(s); got != want {
		t.Errorf("configSyncPeriod 2m: resyncs\n got  %s\n want %s", got, want)
	}
	s.Proxy.ConfigSyncPeriod = ptr(scenarios.Duration(0))
	s.Timeline[0].At = ptr(scenarios.Duration(16 * time.Minute))
	if got := resyncs(s); got != "" {
		t.Errorf("configSyncPeriod 0: want no resync, got %s", got)
	}
	s.Proxy.ConfigSyncPeriod = nil
	if got, want := resyncs(s), "15m0s Service default/web, 15m0s EndpointSlice default/web-abc"; got != want {
		t.Errorf("configSyncPeriod unset: resyncs\n got  %s\n want %s", got, want)
	}
}

func ptr[T any](v T) *T { return &v }
