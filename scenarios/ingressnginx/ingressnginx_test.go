package ingressnginx_test

import (
	"bytes"
	"runtime"
	"strings"
	"testing"

	"github.com/proxysim/proxysim/scenarios"
	_ "github.com/proxysim/proxysim/scenarios/controllers" // the library holds scenarios of every controller
	_ "github.com/proxysim/proxysim/scenarios/ingressnginx"
	_ "github.com/proxysim/proxysim/scenarios/iptablesmode" // the library holds scenarios of every mode
	_ "github.com/proxysim/proxysim/scenarios/ipvsmode"
	_ "github.com/proxysim/proxysim/scenarios/nftablesmode"
	"github.com/proxysim/proxysim/scenarios/replay"
)

// ingressScenarios are the bundled scenarios that switch the ingress-nginx
// controller on.
func ingressScenarios(t *testing.T) []*scenarios.Scenario {
	t.Helper()
	var out []*scenarios.Scenario
	for _, name := range scenarios.TestedLibraryNames() {
		s, err := scenarios.LoadLibrary(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, on := s.Controllers.On["ingressNginx"]; on {
			out = append(out, s)
		}
	}
	if len(out) < 7 {
		t.Fatalf("only %d ingress scenarios in the library", len(out))
	}
	return out
}

func replayOK(t *testing.T, s *scenarios.Scenario) []byte {
	t.Helper()
	res, err := replay.Replay(s, replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Passed() {
		var b strings.Builder
		for _, f := range res.Failures {
			b.WriteString(f.String() + "\n")
		}
		t.Fatalf("%s failed:\n%s", s.Name, b.String())
	}
	return res.Trace.JSONL()
}

// Every ingress scenario of the library passes and replays byte-identically,
// 100 times (3 with -short), GOMAXPROCS alternating 1 and 2, each run equal
// to the first (the "done when"), under -race as CI runs it too.
func TestIngressScenariosReplayIdentically(t *testing.T) {
	runs := 100
	if testing.Short() {
		runs = 3
	}
	for _, s := range ingressScenarios(t) {
		t.Run(s.Name, func(t *testing.T) {
			first := replayOK(t, s)
			if !bytes.Contains(first, []byte(`"ev":"ingress"`)) {
				t.Fatal("the trace has no ingress event: the controller did not run")
			}
			prev := runtime.GOMAXPROCS(0)
			defer runtime.GOMAXPROCS(prev)
			for i := 1; i < runs; i++ {
				runtime.GOMAXPROCS(1 + i%2)
				if got := replayOK(t, s); !bytes.Equal(got, first) {
					t.Fatalf("run %d differs from the first (%d vs %d bytes)", i+1, len(got), len(first))
				}
			}
		})
	}
}

// One replay of each ingress scenario: the cost of the loop in real time.
func BenchmarkIngressScenarios(b *testing.B) {
	for _, name := range []string{"ingress-rolling-update", "ingress-100-changes", "ingress-ring-overflow"} {
		s, err := scenarios.LoadLibrary(name)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				res, err := replay.Replay(s, replay.Options{})
				if err != nil || !res.Passed() {
					b.Fatal(err, res.Failures)
				}
			}
		})
	}
}
