package replay

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/sim"
	"github.com/proxysim/proxysim/sim/proxy"
	"github.com/proxysim/proxysim/sim/runner"
	"github.com/proxysim/proxysim/sim/sli"
	"github.com/proxysim/proxysim/sim/vclock"
)

// A cluster of pools replays in one world: the first node is the world's
// own proxy (what every other expectation and step talks to), the others
// are sim.Nodes hearing the same events. See docs/cluster.md.

// ClusterResult is what every node of cluster.pools did.
type ClusterResult struct {
	Nodes []NodeResult
	// SLI is network programming latency as ClusterLoader2 computes it
	// from every node's network_programming_duration_seconds, with the
	// exact quantiles of the same samples beside it.
	SLI sli.Result
	// PodChanges counts the pod readiness changes every node programmed;
	// Pod50, Pod90, Pod99 and PodMax are the exact quantiles of their true
	// latency (from the change to the end of the sync that programmed it)
	// over every node.
	PodChanges                  int
	Pod50, Pod90, Pod99, PodMax time.Duration
}

// NodeResult is one node's part.
type NodeResult struct {
	Name, Pool string
	sim.NodeStats
	Restarts []time.Duration
	// CPUPerHour is the CPU-seconds of syncing per node-hour: the syncs'
	// virtual durations over the run's length.
	CPUPerHour float64
	// Runs, Programming and PodLatencies are kept for the world's own node
	// and materialised nodes, and for every node with Options.KeepNodes.
	Runs         []sim.SyncRecord
	Programming  []sim.ProgrammingSample
	PodLatencies []time.Duration
	// Dataplane is a materialised node's dataplane at the end (the mode's
	// Snapshot).
	Dataplane string
}

// addNodes adds cluster.pools' other nodes to the world, each
// materialised one with a fake dataplane of its own.
func (r *replayer) addNodes(clk *vclock.Clock) error {
	nodes := r.s.Nodes()
	if len(nodes) < 2 {
		return nil
	}
	r.nodeDPs = map[string]scenarios.Dataplane{}
	// Light nodes fold their samples into their SLI scrapes as they come,
	// their values into one exact set.
	cfg := sli.Config{Nodes: len(nodes)}
	truth := &sli.Exact{}
	for i, n := range nodes[1:] {
		if !r.opts.Shard.runs(i + 1) {
			continue // another shard's node
		}
		rc := RunnerConfig(n.Proxy)
		spec := sim.NodeSpec{Name: n.Name, Zone: n.Proxy.Zone, Runner: rc, Cost: n.Proxy.SyncCost.Model(),
			WatchDelay: n.WatchDelay, Keep: r.opts.KeepNodes,
			Endpoints: proxy.EndpointSliceTrackerOptions{IgnoreNodeHints: rc.Generation == runner.Burst}}
		if !n.Materialize {
			spec.SLI = sli.NewRecorder(cfg, scrapePhase(r.s, i+1, sli.ScrapeIntervalFor(len(nodes))), truth)
		}
		if !n.Materialize && spec.Cost.Work != nil {
			lw, err := r.lightWorkFor(n, spec.Endpoints.IgnoreNodeHints)
			if err != nil {
				return err
			}
			spec.LightWork = lw
		}
		if n.Materialize {
			ns, err := r.s.NodeScenario(n.Name)
			if err != nil {
				return err
			}
			mode, ok := scenarios.LookupMode(n.Proxy.Mode)
			if !ok {
				return fmt.Errorf("%s: node %s: mode %q is not registered", r.s.File, n.Name, n.Proxy.Mode)
			}
			dp, err := mode.Fake(ns, clk)
			if err != nil {
				return fmt.Errorf("%s: node %s: %w", r.s.File, n.Name, err)
			}
			r.nodeDPs[n.Name] = dp
			spec.NewBackend = dp.NewBackend
		}
		if _, err := r.w.AddNode(spec); err != nil {
			return fmt.Errorf("%s: %w", r.s.File, err)
		}
	}
	return nil
}

