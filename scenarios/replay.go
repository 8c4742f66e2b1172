package scenarios

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"time"

	discovery "k8s.io/api/discovery/v1"
	"k8s.io/utils/clock"

	"github.com/proxysim/proxysim/fakes"
	"github.com/proxysim/proxysim/sim"
	"github.com/proxysim/proxysim/sim/ipvs"
	"github.com/proxysim/proxysim/sim/proxy"
	"github.com/proxysim/proxysim/sim/runner"
	"github.com/proxysim/proxysim/sim/trace"
	"github.com/proxysim/proxysim/sim/vclock"
)

// Env is the dataplane a replay programs.
type Env struct {
	Name      string // fake, netns, vm
	Dataplane ipvs.Dataplane
	// Traffic opens client connections; nil means connect steps cannot run.
	Traffic ipvs.Traffic
	// Close releases the dataplane.
	Close func() error
}

// DataplaneFactory builds a fresh dataplane for one replay, on the world's
// clock.
type DataplaneFactory func(s *Scenario, clk clock.PassiveClock) (*Env, error)

// FakeDataplane is the built-in in-memory dataplane.
func FakeDataplane(s *Scenario, clk clock.PassiveClock) (*Env, error) {
	dp, h, _, _ := fakes.Dataplane(s.Proxy.Kernel, clk)
	return &Env{Name: "fake", Dataplane: dp, Traffic: h, Close: func() error { return nil }}, nil
}

// Options tune a replay.
type Options struct {
	// Dataplane builds the dataplane; nil means FakeDataplane.
	Dataplane DataplaneFactory
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
}

// Failure is one expectation that did not hold.
type Failure struct {
	File     string
	Pos      Pos
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
	Scenario *Scenario
	Env      string
	Failures []Failure
	Trace    *trace.Recorder
	Runs     []sim.SyncRecord
	// Updated lists the golden files or scenario files --update rewrote.
	Updated []string
	// Checks counts the expectations evaluated.
	Checks int
}

// Passed reports whether every expectation held.
func (r *Result) Passed() bool { return len(r.Failures) == 0 }

// RunnerConfig derives the runner a scenario's proxy uses.
func RunnerConfig(p Proxy) runner.Config {
	gen, _ := runner.GenerationFor(p.Version)
	cfg := runner.Config{Generation: gen, MaxInterval: 30 * time.Second}
	if p.SyncPeriod != nil {
		cfg.MaxInterval = p.SyncPeriod.D()
	}
	if p.MinSyncPeriod != nil {
		cfg.MinInterval = p.MinSyncPeriod.D()
	}
	// The IPVS proxier of the burst generation never calls RetryAfter; the
	// cooldown generation's runner retries failed syncs by itself, after
	// syncPeriod unless told otherwise.
	if gen == runner.Cooldown {
		cfg.RetryInterval = cfg.MaxInterval
	}
	if p.RetryInterval != nil {
		cfg.RetryInterval = p.RetryInterval.D()
	}
	return cfg
}

// replayer holds one replay's state.
type replayer struct {
	s       *Scenario
	opts    Options
	env     *Env
	w       *sim.World
	faults  *ipvs.Faults
	res     *Result
	pending []*pendingCheck
	conns   map[string]ipvs.ConnectResult
	golden  []goldenUpdate
	// churnErr is the first error of a churn tick, which runs inside the
	// clock and so cannot return it.
	churnErr error
	budget   *budget
	// dataplaneAt is when each dataplane write happened, for dataplaneOps.
	dataplaneAt []time.Duration
}

type pendingCheck struct {
	step     int
	e        *Expect
	deadline time.Duration
	last     []Failure
}

type goldenUpdate struct {
	file   string // a golden file, or "" for an inline golden
	pos    Pos
	text   string
	inline bool
}

