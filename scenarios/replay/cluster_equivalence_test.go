package replay

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/sim"
	"github.com/proxysim/proxysim/sim/sli"
	"github.com/proxysim/proxysim/sim/trace"
)

// equivalenceScenario is a 3-node cluster in two pools (CPU speeds and
// jitter varied per node, another minSyncPeriod and cost in the second
// pool), 40 generated Services with pods on the three nodes in two zones,
// some Local traffic policies and topology hints, the EndpointSlice
// controller writing slices, and a timeline of pod readiness flips, a
// Service change, a node restart, failed syncs on another node and an
// informer resync (at 15m).
func equivalenceScenario(mode, materialize string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `name: cluster-equivalence-%s
proxy:
  mode: %s
  version: v1.36.0
  minSyncPeriod: 1s
  syncPeriod: 30s
  syncCost: {fixed: 150ms, perEndpoint: 3ms}
controllers:
  endpointSlice: {batchPeriod: 500ms}
cluster:
  seed: 7
  pools:
    - name: a
      count: 2
      zone: zone-a
      labels: {pool: a}
      cpuSpeed: {min: 50%%, max: 150%%}
      syncJitter: 400ms
      materialize: %s
    - name: b
      count: 1
      zone: zone-b
      proxy: {minSyncPeriod: 2s, syncCost: {fixed: 300ms, perService: 1ms}}
      syncJitter: 100ms
      materialize: %s
  generate:
    seed: 3
    services: 40
    endpointsPerService: {3: 70%%, 8: 30%%}
    types: {ClusterIP: 70%%, NodePort: 30%%}
    externalTrafficPolicy: {Cluster: 50%%, Local: 50%%}
    internalTrafficPolicy: {Cluster: 80%%, Local: 20%%}
    pods: true
timeline:
`, mode, mode, materialize, materialize)
	r := rand.New(rand.NewPCG(11, 12))
	ready := map[string]bool{}
	at := 1000 // ms
	for i := range 80 {
		at += 200 + r.IntN(9000)
		svc, ep := r.IntN(40), r.IntN(3)
		pod := fmt.Sprintf("svc-%05d-%d", svc, ep)
		now, seen := ready[pod]
		if !seen {
			now = true
		}
		ready[pod] = !now
		fmt.Fprintf(&b, "  - {at: %dms, podReady: {namespace: gen, name: %s, ready: %v}}\n", at, pod, !now)
		switch i {
		case 20:
			fmt.Fprintf(&b, "  - {at: %dms, node: {name: node-001, restart: true}}\n", at)
		case 35:
			fmt.Fprintf(&b, "  - {at: %dms, node: {name: node-002, failSyncs: 2}}\n", at)
		case 50:
			fmt.Fprintf(&b, "  - {at: %dms, patch: {kind: Service, namespace: gen, name: svc-00004, merge: {metadata: {labels: {changed: \"yes\"}}, spec: {sessionAffinity: ClientIP}}}}\n", at)
		case 60:
			fmt.Fprintf(&b, "  - {at: %dms, node: {name: node-000, restart: true}}\n", at)
		}
	}
	b.WriteString("  - {at: 16m, note: after the informers' resync at 15m}\n")
	return b.String()
}

