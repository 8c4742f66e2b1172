package replay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/sim/sli"
)

// A cluster replay split across processes (docs/cluster.md, "Sharding"):
// each shard runs the API server, the controllers and the world's own
// proxy (node 0), which make the event stream every node hears, and only
// its share of the other nodes. It writes a ShardResult: its nodes'
// results, its part of the SLI (rate sums and exact values) and of the
// true pod latency, at the end and at every cluster expectation. Merging
// the shards joins those parts exactly and judges the cluster
// expectations: the same bytes as one process gives (ClusterReportOf).

// Shard selects the nodes one process of a sharded cluster replay runs:
// node i when i modulo Count is Index, and the world's own proxy (node 0)
// in every shard, reported by shard 0. The zero Shard runs every node.
type Shard struct{ Index, Count int }

// runs reports whether the shard runs node i of cluster.pools.
func (s Shard) runs(i int) bool { return s.Count == 0 || i == 0 || i%s.Count == s.Index }

// reports reports whether the shard reports node i.
func (s Shard) reports(i int) bool { return s.Count == 0 || i%s.Count == s.Index }

func (s Shard) String() string { return fmt.Sprintf("%d/%d", s.Index, s.Count) }

// ShardFormat is the version of the shard file's layout.
const ShardFormat = 1

// ShardResult is one shard's part of a cluster replay, as JSON in a shard
// file (docs/cluster.md lists its fields).
type ShardResult struct {
	Format   int    `json:"format"`
	Scenario string `json:"scenario"`
	File     string `json:"file"`
	// Digest is the scenario source's SHA-256: shards merge only when
	// they replayed the same source.
	Digest string `json:"digest"`
	Shard  int    `json:"shard"`
	Shards int    `json:"shards"`
	// Nodes names every node of cluster.pools, in order.
	Nodes  []string      `json:"nodes"`
	Length time.Duration `json:"length"`
	Checks int           `json:"checks"`
	// Failures are the expectations on the world's own node that did not
	// hold: every shard has the same.
	Failures []ShardFailure `json:"failures"`
	// Checkpoints are the shard's part at every cluster expectation, in
	// the replay's order.
	Checkpoints []Checkpoint `json:"checkpoints"`
	// Final is the shard's part at the end; Results its nodes' results.
	Final   ShardPart   `json:"final"`
	Results []ShardNode `json:"results"`
}

// ShardFailure is a Failure without its trace.
type ShardFailure struct {
	Pos      scenarios.Pos `json:"pos"`
	At       time.Duration `json:"at"`
	What     string        `json:"what"`
	Expected string        `json:"expected"`
	Got      string        `json:"got"`
}

// Checkpoint is a shard's part when a cluster expectation was checked.
type Checkpoint struct {
	Step int           `json:"step"`
	At   time.Duration `json:"at"`
	// Before counts the failures on the world's own node before this
	// expectation's: where its own go.
	Before int                      `json:"before"`
	Expect *scenarios.ClusterExpect `json:"expect"`
	Part   ShardPart                `json:"part"`
}

// ShardPart is a shard's share of the cluster's figures at one instant.
type ShardPart struct {
	SLI   *sli.Part      `json:"sli,omitempty"`
	Pod   *sli.ExactData `json:"pod,omitempty"`
	Syncs []NodeSyncs    `json:"syncs,omitempty"`
}

// NodeSyncs is a node's sync count, by its index in cluster.pools.
type NodeSyncs struct {
	Node  int `json:"node"`
	Syncs int `json:"syncs"`
}

// ShardNode is one node's result in a shard file (NodeResult without
// its kept records).
type ShardNode struct {
	Index      int             `json:"index"`
	Name       string          `json:"name"`
	Pool       string          `json:"pool"`
	Syncs      int             `json:"syncs"`
	Failed     int             `json:"failedSyncs"`
	Busy       time.Duration   `json:"busy"`
	Samples    int             `json:"samples"`
	Worst      time.Duration   `json:"worst"`
	WorstPod   time.Duration   `json:"worstPod"`
	Restarts   []time.Duration `json:"restarts,omitempty"`
	CPUPerHour float64         `json:"cpuPerHour"`
	Dataplane  string          `json:"dataplane,omitempty"`
}