func (r *replayer) closeNodes() {
	for _, dp := range r.nodeDPs {
		dp.Close()
	}
}

// scrapePhase is when in each scrape interval Prometheus scrapes the
// scenario's node i, seeded.
func scrapePhase(s *scenarios.Scenario, i int, interval time.Duration) time.Duration {
	var seed uint64
	if s.Cluster != nil && s.Cluster.Seed != nil {
		seed = uint64(*s.Cluster.Seed)
	}
	return time.Duration(math.Floor(float64(interval) * scenarios.Uniform(seed, i, 3)))
}

// clusterSLI pools every node's samples up to the instant end: light
// nodes' as they recorded them, the others' kept ones.
func clusterSLI(s *scenarios.Scenario, w *sim.World, end time.Duration) (sli.Result, error) {
	agg, err := clusterAggregate(s, w, end, true)
	if err != nil {
		return sli.Result{}, err
	}
	return agg.Result(), nil
}

// clusterAggregate is clusterSLI's aggregate of the nodes in the world
// (a shard's), the world's own proxy only if own.
func clusterAggregate(s *scenarios.Scenario, w *sim.World, end time.Duration, own bool) (*sli.Aggregate, error) {
	cfg := sli.Config{Nodes: len(s.Nodes())}
	agg := sli.New(cfg, end)
	interval := agg.Config().ScrapeInterval
	var truth *sli.Exact
	for i, n := range s.Nodes() {
		samples, restarts := w.Observations(), w.Restarts()
		if i == 0 && !own {
			continue
		}
		if i > 0 {
			node, ok := w.Node(n.Name)
			if !ok {
				continue // another shard's
			}
			if rec := node.Spec().SLI; rec != nil && !node.Materialised() {
				if err := agg.AddRecorded(n.Name, rec); err != nil {
					return nil, err
				}
				truth = rec.Truth()
				continue
			}
			samples, restarts = node.Observations(), node.Restarts()
		}
		obs := make([]sli.Observation, 0, len(samples))
		for _, p := range samples {
			if p.At > end {
				break
			}
			obs = append(obs, sli.Observation{At: p.At, Seconds: p.Value.Seconds()})
		}
		if err := agg.Add(sli.Node{Name: n.Name, Phase: scrapePhase(s, i, interval), Observations: obs, Restarts: restarts}); err != nil {
			return nil, err
		}
	}
	if truth != nil {
		agg.Truth(truth)
	}
	return agg, nil
}

// clusterResult sums up every node at the end of the replay.
func (r *replayer) clusterResult() (*ClusterResult, error) {
	s, w := r.s, r.w
	end := w.Now()
	res, err := clusterSLI(s, w, end)
	if err != nil {
		return nil, err
	}
	out := &ClusterResult{SLI: res}
	for i, n := range s.Nodes() {
		nr := NodeResult{Name: n.Name, Pool: n.Pool}
		if i == 0 {
			nr.NodeStats, nr.Restarts = w.Stats(), w.Restarts()
			nr.Runs, nr.Programming, nr.PodLatencies = w.Syncs(), w.ProgrammingSamples(), w.PodLatencies()
			if snap, err := r.dp.Snapshot(); err == nil && !w.Light() {
				nr.Dataplane = snap
			}
		} else {
			node, _ := w.Node(n.Name)
			nr.NodeStats, nr.Restarts = node.Stats(), node.Restarts()
			nr.Runs, nr.Programming, nr.PodLatencies = node.Syncs(), node.ProgrammingSamples(), node.PodLatencies()
			if dp := r.nodeDPs[n.Name]; dp != nil {
				snap, err := dp.Snapshot()
				if err != nil {
					return nil, fmt.Errorf("node %s: %w", n.Name, err)
				}
				nr.Dataplane = snap
			}
		}
		if end > 0 {
			nr.CPUPerHour = nr.Busy.Seconds() / end.Hours()
		}
		out.Nodes = append(out.Nodes, nr)
	}
	var total int64
	out.Pod50, total = w.PodLatencyQuantile(0.5)
	out.Pod90, _ = w.PodLatencyQuantile(0.9)
	out.Pod99, _ = w.PodLatencyQuantile(0.99)
	out.PodMax, _ = w.PodLatencyQuantile(1)
	out.PodChanges = int(total)
	return out, nil
}