// THE INVARIANT: each node of a cluster syncs, observes and (materialised)
// programs exactly what a replay of the same scenario for that node alone
// does.
func TestClusterNodeIsItsSingleNodeReplay(t *testing.T) {
	for _, mode := range []string{"iptables", "nftables"} {
		t.Run(mode, func(t *testing.T) {
			for _, mat := range []string{"false", "true"} {
				s, err := scenarios.Parse("equivalence.yaml", []byte(equivalenceScenario(mode, mat)), nil)
				if err != nil {
					t.Fatal(err)
				}
				if len(s.Nodes()) != 3 {
					t.Fatalf("%d nodes, want 3", len(s.Nodes()))
				}
				res, err := Replay(s, Options{KeepNodes: true})
				if err != nil {
					t.Fatal(err)
				}
				if !res.Passed() {
					t.Fatalf("cluster replay failed: %v", res.Failures)
				}
				if res.Cluster == nil || len(res.Cluster.Nodes) != 3 {
					t.Fatalf("no cluster result for 3 nodes: %+v", res.Cluster)
				}
				for _, nr := range res.Cluster.Nodes {
					one, err := s.NodeScenario(nr.Name)
					if err != nil {
						t.Fatal(err)
					}
					var dp scenarios.Dataplane
					var sw *sim.World
					single, err := Replay(one, Options{
						Follow: func(_ trace.Event, d scenarios.Dataplane) { dp = d },
						World:  func(w *sim.World) error { sw = w; return nil },
					})
					if err != nil {
						t.Fatal(err)
					}
					where := fmt.Sprintf("%s, materialize %s, node %s", mode, mat, nr.Name)
					t.Logf("%s: %d syncs (%d failed), %d samples (worst %v), %d pod latencies, %d restarts, busy %v",
						where, nr.Syncs, nr.FailedSyncs, nr.Samples, nr.Worst, len(nr.PodLatencies), len(nr.Restarts), nr.Busy)
					if single.Cluster != nil {
						t.Fatalf("%s: the node's own scenario has a cluster", where)
					}
					// Without materialize, no node has a dataplane, the
					// first included: nothing in the scenario looks at one.
					full := mat == "true"
					if !full && nr.Dataplane != "" {
						t.Errorf("%s: materialised, though nothing looks at its dataplane", where)
					}
					compareRuns(t, where, nr.Runs, single.Runs, full)
					if !reflect.DeepEqual(nr.Programming, single.Programming) {
						t.Errorf("%s: %d samples in the cluster, %d alone; first differing: %s", where, len(nr.Programming), len(single.Programming), firstDiff(nr.Programming, single.Programming))
					}
					if pods := sw.PodLatencies(); !reflect.DeepEqual(nr.PodLatencies, pods) || len(pods) < 10 {
						t.Errorf("%s: pod latencies in the cluster %v, alone %v", where, nr.PodLatencies, pods)
					}
					if full {
						want, err := dp.Snapshot()
						if err != nil {
							t.Fatal(err)
						}
						if nr.Dataplane != want {
							t.Errorf("%s: dataplane differs from its replay alone:\n%s", where, strings.Join(LineDiff(want, nr.Dataplane), "\n"))
						}
					}
					if len(nr.Programming) < 20 || len(nr.Runs) < 20 {
						t.Errorf("%s: only %d samples and %d syncs: the scenario exercises too little", where, len(nr.Programming), len(nr.Runs))
					}
				}
				// The nodes differ from one another: the comparison above
				// is not of three copies of one node.
				a, b := res.Cluster.Nodes[0], res.Cluster.Nodes[2]
				if reflect.DeepEqual(a.Programming, b.Programming) {
					t.Errorf("%s: node-000 and node-002 observed the same samples", mode)
				}
			}
		})
	}
}

// compareRuns compares two sync lists; a light node's work is only its
// size (it programs nothing).
func compareRuns(t *testing.T, where string, got, want []sim.SyncRecord, full bool) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d syncs in the cluster, %d alone", where, len(got), len(want))
	}
	for i := range min(len(got), len(want)) {
		g, w := got[i], want[i]
		if !full {
			w.Work = sim.SyncWork{ServicePorts: w.Work.ServicePorts, Endpoints: w.Work.Endpoints}
		}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s: sync %d differs:\n cluster %+v\n alone   %+v", where, i+1, g, w)
			return
		}
	}
}

func firstDiff(a, b []sim.ProgrammingSample) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf("#%d %+v vs %+v", i, a[i], b[i])
		}
	}
	return "one is a prefix of the other"
}

// Light nodes fold their samples into their SLI scrapes as they come and
// keep no samples (unless asked); the SLI and the pod latencies must be
// what every node's kept samples give (a restarted light node included).
func TestClusterSLIRecordedIsKept(t *testing.T) {
	s, err := scenarios.Parse("equivalence.yaml", []byte(equivalenceScenario("iptables", "false")), nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Replay(s, Options{KeepNodes: true})
	if err != nil {
		t.Fatal(err)
	}
	c := res.Cluster
	agg := sli.New(sli.Config{Nodes: len(c.Nodes)}, s.Length())
	var pods []time.Duration
	restarted := 0
	for i, nr := range c.Nodes {
		obs := make([]sli.Observation, 0, len(nr.Programming))
		for _, p := range nr.Programming {
			obs = append(obs, sli.Observation{At: p.At, Seconds: p.Value.Seconds()})
		}
		if len(obs) == 0 {
			t.Fatalf("node %s kept no samples", nr.Name)
		}
		if i > 0 && len(nr.Restarts) > 0 {
			restarted++
		}
		phase := scrapePhase(s, i, agg.Config().ScrapeInterval)
		if err := agg.Add(sli.Node{Name: nr.Name, Phase: phase, Observations: obs, Restarts: nr.Restarts}); err != nil {
			t.Fatal(err)
		}
		pods = append(pods, nr.PodLatencies...)
	}
	if restarted == 0 {
		t.Fatal("no light node restarted: the case is not covered")
	}
	if got, want := fmt.Sprintf("%#v", c.SLI), fmt.Sprintf("%#v", agg.Result()); got != want {
		t.Errorf("recorded SLI differs from the kept samples':\n got %s\nwant %s", got, want)
	}
	slices.Sort(pods)
	q := func(f float64) time.Duration { return pods[max(int(math.Ceil(f*float64(len(pods)))), 1)-1] }
	if c.PodChanges != len(pods) || c.Pod50 != q(0.5) || c.Pod90 != q(0.9) || c.Pod99 != q(0.99) || c.PodMax != pods[len(pods)-1] {
		t.Errorf("pod latency %d changes, %v %v %v %v; kept: %d, %v %v %v %v", c.PodChanges, c.Pod50, c.Pod90, c.Pod99, c.PodMax,
			len(pods), q(0.5), q(0.9), q(0.99), pods[len(pods)-1])
	}
}