// checkShard refuses what a shard cannot replay: a scenario without
// pools, or a cluster expectation re-checked until a deadline (whether it
// holds is only known when the shards are merged).
func checkShard(s *scenarios.Scenario, sh Shard) error {
	if sh.Count == 0 {
		return nil
	}
	if sh.Count < 0 || sh.Index < 0 || sh.Index >= sh.Count {
		return fmt.Errorf("shard %d/%d: want I/N with 0 ≤ I < N", sh.Index, sh.Count)
	}
	if len(s.Nodes()) == 0 {
		return fmt.Errorf("%s: shard %s: not a cluster (no cluster.pools): only a cluster's nodes can be sharded", s.File, sh)
	}
	for i, st := range s.Timeline {
		if st.Expect == nil || st.Expect.Within == nil {
			continue
		}
		for _, c := range st.Expect.Checks {
			if ce, ok := c.(*scenarios.ClusterExpectation); ok && ce.Cluster != nil {
				return fmt.Errorf("%s:%d:%d: timeline[%d].expect.within: a cluster expectation re-checked until a deadline cannot be sharded (a shard does not know whether it holds); replay it unsharded",
					s.File, st.Expect.Src.Line, st.Expect.Src.Column, i)
			}
		}
	}
	return nil
}

// checkpoint keeps the shard's part for a cluster expectation.
func (r *replayer) checkpoint(run *Run, c *scenarios.ClusterExpect) {
	part, err := r.shardPart(c.ProgrammingLatency != nil || c.ExactLatency != nil, c.PodLatency != nil, c.Syncs != nil)
	if err != nil {
		r.shardErr = err
		return
	}
	r.checkpoints = append(r.checkpoints, Checkpoint{Step: run.step, At: r.w.Now(),
		Before: len(r.res.Failures) + len(run.fails), Expect: c, Part: part})
}

// shardPart is the shard's share of the figures now.
func (r *replayer) shardPart(withSLI, pod, syncs bool) (ShardPart, error) {
	var p ShardPart
	s, w, own := r.s, r.w, r.opts.Shard.reports(0)
	if withSLI {
		agg, err := clusterAggregate(s, w, w.Now(), own)
		if err != nil {
			return p, err
		}
		sp, err := agg.Part()
		if err != nil {
			return p, err
		}
		p.SLI = &sp
	}
	if pod {
		d := w.PodLatencySet(own).Data()
		p.Pod = &d
	}
	if syncs {
		for i, n := range s.Nodes() {
			switch node, ok := w.Node(n.Name); {
			case i == 0 && own:
				p.Syncs = append(p.Syncs, NodeSyncs{0, w.Stats().Syncs})
			case i > 0 && ok:
				p.Syncs = append(p.Syncs, NodeSyncs{i, node.Stats().Syncs})
			}
		}
	}
	return p, nil
}

