package replay

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"k8s.io/utils/clock"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/sim"
)

// A cluster's first node runs light when nothing looks at its dataplane:
// the same replay with the node materialised (Options.MaterializeFirst)
// gives the same syncs (their work too, under a cost profile), samples,
// pod latencies, SLI and other nodes; only the dataplane, and its part of
// the trace, is missing. The scenario restarts the first node and churns
// Services, so both the restart and partial syncs are covered.
func TestClusterFirstNodeLight(t *testing.T) {
	for _, mode := range []string{"iptables", "nftables"} {
		for _, cost := range []string{"fixed", "profile"} {
			t.Run(mode+"/"+cost, func(t *testing.T) {
				src := profileChurnScenario(mode, "false", 60, "0s", 4)
				if cost == "fixed" {
					src = strings.Replace(src, "syncCost: {profile: default}", "syncCost: {fixed: 150ms, perEndpoint: 3ms}", 1)
				}
				if !strings.Contains(src, "node: {name: node-000, restart: true}") {
					t.Fatal("the scenario no longer restarts the first node")
				}
				s, err := scenarios.Parse("first.yaml", []byte(src), nil)
				if err != nil {
					t.Fatal(err)
				}
				replay := func(materialize bool) *Result {
					res, err := Replay(s, Options{KeepNodes: true, MaterializeFirst: materialize})
					if err != nil {
						t.Fatal(err)
					}
					if !res.Passed() {
						t.Fatalf("materialize %v: %v", materialize, res.Failures)
					}
					return res
				}
				light, full := replay(false), replay(true)
				l, f := light.Cluster.Nodes[0], full.Cluster.Nodes[0]
				if l.Dataplane != "" || light.DataplaneOps != 0 {
					t.Errorf("light first node: dataplane %d bytes, %d dataplane ops; want none", len(l.Dataplane), light.DataplaneOps)
				}
				if f.Dataplane == "" || full.DataplaneOps == 0 {
					t.Fatalf("materialised first node: no dataplane (%d ops)", full.DataplaneOps)
				}
				compareRuns(t, mode+" first node", l.Runs, f.Runs, cost == "profile")
				if !reflect.DeepEqual(l.Programming, f.Programming) || !reflect.DeepEqual(l.PodLatencies, f.PodLatencies) {
					t.Errorf("samples or pod latencies differ: %d and %d samples, %d and %d pod latencies", len(l.Programming), len(f.Programming), len(l.PodLatencies), len(f.PodLatencies))
				}
				if len(l.Restarts) != 1 || len(l.Runs) < 20 {
					t.Errorf("the first node restarted %d times and synced %d times: the scenario exercises too little", len(l.Restarts), len(l.Runs))
				}
				if cost == "profile" {
					partial := 0
					for _, r := range l.Runs {
						if strings.Contains(r.Work.String(), "partial") {
							partial++
						}
					}
					if partial < 10 {
						t.Errorf("only %d partial syncs with work", partial)
					}
				}
				// (printed: an empty window's quantile is NaN, never DeepEqual)
				if a, b := fmt.Sprintf("%+v", light.Cluster.SLI), fmt.Sprintf("%+v", full.Cluster.SLI); a != b {
					t.Errorf("SLI differs:\n%s\nvs\n%s", a, b)
				}
				for i := 1; i < len(light.Cluster.Nodes); i++ {
					a, b := light.Cluster.Nodes[i], full.Cluster.Nodes[i]
					if !reflect.DeepEqual(a.NodeStats, b.NodeStats) || !reflect.DeepEqual(a.Runs, b.Runs) {
						t.Errorf("node %s differs with the first node light", a.Name)
					}
				}
			})
		}
	}
}

// Anything that may look at the first node's dataplane materialises it: a
// step or expectation without the DataplaneBlind mark, a pool's
// materialize, the caller's dataplane, trace stream or world.
func TestClusterFirstNodeMaterialisedWhenLookedAt(t *testing.T) {
	base := equivalenceScenario("iptables", "false")
	load := func(src string) *scenarios.Scenario {
		s, err := scenarios.Parse("first.yaml", []byte(src), nil)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if looksAtDataplane(load(base), Options{}) {
		t.Fatal("the base scenario looks at the dataplane")
	}
	for name, src := range map[string]string{
		"ops expectation": base + "  - {at: 16m, expect: {dataplaneOps: {atLeast: 1}}}\n",
		"fault":           base + "  - {at: 16m, fault: {restoreFailures: 1}}\n",
		"pool":            strings.Replace(base, "materialize: false", "materialize: true", 1),
	} {
		s := load(src)
		if !looksAtDataplane(s, Options{}) {
			t.Errorf("%s: the first node would run light", name)
		}
	}
	s := load(base)
	for name, o := range map[string]Options{
		"MaterializeFirst": {MaterializeFirst: true},
		"Dataplane":        {Dataplane: func(s *scenarios.Scenario, _ clock.PassiveClock) (scenarios.Dataplane, error) { return nil, nil }},
		"TraceStream":      {TraceStream: &strings.Builder{}},
		"World":            {World: func(*sim.World) error { return nil }},
		"Update":           {Update: true},
	} {
		if !looksAtDataplane(s, o) {
			t.Errorf("%s: the first node would run light", name)
		}
	}
	// A single node is always materialised.
	one, err := s.NodeScenario("node-000")
	if err != nil {
		t.Fatal(err)
	}
	if !looksAtDataplane(one, Options{}) {
		t.Error("a single node would run light")
	}
}
