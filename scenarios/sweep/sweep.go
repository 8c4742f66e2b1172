// Package sweep replays one scenario over the cross product of settings
// (each a dotted path into the scenario document and a list of values),
// and sums each replay up in a row of a table: syncs, dataplane operations,
// network programming latency, failed expectations.
//
// Every point is a deterministic replay of its own, so points run in
// parallel, in any order, on any machine: results are ordered by point
// index, a shard runs the points whose index is congruent to it modulo the
// shard count, and Merge joins shards into the table one run would have
// written. It drives replay.Replay only; it must not read the wall clock
// into anything it writes.
package sweep

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/replay"
)

// Axis is one setting swept: a dotted path into the scenario document and
// the values it takes, in order.
type Axis struct {
	Key    string   `json:"key"`
	Values []string `json:"values"`
}

// Point is one combination of the axes' values: Values[i] is axis i's.
type Point struct {
	Index  int      `json:"index"`
	Values []string `json:"values"`
}

// ParseAxis reads a --set argument: KEY=V1,V2,...
func ParseAxis(arg string) (Axis, error) {
	key, vals, ok := strings.Cut(arg, "=")
	key = strings.TrimSpace(key)
	if !ok || key == "" {
		return Axis{}, fmt.Errorf("--set %s: want KEY=VALUE[,VALUE...], such as proxy.minSyncPeriod=0s,1s,10s", arg)
	}
	a := Axis{Key: key}
	seen := map[string]bool{}
	for _, v := range strings.Split(vals, ",") {
		v = strings.TrimSpace(v)
		if v == "" {
			return Axis{}, fmt.Errorf("--set %s: an empty value (values are separated by commas)", arg)
		}
		if seen[v] {
			return Axis{}, fmt.Errorf("--set %s: value %q is listed twice", arg, v)
		}
		seen[v] = true
		a.Values = append(a.Values, v)
	}
	return a, nil
}

// Points is the cross product of the axes, the last axis varying fastest.
func Points(axes []Axis) []Point {
	n := 1
	for _, a := range axes {
		n *= len(a.Values)
	}
	if len(axes) == 0 {
		n = 0
	}
	out := make([]Point, n)
	for i := range out {
		vals := make([]string, len(axes))
		rest := i
		for j := len(axes) - 1; j >= 0; j-- {
			k := len(axes[j].Values)
			vals[j] = axes[j].Values[rest%k]
			rest /= k
		}
		out[i] = Point{Index: i, Values: vals}
	}
	return out
}

// Settings are a point's overrides of the scenario.
func (p Point) Settings(axes []Axis) []scenarios.Setting {
	out := make([]scenarios.Setting, len(axes))
	for i, a := range axes {
		out[i] = scenarios.Setting{Path: a.Key, Value: p.Values[i]}
	}
	return out
}

// Shard selects the points whose index is Index modulo Count: round robin,
// so that neighbouring points (which often cost alike) spread over shards.
type Shard struct {
	Index, Count int
}

// All is the whole sweep as one shard.
var All = Shard{0, 1}

// Has reports whether point i belongs to the shard.
func (s Shard) Has(i int) bool { return i%s.Count == s.Index }

func (s Shard) String() string { return fmt.Sprintf("%d/%d", s.Index, s.Count) }

// Sweep is a scenario and the axes it is swept over, each point checked.
type Sweep struct {
	Base   *scenarios.Scenario
	Axes   []Axis
	Points []Point
}

// New checks every axis and every point's scenario (all of them, whatever
// shard runs later, so that every shard refuses the same bad input) before
// anything runs.
func New(base *scenarios.Scenario, axes []Axis) (*Sweep, error) {
	if len(axes) == 0 {
		return nil, errors.New("--set: give at least one setting to sweep, such as --set proxy.minSyncPeriod=0s,1s,10s")
	}
	seen := map[string]bool{}
	for _, a := range axes {
		if seen[a.Key] {
			return nil, fmt.Errorf("--set %s: the setting is given twice; list every value in one --set", a.Key)
		}
		seen[a.Key] = true
	}
	sw := &Sweep{Base: base, Axes: axes, Points: Points(axes)}
	var msgs []string
	for _, p := range sw.Points {
		if _, err := sw.scenario(p); err != nil {
			msg := err.Error()
			if !slices.Contains(msgs, msg) {
				msgs = append(msgs, msg)
			}
		}
	}
	if len(msgs) > 0 {
		return nil, errors.New(strings.Join(msgs, "\n"))
	}
	return sw, nil
}