// shardResult is the shard's file at the end of the replay.
func (r *replayer) shardResult() (*ShardResult, error) {
	s, w := r.s, r.w
	if r.shardErr != nil {
		return nil, r.shardErr
	}
	out := &ShardResult{Format: ShardFormat, Scenario: s.Name, File: s.File, Digest: s.Digest(),
		Shard: r.opts.Shard.Index, Shards: r.opts.Shard.Count, Length: s.Length(), Checks: r.res.Checks,
		Failures: []ShardFailure{}, Checkpoints: r.checkpoints, Results: []ShardNode{}}
	if out.Checkpoints == nil {
		out.Checkpoints = []Checkpoint{}
	}
	for _, n := range s.Nodes() {
		out.Nodes = append(out.Nodes, n.Name)
	}
	for _, f := range r.res.Failures {
		out.Failures = append(out.Failures, ShardFailure{Pos: f.Pos, At: f.At, What: f.What, Expected: f.Expected, Got: f.Got})
	}
	var err error
	if out.Final, err = r.shardPart(true, true, false); err != nil {
		return nil, err
	}
	end := w.Now()
	for i, n := range s.Nodes() {
		if !r.opts.Shard.reports(i) {
			continue
		}
		sn := ShardNode{Index: i, Name: n.Name, Pool: n.Pool}
		if i == 0 {
			st := w.Stats()
			sn.Syncs, sn.Failed, sn.Busy, sn.Samples, sn.Worst, sn.WorstPod = st.Syncs, st.FailedSyncs, st.Busy, st.Samples, st.Worst, st.WorstPod
			sn.Restarts = w.Restarts()
			if snap, err := r.dp.Snapshot(); err == nil && !w.Light() {
				sn.Dataplane = snap
			}
		} else {
			node, _ := w.Node(n.Name)
			st := node.Stats()
			sn.Syncs, sn.Failed, sn.Busy, sn.Samples, sn.Worst, sn.WorstPod = st.Syncs, st.FailedSyncs, st.Busy, st.Samples, st.Worst, st.WorstPod
			sn.Restarts = node.Restarts()
			if dp := r.nodeDPs[n.Name]; dp != nil {
				snap, err := dp.Snapshot()
				if err != nil {
					return nil, fmt.Errorf("node %s: %w", n.Name, err)
				}
				sn.Dataplane = snap
			}
		}
		if end > 0 {
			sn.CPUPerHour = sn.Busy.Seconds() / end.Hours()
		}
		out.Results = append(out.Results, sn)
	}
	return out, nil
}

// JSON is the shard file.
func (r *ShardResult) JSON() []byte {
	b, err := json.MarshalIndent(r, "", " ")
	if err != nil {
		panic(err) // plain values only
	}
	return append(b, '\n')
}

// ReadShard reads a shard file (name for errors).
func ReadShard(name string, data []byte) (*ShardResult, error) {
	var r ShardResult
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("%s: not a cluster shard file: %w", name, err)
	}
	if r.Format != ShardFormat {
		return nil, fmt.Errorf("%s: shard file format %d, this proxysim reads %d", name, r.Format, ShardFormat)
	}
	if r.Shards < 1 || r.Shard < 0 || r.Shard >= r.Shards {
		return nil, fmt.Errorf("%s: shard %d/%d: want I/N with 0 ≤ I < N", name, r.Shard, r.Shards)
	}
	if len(r.Nodes) == 0 {
		return nil, fmt.Errorf("%s: a shard file without the cluster's nodes", name)
	}
	return &r, nil
}

// ClusterReport is a cluster replay's outcome: the cluster's figures and
// every expectation that did not hold. One process (ClusterReportOf) and
// merged shards (MergeShards) give the same.
type ClusterReport struct {
	Scenario string
	Length   time.Duration
	Checks   int
	Cluster  *ClusterResult
	Failures []Failure
}

// ClusterReportOf is an unsharded replay's cluster report.
func ClusterReportOf(res *Result) *ClusterReport {
	return &ClusterReport{Scenario: res.Scenario.Name, Length: res.Scenario.Length(), Checks: res.Checks,
		Cluster: res.Cluster, Failures: res.Failures}
}

// Passed reports whether every expectation held.
func (c *ClusterReport) Passed() bool { return len(c.Failures) == 0 }

// Text writes the report: a status line, the cluster's figures (as replay
// prints them) and each failure without its trace (a merge has none).
func (c *ClusterReport) Text(w io.Writer) {
	status := "PASS"
	if !c.Passed() {
		status = "FAIL"
	}
	fmt.Fprintf(w, "%s %s (%s, %v virtual)\n", status, c.Scenario, plural(c.Checks, "check"), c.Length)
	if c.Cluster != nil {
		reportCluster(w, c.Cluster)
	}
	for _, f := range c.Failures {
		fmt.Fprintf(w, "  %s:%d:%d: %s, at %v\n    expected: %s\n    got:      %s\n", f.File, f.Pos.Line, f.Pos.Column, f.Pos.Path, f.At, oneLine(f.Expected), oneLine(f.Got))
	}
}