// Replay runs a scenario and checks its expectations. An error means the
// replay could not run at all (for example, the dataplane is unavailable);
// failed expectations are in the result.
func Replay(s *Scenario, opts Options) (*Result, error) {
	if opts.Dataplane == nil {
		opts.Dataplane = FakeDataplane
	}
	if opts.ContextLines == 0 {
		opts.ContextLines = 12
	}
	clk := vclock.New(vclock.Epoch)
	env, err := opts.Dataplane(s, clk)
	if err != nil {
		return nil, err
	}
	defer env.Close()
	r := &replayer{s: s, opts: opts, env: env, faults: &ipvs.Faults{}, conns: map[string]ipvs.ConnectResult{}, budget: newBudget(opts)}
	p := s.Proxy
	resync := sim.DefaultResyncPeriod
	if p.ConfigSyncPeriod != nil {
		resync = p.ConfigSyncPeriod.D()
		if resync == 0 {
			resync = -1
		}
	}
	cfg := sim.Config{
		Runner: RunnerConfig(p),
		Clock:  clk,
		// Node hints arrived with PreferSameTrafficDistribution, on from
		// v1.34: the release that also brought the cooldown runner.
		Endpoints:    proxy.EndpointSliceTrackerOptions{IgnoreNodeHints: RunnerConfig(p).Generation == runner.Burst},
		NodeName:     p.NodeName,
		Zone:         p.Zone,
		ResyncPeriod: resync,
		Cost:         sim.CostModel{Fixed: p.SyncCost.Fixed.D(), PerService: p.SyncCost.PerService.D(), PerEndpoint: p.SyncCost.PerEndpoint.D()},
		NewBackend: sim.IPVSBackend(ipvs.Config{
			Scheduler:        p.Scheduler,
			StrictARP:        p.StrictARP,
			Timeouts:         ipvs.Timeouts{TCP: p.IPVSTimeouts.TCP.D(), TCPFin: p.IPVSTimeouts.TCPFin.D(), UDP: p.IPVSTimeouts.UDP.D()},
			NodeIPs:          p.NodeIPs,
			SyncFailsOnError: p.SyncFailsOnError,
		}, ipvs.WithFaults(env.Dataplane, r.faults)),
	}
	w, err := sim.NewWorld(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.File, err)
	}
	defer w.Close()
	r.w = w
	if opts.TraceKeep > 0 {
		w.Trace.Keep(opts.TraceKeep)
	}
	if opts.TraceStream != nil {
		w.Trace.Stream(opts.TraceStream)
	}
	w.Trace.Observe(func(e trace.Event) {
		if e.Kind == trace.Dataplane && e.Op != "note" {
			r.dataplaneAt = append(r.dataplaneAt, time.Duration(e.At))
		}
	})
	r.res = &Result{Scenario: s, Env: env.Name, Trace: w.Trace}
	for _, o := range s.Initial {
		if err := w.Create(o.Obj); err != nil {
			return nil, fmt.Errorf("%s: creating %s: %w", s.File, o.Key, err)
		}
	}
	if err := w.Start(); err != nil {
		return nil, fmt.Errorf("%s: starting the proxy: %w", s.File, err)
	}
	for i := range s.Timeline {
		st := &s.Timeline[i]
		if err := r.advanceTo(st.At.D()); err != nil {
			return nil, err
		}
		if err := r.act(i, st); err != nil {
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
	r.res.Runs = w.Syncs()
	if opts.Update {
		if err := r.writeGoldens(); err != nil {
			return nil, err
		}
	}
	return r.res, nil
}

// advanceTo moves virtual time one event at a time, re-evaluating pending
// "within" expectations after each.
// It stops with a *BudgetError when the replay passes its budget.
func (r *replayer) advanceTo(t time.Duration) error {
	start := r.w.Config().Start
	for {
		at, ok := r.w.Clock.Pending()
		if !ok || at.After(start.Add(t)) {
			break
		}
		if err := r.overBudget(); err != nil {
			return err
		}
		r.w.Clock.Step()
		r.evalPending()
		if r.churnErr != nil {
			return r.churnErr
		}
	}
	r.w.RunUntil(t)
	r.evalPending()
	return r.w.Trace.Err()
}

func (r *replayer) evalPending() {
	if len(r.pending) == 0 {
		return
	}
	now := r.w.Now()
	kept := r.pending[:0]
	for _, p := range r.pending {
		fails := r.check(p.step, p.e)
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

func (r *replayer) act(i int, st *Step) error {
	w := r.w
	add := func(op, obj, detail string) {
		w.Trace.Add(trace.Event{Kind: trace.Step, Op: op, Object: obj, Detail: detail})
	}
	stepErr := func(err error) error {
		return fmt.Errorf("%s:%d:%d: timeline[%d]: %w", r.s.File, st.Src.Line, st.Src.Column, i, err)
	}
	if st.Note != "" {
		add("note", "", st.Note)
	}
	for _, o := range st.objects {
		add(map[bool]string{true: "update", false: "apply"}[st.Update != nil], o.Key, "")
		if err := w.Apply(o.Obj); err != nil {
			return stepErr(err)
		}
	}
	switch {
	case st.Patch != nil:
		add("patch", KeyOf(st.Patch.Kind, st.Patch.Namespace, st.Patch.Name), "")
		if err := r.patch(st.Patch); err != nil {
			return stepErr(err)
		}
	case st.Churn != nil:
		c := st.Churn
		ns := c.Namespace
		if ns == "" {
			ns = "default"
		}
		add("churn", KeyOf("EndpointSlice", ns, c.Name), fmt.Sprintf("%d flips of %s every %v", c.Count, c.Endpoint, c.Every))
		// One flip at a time: each schedules the next, so a churn of any
		// length holds one timer.
		every := c.Every.D()
		left := c.Count
		var flip func()
		flip = func() {
			if err := r.flip(ns, c.Name, c.Endpoint); err != nil {
				r.churnErr = fmt.Errorf("%s:%d:%d: timeline[%d].churn: %w", r.s.File, st.Src.Line, st.Src.Column, i, err)
				return
			}
			if left--; left > 0 {
				w.Clock.AfterFunc(every, flip)
			}
		}
		w.At(w.Now(), flip)
	case st.Delete != nil:
		d := st.Delete
		ns := d.Namespace
		if ns == "" {
			ns = "default"
		}
		add("delete", KeyOf(d.Kind, ns, d.Name), "")
		if err := w.Delete(d.Kind, ns, d.Name); err != nil {
			return stepErr(err)
		}
	case st.Restart:
		add("restart", "", "")
		if err := w.Restart(); err != nil {
			return stepErr(err)
		}
	case st.Fault != nil:
		if n := st.Fault.DataplaneOps; n > 0 {
			add("fault", "", fmt.Sprintf("next %d dataplane operations fail", n))
			r.faults.FailNext(n)
		}
		if d := st.Fault.WatchBreak; d != nil {
			add("fault", "", fmt.Sprintf("watch breaks for %v", d))
			w.BreakWatch(d.D())
		}
	case st.Connect != nil:
		c := st.Connect
		if r.env.Traffic == nil {
			return stepErr(fmt.Errorf("the %s dataplane cannot open connections", r.env.Name))
		}
		res := r.env.Traffic.Connect(c.Name, c.Protocol, c.Client, c.Service)
		r.conns[c.Name] = res
		e := trace.Event{Kind: trace.Conn, Op: "connect", Object: c.Name, Detail: fmt.Sprintf("%s %s -> %s", c.Protocol, c.Client, c.Service)}
		if res.Err != nil {
			e.Err = res.Err.Error()
		} else {
			e.Detail += fmt.Sprintf(" served by %s after %v", res.Server, res.Latency)
		}
		w.Trace.Add(e)
	case st.Close != nil:
		if r.env.Traffic == nil {
			return stepErr(fmt.Errorf("the %s dataplane cannot close connections", r.env.Name))
		}
		w.Trace.Add(trace.Event{Kind: trace.Conn, Op: "close", Object: st.Close.Name})
		if err := r.env.Traffic.Close(st.Close.Name); err != nil {
			return stepErr(err)
		}
	}
	return nil
}

// flip toggles one endpoint's ready condition.
func (r *replayer) flip(ns, name, ip string) error {
	cur, err := r.w.Get("EndpointSlice", [2]string{ns, name})
	if err != nil {
		return err
	}
	s := cur.(*discovery.EndpointSlice).DeepCopy()
	for i := range s.Endpoints {
		e := &s.Endpoints[i]
		for _, a := range e.Addresses {
			if a == ip {
				ready := e.Conditions.Ready != nil && !*e.Conditions.Ready
				e.Conditions.Ready = &ready
				return r.w.Update(s)
			}
		}
	}
	return fmt.Errorf("%s has no endpoint %s", KeyOf("EndpointSlice", ns, name), ip)
}

func (r *replayer) patch(p *Patch) error {
	ns := p.Namespace
	if ns == "" {
		ns = "default"
	}
	cur, err := r.w.Get(p.Kind, [2]string{ns, p.Name})
	if err != nil {
		return err
	}
	if p.Endpoint != "" {
		s := cur.(*discovery.EndpointSlice).DeepCopy()
		if !patchEndpoint(s, p.Endpoint, p.Conditions) {
			return fmt.Errorf("patch: %s has no endpoint %s", KeyOf(p.Kind, ns, p.Name), p.Endpoint)
		}
		return r.w.Update(s)
	}
	out, err := mergePatch(cur, p.Merge)
	if err != nil {
		return fmt.Errorf("patch %s: %w", KeyOf(p.Kind, ns, p.Name), err)
	}
	defaultAndValidate(out)
	return r.w.Update(out)
}

// expect checks e now, or registers it to be checked until its deadline.
func (r *replayer) expect(step int, e *Expect) {
	fails := r.check(step, e)
	if len(fails) == 0 {
		r.res.Trace.Add(trace.Event{Kind: trace.Check, Op: "pass", Detail: fmt.Sprintf("timeline[%d].expect", step)})
		return
	}
	if e.Within != nil && e.Within.D() > 0 {
		r.pending = append(r.pending, &pendingCheck{step: step, e: e, deadline: r.w.Now() + e.Within.D(), last: fails})
		return
	}
	r.fail(fails)
}

// check evaluates every part of an expectation at the current instant.
func (r *replayer) check(step int, e *Expect) []Failure {
	var fails []Failure
	now := r.w.Now()
	failAt := func(pos Pos, what, expected, got string) {
		fails = append(fails, Failure{File: r.s.File, Pos: pos, At: now, What: what, Expected: expected, Got: got})
	}
	r.res.Checks++
	dp := r.env.Dataplane
	if sy := e.Syncs; sy != nil {
		runs := r.w.Syncs()
		if len(sy.Between) == 2 {
			var in []sim.SyncRecord
			for _, run := range runs {
				if run.Start >= sy.Between[0].D() && run.Start <= sy.Between[1].D() {
					in = append(in, run)
				}
			}
			runs = in
		}
		n := len(runs)
		if sy.Count != nil && n != *sy.Count {
			failAt(sy.Src.At("count"), "syncs.count", fmt.Sprint(*sy.Count), fmt.Sprintf("%d (%s)", n, startList(runs)))
		}
		if sy.AtLeast != nil && n < *sy.AtLeast {
			failAt(sy.Src.At("atLeast"), "syncs.atLeast", fmt.Sprintf("at least %d", *sy.AtLeast), fmt.Sprintf("%d (%s)", n, startList(runs)))
		}
		if sy.AtMost != nil && n > *sy.AtMost {
			failAt(sy.Src.At("atMost"), "syncs.atMost", fmt.Sprintf("at most %d", *sy.AtMost), fmt.Sprintf("%d (%s)", n, startList(runs)))
		}
		if sy.At != nil {
			want := make([]string, len(sy.At))
			for i, d := range sy.At {
				want[i] = d.String()
			}
			if got := startList(runs); got != "["+strings.Join(want, " ")+"]" {
				failAt(sy.Src.At("at"), "syncs.at", "["+strings.Join(want, " ")+"]", got)
			}
		}
	}
	if e.IPVS != nil || e.IPVSFile != "" {
		got, err := ipvs.Table(dp.IPVS)
		if err != nil {
			got = "error: " + err.Error()
		}
		want, pos, file := "", e.Src.At("ipvs"), ""
		if e.IPVS != nil {
			want = *e.IPVS
		} else {
			pos = e.Src.At("ipvsFile")
			file = e.IPVSFile
			b, err := r.s.folder.read(e.IPVSFile)
			if err != nil && !r.opts.Update {
				failAt(pos, "ipvsFile", "a readable golden file "+e.IPVSFile, err.Error())
			}
			want = string(b)
		}
		if normalize(want) != normalize(got) {
			if r.opts.Update {
				r.golden = append(r.golden, goldenUpdate{file: file, pos: pos, text: got, inline: e.IPVS != nil})
			} else {
				failAt(pos, "ipvs", want, got)
			}
		}
	}
	if len(e.Sysctls) > 0 {
		names := make([]string, 0, len(e.Sysctls))
		for n := range e.Sysctls {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			v, err := dp.Sysctl.Get(n)
			got := fmt.Sprint(v)
			if err != nil {
				got = err.Error()
			}
			if err != nil || v != e.Sysctls[n] {
				failAt(e.Src.At("sysctls"), "sysctls."+n, fmt.Sprint(e.Sysctls[n]), got)
			}
		}
	}
	if e.Addresses != nil {
		got, err := dp.Addresses.Addresses(ipvs.DummyDevice)
		g := strings.Join(got, " ")
		if err != nil {
			g = err.Error()
		}
		want := append([]string(nil), (*e.Addresses)...)
		sort.Strings(want)
		if g != strings.Join(want, " ") {
			failAt(e.Src.At("addresses"), "addresses", "["+strings.Join(want, " ")+"]", "["+g+"]")
		}
	}
	if l := e.Latency; l != nil {
		got, ok := r.latency(l.Object)
		switch {
		case !ok:
			failAt(l.Src.At("object"), "latency", "a sync that carried the latest change of "+l.Object, "none finished yet")
		case l.Exact != nil && got != l.Exact.D():
			failAt(l.Src.At("exact"), "latency", l.Exact.String(), got.String())
		case l.Max != nil && got > l.Max.D():
			failAt(l.Src.At("max"), "latency", "at most "+l.Max.String(), got.String())
		}
	}
	if e.Draining != nil {
		var got []string
		if p, ok := r.w.Backend().(*ipvs.Proxier); ok {
			got = p.Graceful().Pending()
		}
		want := append([]string(nil), (*e.Draining)...)
		sort.Strings(want)
		if strings.Join(got, "; ") != strings.Join(want, "; ") {
			failAt(e.Src.At("draining"), "draining", "["+strings.Join(want, "; ")+"]", "["+strings.Join(got, "; ")+"]")
		}
	}
	if c := e.DataplaneOps; c != nil {
		n := 0
		for _, at := range r.dataplaneAt {
			if len(c.Between) == 2 && (at < c.Between[0].D() || at > c.Between[1].D()) {
				continue
			}
			n++
		}
		switch {
		case c.Count != nil && n != *c.Count:
			failAt(c.Src.At("count"), "dataplaneOps.count", fmt.Sprint(*c.Count), fmt.Sprint(n))
		case c.AtLeast != nil && n < *c.AtLeast:
			failAt(c.Src.At("atLeast"), "dataplaneOps.atLeast", fmt.Sprintf("at least %d", *c.AtLeast), fmt.Sprint(n))
		case c.AtMost != nil && n > *c.AtMost:
			failAt(c.Src.At("atMost"), "dataplaneOps.atMost", fmt.Sprintf("at most %d", *c.AtMost), fmt.Sprint(n))
		}
	}
	for _, name := range sortedConnNames(e.Connections) {
		ce := e.Connections[name]
		fails = append(fails, r.checkConn(name, ce, now)...)
	}
	return fails
}

func (r *replayer) checkConn(name string, ce ConnExpect, now time.Duration) []Failure {
	var fails []Failure
	failAt := func(key, expected, got string) {
		fails = append(fails, Failure{File: r.s.File, Pos: ce.Src.At(key), At: now, What: "connections." + name + "." + key, Expected: expected, Got: got})
	}
	res := r.conns[name]
	if ce.Result != "" {
		got := "connected"
		switch {
		case errors.Is(res.Err, ipvs.ErrRefused):
			got = "refused"
		case errors.Is(res.Err, ipvs.ErrTimeout):
			got = "timeout"
		case res.Err != nil:
			got = res.Err.Error()
		}
		if got != ce.Result {
			failAt("result", ce.Result, got)
		}
	}
	if ce.LatencyAtLeast != nil && res.Latency < ce.LatencyAtLeast.D() {
		failAt("latencyAtLeast", "at least "+ce.LatencyAtLeast.String(), res.Latency.String())
	}
	if ce.LatencyAtMost != nil && res.Latency > ce.LatencyAtMost.D() {
		failAt("latencyAtMost", "at most "+ce.LatencyAtMost.String(), res.Latency.String())
	}
	if ce.Server != "" || ce.State != "" {
		info, _ := r.env.Traffic.Conn(name)
		if ce.Server != "" && info.Server != ce.Server {
			if info.Server == "" {
				info.Server = "(none)"
			}
			failAt("server", ce.Server, info.Server)
		}
		if ce.State != "" && info.State != ce.State {
			failAt("state", ce.State, info.State)
		}
	}
	return fails
}

// latency is the propagation latency of an object's latest change.
func (r *replayer) latency(key string) (time.Duration, bool) {
	at, before, ok := r.w.LastChange(key)
	if !ok {
		return 0, false
	}
	runs := r.w.Syncs()
	for _, run := range runs[before:] {
		if run.End >= 0 {
			return run.End - at, true
		}
	}
	return 0, false
}

func startList(runs []sim.SyncRecord) string {
	s := make([]string, len(runs))
	for i, r := range runs {
		s[i] = r.Start.String()
	}
	return "[" + strings.Join(s, " ") + "]"
}

// normalize drops trailing spaces and blank lines so that goldens survive
// editors.
func normalize(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n "), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t")
	}
	return strings.Join(lines, "\n")
}

// writeGoldens applies --update: golden files are rewritten; inline goldens
// are rewritten in the scenario file, bottom-up so line numbers hold.
func (r *replayer) writeGoldens() error {
	var inline []goldenUpdate
	for _, g := range r.golden {
		if !g.inline {
			if err := r.s.folder.write(g.file, []byte(g.text)); err != nil {
				return fmt.Errorf("--update: %w", err)
			}
			r.res.Updated = append(r.res.Updated, filepath.Join(r.s.Dir, g.file))
			continue
		}
		inline = append(inline, g)
	}
	if len(inline) == 0 {
		return nil
	}
	src, err := rewriteInline(r.s.source, inline)
	if err != nil {
		return fmt.Errorf("--update %s: %w", r.s.File, err)
	}
	if r.s.base == "" {
		return fmt.Errorf("--update %s: a scenario parsed from memory cannot be rewritten", r.s.File)
	}
	if err := r.s.folder.write(r.s.base, src); err != nil {
		return fmt.Errorf("--update: %w", err)
	}
	r.res.Updated = append(r.res.Updated, r.s.File)
	return nil
}

// rewriteInline replaces the content of literal block scalars (`ipvs: |`).
func rewriteInline(src []byte, ups []goldenUpdate) ([]byte, error) {
	lines := strings.Split(string(src), "\n")
	sort.Slice(ups, func(i, j int) bool { return ups[i].pos.Line > ups[j].pos.Line })
	for _, u := range ups {
		head := u.pos.Line - 1 // the line holding `|`
		if head < 0 || head >= len(lines) || !strings.Contains(lines[head], "|") {
			return nil, fmt.Errorf("line %d: only a literal block golden (ipvs: |) can be rewritten", u.pos.Line)
		}
		keyIndent := len(lines[head]) - len(strings.TrimLeft(lines[head], " "))
		end := head + 1
		indent := -1
		for end < len(lines) {
			l := lines[end]
			if strings.TrimSpace(l) == "" {
				end++
				continue
			}
			ind := len(l) - len(strings.TrimLeft(l, " "))
			if indent < 0 {
				if ind <= keyIndent {
					break
				}
				indent = ind
			}
			if ind < indent {
				break
			}
			end++
		}
		// keep trailing blank lines outside the block
		for end > head+1 && strings.TrimSpace(lines[end-1]) == "" {
			end--
		}
		if indent < 0 {
			indent = keyIndent + 2
		}
		pad := strings.Repeat(" ", indent)
		var body []string
		for _, l := range strings.Split(strings.TrimRight(u.text, "\n"), "\n") {
			body = append(body, strings.TrimRight(pad+l, " "))
		}
		lines = append(lines[:head+1], append(body, lines[end:]...)...)
	}
	return []byte(strings.Join(lines, "\n")), nil
}