// reportCluster writes the cluster's figures under a replay's line.
func reportCluster(w io.Writer, c *ClusterResult) {
	sl := c.SLI
	fmt.Fprintf(w, "  cluster: %d nodes, %d programming samples\n", len(c.Nodes), sl.Samples)
	fmt.Fprintf(w, "  SLI (as ClusterLoader2): perc50 %s, perc90 %s, perc99 %s; exact: p50 %s, p90 %s, p99 %s\n",
		secondsText(sl.Perc50), secondsText(sl.Perc90), secondsText(sl.Perc99), secondsText(sl.True50), secondsText(sl.True90), secondsText(sl.True99))
	fmt.Fprintf(w, "  true pod latency: %d changes programmed, p50 %v, p90 %v, p99 %v, max %v\n", c.PodChanges, c.Pod50, c.Pod90, c.Pod99, c.PodMax)
	shown := c.Nodes
	if len(shown) > 10 {
		// The ten slowest by worst sample.
		shown = slices.Clone(shown)
		slices.SortStableFunc(shown, func(a, b NodeResult) int { return cmp.Compare(b.Worst, a.Worst) })
		shown = shown[:10]
		fmt.Fprintf(w, "  the 10 nodes with the worst samples:\n")
	}
	for _, n := range shown {
		fmt.Fprintf(w, "  node %s (%s): %d syncs (%d failed), %.1f CPU-s/node-hour, worst sample %v, worst pod %v, %d restarts\n",
			n.Name, n.Pool, n.Syncs, n.FailedSyncs, n.CPUPerHour, n.Worst, n.WorstPod, len(n.Restarts))
	}
}

func secondsText(v float64) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	return seconds(v)
}

func doNodeStep(n *scenarios.NodeStep, r *Run) error {
	a := n.Node
	if a == nil {
		return nil
	}
	w := r.World()
	node, other := w.Node(a.Name)
	if !other && a.Name != w.Config().NodeName && r.r.opts.Shard.Count > 0 {
		// Another shard's node: traced as the whole cluster's replay
		// traces it, so the world's own node sees the same in every shard.
		switch {
		case a.Restart:
			r.Step("restart", "node "+a.Name, "")
		case a.FailSyncs != nil:
			r.Step("fault", "node "+a.Name, fmt.Sprintf("next %d syncs fail", *a.FailSyncs))
		}
		return nil
	}
	if !other && a.Name != w.Config().NodeName {
		// A node replayed alone (Scenario.NodeScenario): another node's
		// step is not this replay's.
		r.Step("note", "", "node "+a.Name+" is not in this replay")
		return nil
	}
	switch {
	case a.Restart:
		r.Step("restart", "node "+a.Name, "")
		if other {
			return node.Restart()
		}
		return w.Restart()
	case a.FailSyncs != nil:
		r.Step("fault", "node "+a.Name, fmt.Sprintf("next %d syncs fail", *a.FailSyncs))
		if other {
			node.FailSyncs(*a.FailSyncs)
		} else {
			w.FailSyncs(*a.FailSyncs)
		}
	}
	return nil
}

