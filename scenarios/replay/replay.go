package replay

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/sim"
	"github.com/proxysim/proxysim/sim/kpmetrics"
	"github.com/proxysim/proxysim/sim/proxy"
	"github.com/proxysim/proxysim/sim/runner"
	"github.com/proxysim/proxysim/sim/trace"
	"github.com/proxysim/proxysim/sim/vclock"
)

// Options tune a replay.
type Options struct {
	// Dataplane builds the dataplane; nil means the mode's fake.
	Dataplane scenarios.DataplaneFactory
	// Update rewrites golden tables with what the replay produced instead of
	// comparing them.
	Update bool
	// ContextLines is how many trace lines a failure shows (default 12).
	ContextLines int
	// MaxEvents bounds the trace events plus clock steps a replay may take
	// (default DefaultMaxEvents); MaxMemory bounds its live heap in bytes
	// (default DefaultMaxMemory). Past either, Replay returns a *BudgetError.
	MaxEvents int
	MaxMemory int64
	// TraceKeep, if positive, holds only the last TraceKeep trace events in
	// memory (failures still show their context); TraceStream, if set,
	// receives every event as a JSON line as it is recorded.
	TraceKeep   int
	TraceStream io.Writer
	// MetricsAt, if set, is the virtual instant (from the proxy's start) at
	// which Result.Metrics is taken, instead of the end of the replay.
	MetricsAt *time.Duration
	// Progress, if set, is told the virtual instant (from the proxy's
	// start) the replay has reached, after every clock step: a caller can
	// show how far a long replay is. It must not block.
	Progress func(reached time.Duration)
	// Follow, if set, is called with every trace event as it is recorded
	// (those of the proxy's start first), on the replay's goroutine, with
	// the replay's dataplane: a tool that reads the dataplane as the
	// replay goes (the report page snapshots it after each run) needs no
	// trace kept in memory.
	Follow func(e trace.Event, dp scenarios.Dataplane)
	// TraceWork records a run.work event after each sync: what it wrote
	// to the dataplane and read back (sim.SyncWork). Off by default, so
	// that traces stay as they were; `replay -v` turns it on.
	TraceWork bool
	// World, if set, is called once the world is built, before the
	// scenario's objects are created and the proxy starts: an observer
	// (e2e/upstream's replay of kube-proxy's own code in a synctest
	// bubble) may subscribe a consumer or watch the trace.
	World func(w *sim.World) error
	// KeepNodes keeps every sync record, sample and pod latency of every
	// node of cluster.pools (Result.Cluster), not only counts; the world's
	// own node and materialised nodes keep them anyway.
	KeepNodes bool
	// Shard, if its Count is set, runs only the shard's nodes of
	// cluster.pools and leaves the cluster's figures and expectations to
	// MergeShards: Result.Shard is the shard's file (docs/cluster.md).
	Shard Shard
	// MaterializeFirst keeps a cluster's first node materialised (its
	// dataplane, the dataplane events of its trace, its dataplane metrics)
	// even when no step or expectation looks at it; see firstnode.go.
	MaterializeFirst bool
}

// Failure is one expectation that did not hold.
type Failure struct {
	File     string
	Pos      scenarios.Pos
	At       time.Duration // virtual instant
	What     string        // the expectation, e.g. "syncs.count"
	Expected string
	Got      string
	Context  []trace.Event // the trace leading up to it
}

func (f Failure) String() string {
	return fmt.Sprintf("%s:%d:%d: %s at %v: expected %s, got %s", f.File, f.Pos.Line, f.Pos.Column, f.Pos.Path, f.At, f.Expected, f.Got)
}

// Result is what a replay found.
type Result struct {
	Scenario *scenarios.Scenario
	Env      string // the dataplane's name
	Failures []Failure
	Trace    *trace.Recorder
	Runs     []sim.SyncRecord
	// Updated lists the golden files or scenario files --update rewrote.
	Updated []string
	// Checks counts the evaluations of expect blocks: one per block, and
	// one more for each re-check of a block with within.
	Checks int
	// Wall is how long the replay took in real time.
	Wall time.Duration
	// Metrics is kube-proxy's metrics in the Prometheus text format, at the
	// end of the replay or at Options.MetricsAt; nil for a mode without
	// them (see sim/kpmetrics).
	Metrics []byte
	// DataplaneOps counts the dataplane write operations (what
	// dataplaneOps expectations count); Programming is every
	// network_programming_duration observation (what programmingLatency
	// expectations read).
	DataplaneOps int
	Programming  []sim.ProgrammingSample
	// Cluster is what every node of cluster.pools did; nil without pools
	// or in a shard (Options.Shard), whose part is Shard.
	Cluster *ClusterResult
	Shard   *ShardResult
}