// scenario is the base scenario with the point's settings.
func (sw *Sweep) scenario(p Point) (*scenarios.Scenario, error) {
	s, err := sw.Base.WithSettings(p.Settings(sw.Axes))
	if err != nil {
		var se *scenarios.SettingError
		if errors.As(err, &se) {
			where := ""
			if len(sw.Axes) > 1 {
				where = fmt.Sprintf(" (point %d: %s)", p.Index, describe(sw.Axes, p))
			}
			return nil, fmt.Errorf("%s: %s%s", se.Names("--set "), se.Reason(), where)
		}
		return nil, fmt.Errorf("point %d (%s): %w", p.Index, describe(sw.Axes, p), err)
	}
	return s, nil
}

func describe(axes []Axis, p Point) string {
	parts := make([]string, len(axes))
	for i, a := range axes {
		parts[i] = a.Key + "=" + p.Values[i]
	}
	return strings.Join(parts, " ")
}

// Result is one point's replay summed up (scenarios.Summarize; P50 and P99
// rounded to the millisecond). Error is set, and the rest zero, when the
// replay could not run (for example, it ran out of its budget).
type Result struct {
	Point        int      `json:"point"`
	Syncs        int      `json:"syncs"`
	DataplaneOps int      `json:"dataplaneOps"`
	Samples      int      `json:"programmingSamples"`
	P50          Duration `json:"p50"`
	P99          Duration `json:"p99"`
	Max          Duration `json:"max"`
	// SyncP50, SyncP99 and SyncMax are the runner runs' durations (what
	// syncCost made of them); SyncCPUPerHour is their sum per virtual hour
	// of the replay, in seconds; FullSyncs and PartialSyncs count the syncs
	// whose backend reported work, by kind.
	SyncP50        Duration `json:"syncP50"`
	SyncP99        Duration `json:"syncP99"`
	SyncMax        Duration `json:"syncMax"`
	SyncCPUPerHour float64  `json:"syncCPUSecondsPerHour"`
	FullSyncs      int      `json:"fullSyncs"`
	PartialSyncs   int      `json:"partialSyncs"`
	Failed         int      `json:"failed"`
	FirstFailure   string   `json:"firstFailure,omitempty"`
	Error          string   `json:"error,omitempty"`
	// Cluster is set for a scenario with cluster.pools: the whole
	// cluster's figures, as replay prints them (docs/cluster.md).
	Cluster *ClusterResult `json:"cluster,omitempty"`
}

// ClusterResult is a cluster point's figures: its nodes; the SLI as
// ClusterLoader2 computes it from every node's
// network_programming_duration_seconds (Perc50/90/99, rounded to the
// millisecond); the exact p99 of the true pod latency over every node;
// and the CPU-seconds of syncing per node-hour, the mean over the nodes
// and the worst node's.
type ClusterResult struct {
	Nodes        int      `json:"nodes"`
	SLIPerc50    Duration `json:"sliPerc50"`
	SLIPerc90    Duration `json:"sliPerc90"`
	SLIPerc99    Duration `json:"sliPerc99"`
	PodP99       Duration `json:"podP99"`
	NodeCPU      float64  `json:"nodeCPUSecondsPerHour"`
	WorstNodeCPU float64  `json:"worstNodeCPUSecondsPerHour"`
}

// RunOptions tune Run.
type RunOptions struct {
	// Replay is each point's replay options (budgets); a point's trace is
	// kept short whatever it says.
	Replay replay.Options
	// Workers is how many points replay at once (default GOMAXPROCS).
	Workers int
	// Progress, if set, is told each time a point finishes, from the
	// worker that ran it: how many are done of how many.
	Progress func(done, total int)
}