// MergeShards joins the shard files of one cluster replay (names for
// errors) into its report: the SLI and true pod latency from every
// shard's part, every node's result, the world's own node's failures, and
// the cluster expectations judged on the whole. The shards must come from
// the same scenario source and shard count, each shard exactly once.
func MergeShards(names []string, shards []*ShardResult) (*ClusterReport, error) {
	if len(shards) == 0 {
		return nil, fmt.Errorf("no shard files to merge")
	}
	first := shards[0]
	seen := map[int]string{}
	for k, s := range shards {
		switch {
		case s.Scenario != first.Scenario:
			return nil, fmt.Errorf("%s: scenario %q, but %s is of %q", names[k], s.Scenario, names[0], first.Scenario)
		case s.Digest != first.Digest:
			return nil, fmt.Errorf("%s: scenario %q from a different source (digest %.12s, %s has %.12s)", names[k], s.Scenario, s.Digest, names[0], first.Digest)
		case s.Shards != first.Shards:
			return nil, fmt.Errorf("%s: shard %d/%d, but %s is one of %d shards", names[k], s.Shard, s.Shards, names[0], first.Shards)
		case !slices.Equal(s.Nodes, first.Nodes) || s.Length != first.Length:
			return nil, fmt.Errorf("%s: another cluster or length than %s", names[k], names[0])
		}
		if prev, ok := seen[s.Shard]; ok {
			return nil, fmt.Errorf("%s: shard %d/%d is also in %s: each shard must be merged once", names[k], s.Shard, s.Shards, prev)
		}
		seen[s.Shard] = names[k]
		// Every shard ran the world's own node alike.
		if s.Checks != first.Checks || !sameJSON(s.Failures, first.Failures) || len(s.Checkpoints) != len(first.Checkpoints) {
			return nil, fmt.Errorf("%s: the world's own node ran otherwise than in %s (checks or failures differ): not the same replay", names[k], names[0])
		}
		for i, cp := range s.Checkpoints {
			f := first.Checkpoints[i]
			if cp.Step != f.Step || cp.At != f.At || cp.Before != f.Before || !sameJSON(cp.Expect, f.Expect) {
				return nil, fmt.Errorf("%s: cluster expectation %d differs from %s's: not the same replay", names[k], i, names[0])
			}
		}
	}
	for i := range first.Shards {
		if _, ok := seen[i]; !ok {
			return nil, fmt.Errorf("shard %d/%d is missing: merge needs every shard of the replay", i, first.Shards)
		}
	}
	parts := func(pick func(*ShardResult) ShardPart) []ShardPart {
		var out []ShardPart
		for _, s := range shards {
			out = append(out, pick(s))
		}
		return out
	}
	rep := &ClusterReport{Scenario: first.Scenario, Length: first.Length, Checks: first.Checks}
	fails := first.Failures
	next := 0
	keep := func(upTo int) {
		for ; next < upTo && next < len(fails); next++ {
			f := fails[next]
			rep.Failures = append(rep.Failures, Failure{File: first.File, Pos: f.Pos, At: f.At, What: f.What, Expected: f.Expected, Got: f.Got})
		}
	}
	for i, cp := range first.Checkpoints {
		fig, err := mergedFigures(first.Nodes, parts(func(s *ShardResult) ShardPart { return s.Checkpoints[i].Part }))
		if err != nil {
			return nil, fmt.Errorf("cluster expectation at %v: %w", cp.At, err)
		}
		keep(cp.Before)
		judgeClusterExpect(cp.Expect, fig, func(p scenarios.Pos, what, expected, got string) {
			rep.Failures = append(rep.Failures, Failure{File: first.File, Pos: p, At: cp.At, What: what, Expected: expected, Got: got})
		})
	}
	keep(len(fails))

	final := parts(func(s *ShardResult) ShardPart { return s.Final })
	agg, err := mergeSLI(final)
	if err != nil {
		return nil, fmt.Errorf("the SLI: %w", err)
	}
	pods, err := mergePods(final)
	if err != nil {
		return nil, err
	}
	c := &ClusterResult{SLI: agg.Result(), Nodes: make([]NodeResult, len(first.Nodes))}
	var total int64
	c.Pod50, total = sli.DurationQuantile(0.5, pods...)
	c.Pod90, _ = sli.DurationQuantile(0.9, pods...)
	c.Pod99, _ = sli.DurationQuantile(0.99, pods...)
	c.PodMax, _ = sli.DurationQuantile(1, pods...)
	c.PodChanges = int(total)
	have := make([]bool, len(first.Nodes))
	for k, s := range shards {
		for _, n := range s.Results {
			if n.Index < 0 || n.Index >= len(have) || n.Name != first.Nodes[n.Index] {
				return nil, fmt.Errorf("%s: node %d %q is not the cluster's", names[k], n.Index, n.Name)
			}
			if have[n.Index] {
				return nil, fmt.Errorf("%s: node %s reported by two shards", names[k], n.Name)
			}
			have[n.Index] = true
			nr := NodeResult{Name: n.Name, Pool: n.Pool, Restarts: n.Restarts, CPUPerHour: n.CPUPerHour, Dataplane: n.Dataplane}
			nr.Syncs, nr.FailedSyncs, nr.Busy, nr.Samples, nr.Worst, nr.WorstPod = n.Syncs, n.Failed, n.Busy, n.Samples, n.Worst, n.WorstPod
			c.Nodes[n.Index] = nr
		}
	}
	for i, ok := range have {
		if !ok {
			return nil, fmt.Errorf("node %s is in no shard's results", first.Nodes[i])
		}
	}
	rep.Cluster = c
	return rep, nil
}