// Passed reports whether every expectation held.
func (r *Result) Passed() bool { return len(r.Failures) == 0 }

// RunnerConfig derives the runner a scenario's proxy uses.
func RunnerConfig(p scenarios.Proxy) runner.Config {
	gen, _ := runner.GenerationFor(p.Version)
	cfg := runner.Config{Generation: gen, MaxInterval: 30 * time.Second}
	if p.SyncPeriod != nil {
		cfg.MaxInterval = p.SyncPeriod.D()
	}
	if p.MinSyncPeriod != nil {
		cfg.MinInterval = p.MinSyncPeriod.D()
	}
	if m, ok := scenarios.LookupMode(p.Mode); ok {
		if rs, ok := m.(scenarios.RunnerShaper); ok {
			cfg = rs.ShapeRunner(p, cfg)
		}
	}
	if p.RetryInterval != nil {
		cfg.RetryInterval = p.RetryInterval.D()
	}
	if p.BurstRuns != nil {
		cfg.BurstRuns = *p.BurstRuns
	}
	return cfg
}

// replayer holds one replay's state.
type replayer struct {
	s       *scenarios.Scenario
	opts    Options
	dp      scenarios.Dataplane
	w       *sim.World
	res     *Result
	pending []*pendingCheck
	golden  []goldenUpdate
	// churnErr is the first error of a churn tick, which runs inside the
	// clock and so cannot return it.
	churnErr error
	budget   *budget
	// dataplaneAt is when each dataplane write happened, for dataplaneOps.
	dataplaneAt []time.Duration
	// controllers is the switched-on controllers' state, by key.
	controllers map[string]any
	// metrics is kube-proxy's metrics registry (nil for a mode without).
	metrics    *kpmetrics.Registry
	metricsErr error
	// nodeDPs are the dataplanes of cluster.pools' materialised nodes.
	nodeDPs map[string]scenarios.Dataplane
	// lightWorkers builds light nodes' work for a cost of it (lightwork.go).
	lightWorkers scenarios.LightWorkers
	// A shard's parts at its cluster expectations, and the first error
	// taking one.
	checkpoints []Checkpoint
	shardErr    error
}

type pendingCheck struct {
	step int
	e    *scenarios.Expect
	// checks are the parts of e checked (all of them, but in a bubble).
	checks   []scenarios.Expectation
	deadline time.Duration
	last     []Failure
}

// worldConfig is the world of a scenario's proxy on clk: its runner,
// resync period, node, zone and sync cost.
func worldConfig(p scenarios.Proxy, clk *vclock.Clock) sim.Config {
	resync := sim.DefaultResyncPeriod
	if p.ConfigSyncPeriod != nil {
		resync = p.ConfigSyncPeriod.D()
		if resync == 0 {
			resync = -1
		}
	}
	rc := RunnerConfig(p)
	return sim.Config{
		Runner: rc,
		Clock:  clk,
		// Node hints arrived with PreferSameTrafficDistribution, on from
		// v1.34: the release that also brought the cooldown runner.
		Endpoints:    proxy.EndpointSliceTrackerOptions{IgnoreNodeHints: rc.Generation == runner.Burst},
		NodeName:     p.NodeName,
		Zone:         p.Zone,
		ResyncPeriod: resync,
		Cost:         p.SyncCost.Model(),
	}
}