// Run replays the shard's points on a bounded pool of workers and returns
// the report, its results in point order.
func (sw *Sweep) Run(shard Shard, o RunOptions) *Report {
	idx := []int{} // a shard with no points writes [], not null
	for _, p := range sw.Points {
		if shard.Has(p.Index) {
			idx = append(idx, p.Index)
		}
	}
	results := make([]Result, len(idx))
	workers := o.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = max(1, min(workers, len(idx)))
	jobs := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	done := 0
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				results[j] = sw.runPoint(sw.Points[idx[j]], o.Replay)
				if o.Progress != nil {
					mu.Lock()
					done++
					o.Progress(done, len(idx))
					mu.Unlock()
				}
			}
		}()
	}
	for j := range idx {
		jobs <- j
	}
	close(jobs)
	wg.Wait()
	r := sw.report(idx, results)
	if shard != All {
		r.Shard = shard.String()
	}
	return r
}

// runPoint replays one point.
func (sw *Sweep) runPoint(p Point, opts replay.Options) Result {
	out := Result{Point: p.Index}
	s, err := sw.scenario(p)
	if err != nil {
		out.Error = err.Error() // New checked every point: not expected
		return out
	}
	opts.Update, opts.TraceStream, opts.Progress, opts.MetricsAt = false, nil, nil, nil
	if opts.TraceKeep <= 0 {
		opts.TraceKeep = 64
	}
	res, err := replay.Replay(s, opts)
	if err != nil {
		out.Error = err.Error()
		return out
	}
	sum := replay.Summarize(res)
	out.Syncs, out.DataplaneOps, out.Samples = sum.Syncs, sum.DataplaneOps, sum.Programming
	// The quantiles are estimates, interpolated in a bucket: a millisecond
	// is precision enough to compare, and reads better than 5.333333333s.
	out.P50, out.P99 = Duration(sum.P50.Round(time.Millisecond)), Duration(sum.P99.Round(time.Millisecond))
	out.Max = Duration(sum.Max)
	syncDurations(&out, res, s.Length())
	out.Cluster = clusterFigures(res)
	out.Failed = len(sum.Failures)
	if len(sum.Failures) > 0 {
		out.FirstFailure = sum.Failures[0]
	}
	return out
}

// syncDurations fills the sync columns from the replay's runs: the
// durations of the runs that ended (nearest-rank quantiles), their sum per
// virtual hour of length, and the full and partial syncs.
func syncDurations(out *Result, res *replay.Result, length time.Duration) {
	var ds []time.Duration
	var total time.Duration
	for _, r := range res.Runs {
		if r.Work.Mode() != "" {
			if r.Work.Full {
				out.FullSyncs++
			} else {
				out.PartialSyncs++
			}
		}
		if r.End < 0 {
			continue
		}
		d := r.End - r.Start
		ds = append(ds, d)
		total += d
	}
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	rank := func(q float64) time.Duration { return ds[max(0, int(math.Ceil(q*float64(len(ds))))-1)] }
	out.SyncP50, out.SyncP99, out.SyncMax = Duration(rank(0.5)), Duration(rank(0.99)), Duration(ds[len(ds)-1])
	if length > 0 {
		out.SyncCPUPerHour = math.Round(total.Seconds()/length.Hours()*1000) / 1000
	}
}

// clusterFigures sums a cluster replay up (nil for one node).
func clusterFigures(res *replay.Result) *ClusterResult {
	c := res.Cluster
	if c == nil || len(c.Nodes) == 0 {
		return nil
	}
	secs := func(f float64) Duration {
		if math.IsNaN(f) {
			return 0 // the rule never had data
		}
		return Duration(time.Duration(f * float64(time.Second)).Round(time.Millisecond))
	}
	out := &ClusterResult{Nodes: len(c.Nodes), SLIPerc50: secs(c.SLI.Perc50), SLIPerc90: secs(c.SLI.Perc90), SLIPerc99: secs(c.SLI.Perc99), PodP99: Duration(c.Pod99)}
	var sum float64
	for _, n := range c.Nodes {
		sum += n.CPUPerHour
		out.WorstNodeCPU = max(out.WorstNodeCPU, n.CPUPerHour)
	}
	out.NodeCPU = math.Round(sum/float64(len(c.Nodes))*1000) / 1000
	out.WorstNodeCPU = math.Round(out.WorstNodeCPU*1000) / 1000
	return out
}

func (sw *Sweep) report(ran []int, results []Result) *Report {
	return &Report{
		Format:   FormatVersion,
		Scenario: sw.Base.Name,
		Digest:   sw.Base.Digest(),
		Axes:     sw.Axes,
		Points:   sw.Points,
		Ran:      ran,
		Results:  results,
	}
}