func checkClusterExpectation(e *scenarios.ClusterExpectation, r *Run) {
	c := e.Cluster
	if c == nil {
		return
	}
	s, w := r.r.s, r.World()
	if len(s.Nodes()) == 0 {
		return // one node replayed alone (Scenario.NodeScenario): no cluster to judge
	}
	if r.r.opts.Shard.Count > 0 {
		// A shard sees some of the nodes: it keeps its part, and the
		// merge judges the whole (see shard.go).
		r.r.checkpoint(r, c)
		return
	}
	var f clusterFigures
	if c.ProgrammingLatency != nil || c.ExactLatency != nil {
		f.sli, f.sliErr = clusterSLI(s, w, w.Now())
	}
	if c.PodLatency != nil {
		f.pod = [3]float64{math.NaN(), math.NaN(), math.NaN()}
		if p50, total := w.PodLatencyQuantile(0.5); total > 0 {
			p90, _ := w.PodLatencyQuantile(0.9)
			p99, _ := w.PodLatencyQuantile(0.99)
			f.pod = [3]float64{p50.Seconds(), p90.Seconds(), p99.Seconds()}
		}
	}
	if c.Syncs != nil {
		f.syncs = []int{w.Stats().Syncs}
		f.names = []string{s.Nodes()[0].Name}
		for _, node := range w.Nodes() {
			f.syncs = append(f.syncs, node.Stats().Syncs)
			f.names = append(f.names, node.Name())
		}
	}
	judgeClusterExpect(c, f, r.Fail)
}

// clusterFigures are what a cluster expectation reads: the SLI (with the
// exact quantiles), the true pod latency's quantiles (NaN without
// samples), and every node's sync count, in the nodes' order.
type clusterFigures struct {
	sli    sli.Result
	sliErr error
	pod    [3]float64
	syncs  []int
	names  []string
}

// judgeClusterExpect checks the figures against c's bounds, reporting what does not
// hold: the same words from one process or merged shards.
func judgeClusterExpect(c *scenarios.ClusterExpect, f clusterFigures, fail func(p scenarios.Pos, what, expected, got string)) {
	if c.ProgrammingLatency != nil || c.ExactLatency != nil {
		if f.sliErr != nil {
			fail(c.Src.At("programmingLatency"), "cluster.programmingLatency", "an SLI", f.sliErr.Error())
			return
		}
		res := f.sli
		checkQuantiles(fail, "cluster.programmingLatency", c.ProgrammingLatency, [3]float64{res.Perc50, res.Perc90, res.Perc99})
		checkQuantiles(fail, "cluster.exactLatency", c.ExactLatency, [3]float64{res.True50, res.True90, res.True99})
	}
	if c.PodLatency != nil {
		checkQuantiles(fail, "cluster.podLatency", c.PodLatency, f.pod)
	}
	if n := c.Syncs; n != nil {
		for i, k := range f.syncs {
			if n.AtLeast != nil && k < *n.AtLeast {
				fail(n.Src.At("atLeast"), "cluster.syncs", fmt.Sprintf("every node at least %d", *n.AtLeast), fmt.Sprintf("%d on %s", k, f.names[i]))
				break
			}
			if n.AtMost != nil && k > *n.AtMost {
				fail(n.Src.At("atMost"), "cluster.syncs", fmt.Sprintf("every node at most %d", *n.AtMost), fmt.Sprintf("%d on %s", k, f.names[i]))
				break
			}
		}
	}
}

func checkQuantiles(fail func(p scenarios.Pos, what, expected, got string), what string, q *scenarios.QuantileBounds, got [3]float64) {
	if q == nil {
		return
	}
	for i, b := range []*scenarios.Bound{q.P50, q.P90, q.P99} {
		if b == nil {
			continue
		}
		key := []string{"p50", "p90", "p99"}[i]
		v := got[i]
		if math.IsNaN(v) {
			fail(q.Src.At(key), what+"."+key, "a value", "no samples")
			continue
		}
		if b.Max != nil && v > b.Max.D().Seconds() {
			fail(b.Src.At("max"), what+"."+key, "at most "+b.Max.String(), seconds(v))
		}
		if b.Min != nil && v < b.Min.D().Seconds() {
			fail(b.Src.At("min"), what+"."+key, "at least "+b.Min.String(), seconds(v))
		}
	}
}