// Replay runs a scenario and checks its expectations. An error means the
// replay could not run at all (for example, the dataplane is unavailable);
// failed expectations are in the result.
func Replay(s *scenarios.Scenario, opts Options) (*Result, error) {
	wall := time.Now()
	mode, ok := scenarios.LookupMode(s.Proxy.Mode)
	if !ok {
		return nil, fmt.Errorf("%s: mode %q is not registered", s.File, s.Proxy.Mode)
	}
	// Whether a cluster's first node may run light is the caller's
	// options as given (a dataplane of its own: no).
	lightFirst := !looksAtDataplane(s, opts)
	if opts.Dataplane == nil {
		opts.Dataplane = mode.Fake
	}
	if opts.ContextLines == 0 {
		opts.ContextLines = 12
	}
	if err := checkShard(s, opts.Shard); err != nil {
		return nil, err
	}
	// The clock comes first: the dataplane may run on it (a fake kernel's
	// connections age in virtual time).
	clk := vclock.New(vclock.Epoch)
	dp, err := opts.Dataplane(s, clk)
	if err != nil {
		return nil, err
	}
	defer dp.Close()
	r := &replayer{s: s, opts: opts, dp: dp, budget: newBudget(opts)}
	cfg := worldConfig(s.Proxy, clk)
	cfg.NewBackend = dp.NewBackend
	if lightFirst {
		light, err := r.firstNodeBackend()
		if err != nil {
			return nil, err
		}
		if light != nil {
			cfg.NewBackend = light
		}
	}
	cfg.TraceWork = opts.TraceWork
	if reg, err := kpmetrics.New(mode.Name(), "IPv4"); err == nil {
		r.metrics = reg
		cfg.Metrics = reg
	}
	w, err := sim.NewWorld(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.File, err)
	}
	defer w.Close()
	r.w = w
	defer r.closeNodes()
	if err := r.addNodes(clk); err != nil {
		return nil, err
	}
	// Building the world started the proxier, which may have written to
	// the dataplane already (its startup sysctls): those events count and
	// stream like every later one.
	if opts.TraceStream != nil {
		w.Trace.Stream(opts.TraceStream)
	}
	countOp := func(e trace.Event) {
		if e.Kind == trace.Dataplane && e.Op != "note" {
			r.dataplaneAt = append(r.dataplaneAt, time.Duration(e.At))
		}
	}
	for _, e := range w.Trace.Events() {
		countOp(e)
		if opts.Follow != nil {
			opts.Follow(e, dp)
		}
	}
	w.Trace.Observe(countOp)
	if opts.Follow != nil {
		w.Trace.Observe(func(e trace.Event) { opts.Follow(e, dp) })
	}
	if opts.World != nil {
		if err := opts.World(w); err != nil {
			return nil, fmt.Errorf("%s: %w", s.File, err)
		}
	}
	if opts.TraceKeep > 0 {
		w.Trace.Keep(opts.TraceKeep)
	}
	r.res = &Result{Scenario: s, Env: dp.Name(), Trace: w.Trace}
	metricsTaken := false
	takeMetrics := func() {
		if r.metrics != nil && !metricsTaken {
			r.res.Metrics, r.metricsErr = r.metrics.Text()
			metricsTaken = true
		}
	}
	if opts.MetricsAt != nil {
		if *opts.MetricsAt < 0 || *opts.MetricsAt > s.Length() {
			return nil, fmt.Errorf("%s: metrics at %v: outside the replay [0, %v]", s.File, *opts.MetricsAt, s.Length())
		}
		w.At(*opts.MetricsAt, takeMetrics)
	}
	for _, o := range s.Initial {
		if err := w.Create(o.Obj); err != nil {
			return nil, fmt.Errorf("%s: creating %s: %w", s.File, o.Key, err)
		}
	}
	if err := r.attachControllers(); err != nil {
		return nil, err
	}
	if err := w.Start(); err != nil {
		return nil, fmt.Errorf("%s: starting the proxy: %w", s.File, err)
	}
	for i := range s.Timeline {
		st := &s.Timeline[i]
		if err := r.advanceTo(st.At.D()); err != nil {
			return nil, err
		}
		if err := r.act(i, st.Actions); err != nil {
			return nil, err
		}
		if r.churnErr != nil {
			return nil, r.churnErr
		}
		if st.Expect != nil {
			r.expect(i, st.Expect)
		}
	}
	if err := r.advanceTo(s.Length()); err != nil {
		return nil, err
	}
	if r.churnErr != nil {
		return nil, r.churnErr
	}
	r.expirePending()
	takeMetrics()
	if r.metricsErr != nil {
		return nil, fmt.Errorf("%s: metrics: %w", s.File, r.metricsErr)
	}
	r.res.Runs = w.Syncs()
	r.res.DataplaneOps = len(r.dataplaneAt)
	r.res.Programming = w.ProgrammingSamples()
	if opts.Shard.Count > 0 {
		if r.res.Shard, err = r.shardResult(); err != nil {
			return nil, fmt.Errorf("%s: shard %s: %w", s.File, opts.Shard, err)
		}
	} else if len(s.Nodes()) > 0 {
		if r.res.Cluster, err = r.clusterResult(); err != nil {
			return nil, fmt.Errorf("%s: %w", s.File, err)
		}
	}
	if opts.Update {
		if err := r.writeGoldens(); err != nil {
			return nil, err
		}
	}
	r.res.Wall = time.Since(wall)
	return r.res, nil
}