// mergedFigures are a cluster expectation's figures from every shard's
// part.
func mergedFigures(nodes []string, parts []ShardPart) (clusterFigures, error) {
	var f clusterFigures
	if parts[0].SLI != nil {
		agg, err := mergeSLI(parts)
		if err != nil {
			return f, err
		}
		f.sli = agg.Result()
	}
	if parts[0].Pod != nil {
		pods, err := mergePods(parts)
		if err != nil {
			return f, err
		}
		f.pod = [3]float64{math.NaN(), math.NaN(), math.NaN()}
		if _, total := sli.DurationQuantile(0.5, pods...); total > 0 {
			for i, q := range []float64{0.5, 0.9, 0.99} {
				d, _ := sli.DurationQuantile(q, pods...)
				f.pod[i] = d.Seconds()
			}
		}
	}
	if parts[0].Syncs != nil {
		f.syncs, f.names = make([]int, len(nodes)), nodes
		have := make([]bool, len(nodes))
		for _, p := range parts {
			for _, n := range p.Syncs {
				if n.Node < 0 || n.Node >= len(nodes) || have[n.Node] {
					return f, fmt.Errorf("sync count of node %d missing from the cluster or given twice", n.Node)
				}
				have[n.Node] = true
				f.syncs[n.Node] = n.Syncs
			}
		}
		if i := slices.Index(have, false); i >= 0 {
			return f, fmt.Errorf("no shard counted node %s's syncs", nodes[i])
		}
	}
	return f, nil
}

func mergeSLI(parts []ShardPart) (*sli.Aggregate, error) {
	var agg *sli.Aggregate
	for _, p := range parts {
		if p.SLI == nil {
			return nil, fmt.Errorf("a shard without its part of the SLI")
		}
		a, err := sli.FromPart(*p.SLI)
		if err != nil {
			return nil, err
		}
		if agg == nil {
			agg = a
		} else if err := agg.Merge(a); err != nil {
			return nil, err
		}
	}
	return agg, nil
}

func mergePods(parts []ShardPart) ([]*sli.Exact, error) {
	var out []*sli.Exact
	for _, p := range parts {
		if p.Pod == nil {
			return nil, fmt.Errorf("a shard without its pod latencies")
		}
		e, err := sli.ExactFromData(*p.Pod)
		if err != nil {
			return nil, fmt.Errorf("pod latencies: %w", err)
		}
		out = append(out, e)
	}
	return out, nil
}

func sameJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}