// advanceTo moves virtual time one event at a time, re-evaluating pending
// "within" expectations after each. Time stops at every pending deadline, so
// that an expectation is judged there and not after a later event.
// It stops with a *BudgetError when the replay passes its budget.
func (r *replayer) advanceTo(t time.Duration) error {
	start := r.w.Config().Start
	end := start.Add(t)
	for {
		at, ok := r.w.Clock.Pending()
		due := ok && !at.After(end) // a timer fires before t
		next := end
		if due {
			next = at
		}
		if d, ok := r.firstDeadline(); ok && start.Add(d).Before(next) {
			r.w.RunUntil(d)
			r.evalPending()
			continue
		}
		if !due {
			break
		}
		if err := r.overBudget(); err != nil {
			return err
		}
		r.w.Clock.Step()
		r.evalPending()
		if r.opts.Progress != nil {
			r.opts.Progress(r.w.Now())
		}
		if r.churnErr != nil {
			return r.churnErr
		}
		if err := r.w.LightWorkErr(); err != nil {
			return fmt.Errorf("%s: %w", r.s.File, err)
		}
	}
	r.w.RunUntil(t)
	r.evalPending()
	if r.opts.Progress != nil {
		r.opts.Progress(r.w.Now())
	}
	if err := r.w.LightWorkErr(); err != nil {
		return fmt.Errorf("%s: %w", r.s.File, err)
	}
	return r.w.Trace.Err()
}

// firstDeadline is the earliest deadline of a pending "within" expectation.
func (r *replayer) firstDeadline() (time.Duration, bool) {
	var first time.Duration
	for i, p := range r.pending {
		if i == 0 || p.deadline < first {
			first = p.deadline
		}
	}
	return first, len(r.pending) > 0
}

// act runs timeline[i]'s note and actions (all of the step's, but in a
// bubble).
func (r *replayer) act(i int, actions []scenarios.Action) error {
	st := &r.s.Timeline[i]
	run := &Run{r: r, step: i, src: st.Src}
	if st.Note != "" {
		run.Step("note", "", st.Note)
	}
	for _, a := range actions {
		if err := do(a, run); err != nil {
			return fmt.Errorf("%s: %w", run.where(), err)
		}
	}
	// An action may find that what it was told happened cannot have (a
	// connection to an endpoint no rule reaches): a failed check.
	if len(run.fails) > 0 {
		r.fail(run.fails)
	}
	return nil
}

// expect checks e now, or registers it to be checked until its deadline.
func (r *replayer) expect(step int, e *scenarios.Expect) {
	fails := r.check(step, e, e.Checks)
	if len(fails) == 0 {
		r.res.Trace.Add(trace.Event{Kind: trace.Check, Op: "pass", Detail: fmt.Sprintf("timeline[%d].expect", step)})
		return
	}
	if e.Within != nil && e.Within.D() > 0 {
		r.pending = append(r.pending, &pendingCheck{step: step, e: e, checks: e.Checks, deadline: r.w.Now() + e.Within.D(), last: fails})
		return
	}
	r.fail(fails)
}

// check evaluates the parts checks of an expectation at the current
// instant.
func (r *replayer) check(step int, e *scenarios.Expect, checks []scenarios.Expectation) []Failure {
	r.res.Checks++
	run := &Run{r: r, step: step, src: e.Src}
	for _, c := range checks {
		check(c, run)
	}
	return run.fails
}

func (r *replayer) evalPending() {
	if len(r.pending) == 0 {
		return
	}
	now := r.w.Now()
	kept := r.pending[:0]
	for _, p := range r.pending {
		fails := r.check(p.step, p.e, p.checks)
		switch {
		case len(fails) == 0:
			r.res.Trace.Add(trace.Event{Kind: trace.Check, Op: "pass", Detail: fmt.Sprintf("timeline[%d].expect (within)", p.step)})
		case now >= p.deadline:
			p.last = fails
			r.fail(p.last)
		default:
			p.last = fails
			kept = append(kept, p)
		}
	}
	r.pending = kept
}

// expirePending fails every "within" expectation still unmet when the
// timeline ends.
func (r *replayer) expirePending() {
	for _, p := range r.pending {
		r.fail(p.last)
	}
	r.pending = nil
}

func (r *replayer) fail(fs []Failure) {
	for _, f := range fs {
		r.res.Trace.Add(trace.Event{Kind: trace.Check, Op: "fail", Detail: f.Pos.Path, Err: "expected " + oneLine(f.Expected) + ", got " + oneLine(f.Got)})
		f.Context = r.res.Trace.Tail(r.opts.ContextLines)
		r.res.Failures = append(r.res.Failures, f)
	}
}

func oneLine(s string) string {
	if strings.Contains(s, "\n") {
		return "(table)"
	}
	return s
}
