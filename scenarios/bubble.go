package scenarios

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	"sigs.k8s.io/knftables"

	"github.com/proxysim/proxysim/sim"
	"github.com/proxysim/proxysim/sim/ipvs"
	"github.com/proxysim/proxysim/sim/proxy"
	"github.com/proxysim/proxysim/sim/route"
	"github.com/proxysim/proxysim/sim/runner"
	"github.com/proxysim/proxysim/sim/trace"
	"github.com/proxysim/proxysim/sim/vclock"
)

// A proxy proxysim does not run — your own — replayed inside a
// testing/synctest bubble. The scenario's world (API server, controllers,
// timeline) runs as in Replay, its clock held in step with the bubble's;
// the proxy under test runs on its own goroutines, with its own informers,
// work queues and timers on the real time package, which the bubble makes
// virtual. Its dataplane is a fake of the scenario's mode, and the
// expectations that read a dataplane (route, the mode's goldens,
// dataplaneOps) read that fake.

// ProxyEnv is what a proxy under test programs against: a client of the
// scenario's API server and the dataplane of the scenario's mode. Only the
// dataplane of that mode is set.
type ProxyEnv struct {
	// Client is the world's fake clientset: informers built on it see the
	// scenario's objects and every change of its timeline, each at its
	// virtual instant.
	Client kubernetes.Interface
	// NodeName is proxy.nodeName (default node-a).
	NodeName string
	// Proxy is the scenario's proxy mapping (minSyncPeriod, syncPeriod,
	// the mode's Settings, ...), for a proxy that takes the same knobs.
	Proxy Proxy
	// NFTables is a knftables.Fake (mode nftables), bound to the table
	// "kube-proxy" of family ip.
	NFTables knftables.Interface
	// IPVS is the fake kernel's IPVS (mode ipvs): the IPVS handle, the
	// dummy device's addresses and the sysctls.
	IPVS ipvs.Dataplane
	// IPTables is the in-memory iptables (mode iptables): whole-payload
	// iptables-restore, iptables-save, and ensuring a chain or a rule.
	IPTables IPTables
}

// IPTables is the iptables of mode iptables as a proxy programs it
// (sim/iptables.Dataplane's methods): iptables-restore --noflush of a
// whole payload (all of it applies, or none and an error), iptables-save
// of one table, and creating a chain or prepending a rule unless present.
type IPTables interface {
	Restore(payload string) error
	Save(table string) (string, error)
	EnsureChain(table, chain string) error
	EnsureRule(table, chain, rule string) error
}

// ProxyFunc runs a proxy under test until ctx is cancelled, then returns
// once every goroutine it started has stopped (informer factories shut
// down, work queues shut down, tickers stopped): a goroutine left blocked
// in the bubble makes synctest.Test panic. A non-nil error before ctx is
// cancelled fails the replay.
type ProxyFunc func(ctx context.Context, env ProxyEnv) error

// OwnProxyMode is implemented by a mode that can host a proxy under test.
// OwnDataplane builds the proxy's dataplane for one replay, on the
// world's clock (which the bubble's drives).
type OwnProxyMode interface {
	OwnDataplane(s *Scenario, clk clock.PassiveClock) (OwnDataplane, error)
}

// ModelTracer is implemented by a mode whose own dataplane (Mode.Fake) is
// traced otherwise than through RouteTracer: it gives the comparison a
// tracer over it.
type ModelTracer interface {
	TraceModel(d Dataplane) RouteTracer
}

// RouteTracer traces a connection through a dataplane as it is now.
type RouteTracer interface {
	Route(pkt route.Packet, again *time.Duration) (route.Shares, error)
}

// OwnDataplane is a mode's dataplane for a proxy under test: what the
// mode's expectations read (it is the replay's Dataplane), with a tracer,
// and the handles the proxy programs.
type OwnDataplane interface {
	Dataplane
	RouteTracer
	// Attach sets env's handle for the mode; onWrite must be called after
	// every write operation the proxy makes through it (an nft
	// transaction, failed or not), on the proxy's goroutine.
	Attach(env *ProxyEnv, onWrite func())
	// Keys are the mode's expectation keys that read this dataplane (its
	// goldens, route).
	Keys() []string
}

// CompareKubeProxy is the one BubbleOptions.Compare value: proxysim's
// model of kube-proxy v1.36 for the scenario's mode.
const CompareKubeProxy = "kube-proxy"

// BubbleOptions tune ReplayInBubble.
type BubbleOptions struct {
	// Compare, if CompareKubeProxy, also runs proxysim's model of
	// kube-proxy v1.36 for the scenario's mode in the same world, on its
	// own fake dataplane, and reports after every step the routes whose
	// shares differ and the difference in programming latency.
	Compare string
	// Ignore lists expectation keys not to check (for example
	// "nftablesFile", when the goldens are kube-proxy's tables and the
	// proxy under test writes its own).
	Ignore []string
	// SkipUnsupported skips the expectations and steps that only
	// proxysim's engine can honour (see Unsupported) instead of refusing
	// the scenario; they are listed in BubbleResult.Skipped.
	SkipUnsupported bool
	// Update rewrites the goldens with what the proxy under test
	// programmed.
	Update bool
	// ContextLines is how many trace lines a failure keeps (default 12).
	ContextLines int
}

// Unsupported names what a proxy under test cannot be checked for, with
// the reason: keys of an expect block, of a step and of a fault.
var Unsupported = map[string]string{
	"syncs":           "counts the runs of proxysim's runner, which a proxy under test does not have (dataplaneOps counts its dataplane writes)",
	"nextRun":         "reads proxysim's runner",
	"latency":         "measured from the syncs of proxysim's engine",
	"programming":     "measured from the syncs of proxysim's engine",
	"writes":          "counts writes by proxysim's own consumers",
	"metrics":         "kube-proxy's metrics, which only proxysim's model exports",
	"nftablesMetrics": "kube-proxy's metrics, which only proxysim's model exports",
	"restart":         "restarts proxysim's proxy, not the proxy under test",
	"watchBreak":      "breaks the watches of proxysim's consumers only",
	"run":             "drives proxysim's runner",
	"retryAfter":      "drives proxysim's runner",
	"stop":            "drives proxysim's runner",
	"syncs (fault)":   "fails syncs of proxysim's runner",
}

// coreBubbleKeys are the core expectation keys a proxy under test can be
// checked for: besides the mode's, these read the API server or the
// dataplane writes.
var coreBubbleKeys = []string{"within", "dataplaneOps", "endpoints"}

// Skipped is one part of a scenario a bubble replay left out.
type Skipped struct {
	Pos Pos
	Key string
	Why string
}

func (s Skipped) String() string {
	return fmt.Sprintf("%d:%d: %s: %s", s.Pos.Line, s.Pos.Column, s.Pos.Path, s.Why)
}

// BubbleResult is what a bubble replay found.
type BubbleResult struct {
	Scenario *Scenario
	Env      string // the proxy's dataplane
	Failures []Failure
	Skipped  []Skipped
	// Checks counts the evaluations of expect blocks.
	Checks int
	// Writes are the instants of the proxy's dataplane writes.
	Writes []time.Duration
	// Compare is the comparison with proxysim's model of kube-proxy; nil
	// without BubbleOptions.Compare.
	Compare *Comparison
	// Updated lists the golden files Update rewrote.
	Updated []string
	// Trace is the world's trace (the API server, controllers and, with
	// Compare, the model of kube-proxy).
	Trace *trace.Recorder
}

// Passed reports whether every checked expectation held.
func (r *BubbleResult) Passed() bool { return len(r.Failures) == 0 }

// ReplayInBubble replays s inside a synctest bubble with the proxy under
// test, run by p, in the place of proxysim's own proxy, and checks what
// that proxy did against the scenario's expectations (see
// BubbleOptions). It must be called from a test's own goroutine, not in a
// bubble, and not from a parallel test while another bubble replay runs
// in the same process if the proxy under test uses globals.
//
// An error means the replay could not run: the mode cannot host a proxy
// under test, the scenario asks for what only proxysim's engine can do
// (each such part named with its position and reason), or the proxy
// returned an error.
func ReplayInBubble(t *testing.T, s *Scenario, p ProxyFunc, opts BubbleOptions) (*BubbleResult, error) {
	t.Helper()
	mode, ok := LookupMode(s.Proxy.Mode)
	if !ok {
		return nil, fmt.Errorf("%s: mode %q is not registered", s.File, s.Proxy.Mode)
	}
	om, ok := mode.(OwnProxyMode)
	if !ok {
		return nil, fmt.Errorf("%s: mode %s cannot host a proxy under test (modes that can: %s)", s.File, mode.Name(), strings.Join(ownProxyModes(), ", "))
	}
	if opts.Compare != "" && opts.Compare != CompareKubeProxy {
		return nil, fmt.Errorf("%s: compare: want %q, got %q", s.File, CompareKubeProxy, opts.Compare)
	}
	var res *BubbleResult
	var err error
	synctest.Test(t, func(*testing.T) {
		res, err = replayInBubble(s, mode, om, p, opts)
	})
	return res, err
}

func ownProxyModes() []string {
	var out []string
	for _, n := range ModeNames() {
		if m, _ := LookupMode(n); m != nil {
			if _, ok := m.(OwnProxyMode); ok {
				out = append(out, n)
			}
		}
	}
	return out
}

// bubble is one bubble replay's state; everything runs on the bubble's
// root goroutine except the proxy under test and its onWrite calls.
type bubble struct {
	r      *replayer
	od     OwnDataplane
	model  Dataplane // nil without Compare
	mode   Mode
	start  time.Time // the bubble instant of the world's time 0
	checks map[*Expect][]Expectation
	acts   map[*Step][]Action

	writes  chan struct{} // one pending "the proxy wrote"
	mu      sync.Mutex
	writeAt []time.Duration

	cmp *comparer // nil without Compare
}

func (b *bubble) now() time.Duration { return time.Since(b.start) }

func replayInBubble(s *Scenario, mode Mode, om OwnProxyMode, p ProxyFunc, opts BubbleOptions) (*BubbleResult, error) {
	res := &BubbleResult{Scenario: s}
	b := &bubble{writes: make(chan struct{}, 1), mode: mode}
	clk := vclock.New(vclock.Epoch)
	od, err := om.OwnDataplane(s, clk)
	if err != nil {
		return nil, err
	}
	defer od.Close()
	if b.checks, b.acts, res.Skipped, err = planBubble(s, od.Keys(), opts); err != nil {
		return nil, err
	}
	b.od = od
	res.Env = od.Name()
	if opts.Compare != "" {
		if b.model, err = mode.Fake(s, clk); err != nil {
			return nil, err
		}
		defer b.model.Close()
	}
	ropts := Options{Update: opts.Update, ContextLines: opts.ContextLines}
	if ropts.ContextLines == 0 {
		ropts.ContextLines = 12
	}
	r := &replayer{s: s, opts: ropts, dp: od, budget: newBudget(ropts)}
	b.r = r
	pr := s.Proxy
	resync := sim.DefaultResyncPeriod
	if pr.ConfigSyncPeriod != nil {
		if resync = pr.ConfigSyncPeriod.D(); resync == 0 {
			resync = -1
		}
	}
	rc := RunnerConfig(pr)
	cfg := sim.Config{Runner: rc, Clock: clk, NodeName: pr.NodeName, Zone: pr.Zone, ResyncPeriod: resync, Cost: pr.SyncCost.Model(),
		Endpoints: proxy.EndpointSliceTrackerOptions{IgnoreNodeHints: rc.Generation == runner.Burst}}
	if b.model != nil {
		cfg.NewBackend = b.model.NewBackend
	}
	w, err := sim.NewWorld(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.File, err)
	}
	defer w.Close()
	r.w = w
	r.res = &Result{Scenario: s, Env: od.Name(), Trace: w.Trace}
	res.Trace = w.Trace
	for _, o := range s.Initial {
		if err := w.Create(o.Obj); err != nil {
			return nil, fmt.Errorf("%s: creating %s: %w", s.File, o.Key, err)
		}
	}
	if err := r.attachControllers(); err != nil {
		return nil, err
	}
	b.start = time.Now()
	if b.model != nil {
		b.cmp = newComparer(b, w.Clientset())
		w.Trace.Observe(func(e trace.Event) {
			if e.Kind == trace.Dataplane && e.Op != "note" {
				b.cmp.modelWrote = true
			}
		})
	}
	if err := w.Start(); err != nil {
		return nil, fmt.Errorf("%s: starting proxysim's proxy: %w", s.File, err)
	}
	env := ProxyEnv{Client: w.Clientset(), NodeName: w.Config().NodeName, Proxy: s.Proxy}
	od.Attach(&env, b.wrote)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p(ctx, env) }()
	stop := func() error {
		cancel()
		return <-done
	}
	if b.cmp != nil {
		b.cmp.refreshProbes()
	}
	b.settle()
	runErr := b.run()
	if err := stop(); err != nil && runErr == nil {
		runErr = fmt.Errorf("%s: the proxy under test: %w", s.File, err)
	}
	if runErr != nil {
		return nil, runErr
	}
	if opts.Update {
		if err := r.writeGoldens(); err != nil {
			return nil, err
		}
	}
	res.Failures = r.res.Failures
	res.Checks = r.res.Checks
	res.Updated = r.res.Updated
	res.Writes = b.proxyWrites()
	if b.cmp != nil {
		res.Compare = b.cmp.result()
	}
	return res, nil
}

// wrote is the proxy's onWrite: it notes the instant and wakes the driver.
func (b *bubble) wrote() {
	b.mu.Lock()
	b.writeAt = append(b.writeAt, b.now())
	b.mu.Unlock()
	select {
	case b.writes <- struct{}{}:
	default:
	}
}

func (b *bubble) proxyWrites() []time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]time.Duration(nil), b.writeAt...)
}

// run plays the timeline.
func (b *bubble) run() error {
	r, s := b.r, b.r.s
	for i := range s.Timeline {
		st := &s.Timeline[i]
		if err := b.runUntil(st.At.D()); err != nil {
			return err
		}
		if b.cmp != nil {
			b.cmp.beforeStep(i)
		}
		run := &Run{r: r, step: i, src: st.Src}
		if st.Note != "" {
			run.Step("note", "", st.Note)
		}
		for _, a := range b.acts[st] {
			if err := a.Do(run); err != nil {
				return fmt.Errorf("%s: %w", run.where(), err)
			}
		}
		if len(run.fails) > 0 {
			r.fail(run.fails)
		}
		if r.churnErr != nil {
			return r.churnErr
		}
		// The proxy hears of the step's writes and does what it does at
		// once; then the step is judged.
		b.settle()
		if b.cmp != nil {
			b.cmp.refreshProbes()
			b.cmp.observe()
		}
		if st.Expect != nil {
			b.expect(i, st.Expect)
		}
		if b.cmp != nil {
			b.cmp.afterStep(i)
		}
	}
	if err := b.runUntil(s.Length()); err != nil {
		return err
	}
	r.expirePending()
	if b.cmp != nil {
		b.cmp.end()
	}
	return nil
}

// runUntil lets virtual time pass up to t (from the world's start): the
// proxy under test runs on its own timers meanwhile; the world's timers
// fire at their instants; pending "within" expectations are judged after
// every write of the proxy and at their deadlines.
func (b *bubble) runUntil(t time.Duration) error {
	r, w := b.r, b.r.w
	for {
		target := t
		if at, ok := w.Clock.Pending(); ok {
			if d := at.Sub(w.Config().Start); d < target {
				target = d
			}
		}
		if d, ok := r.firstDeadline(); ok && d < target {
			target = d
		}
		if now := b.now(); target > now {
			timer := time.NewTimer(target - now)
		wait:
			for {
				select {
				case <-b.writes:
					b.settle()
					r.evalPending()
				case <-timer.C:
					break wait
				}
			}
		} else if target < now {
			target = now
		}
		if err := r.overBudget(); err != nil {
			return err
		}
		w.RunUntil(target)
		if r.churnErr != nil {
			return r.churnErr
		}
		b.settle()
		r.evalPending()
		if err := w.Trace.Err(); err != nil {
			return err
		}
		if target >= t {
			return nil
		}
	}
}

// settle brings the world's clock to the bubble's, waits until every
// goroutine of the bubble is blocked (the proxy has done what the
// instant's events made it do), and records what both dataplanes now
// route. Nothing in the bubble runs while it records.
func (b *bubble) settle() {
	// The world first: what its timers due now write, the proxy hears
	// before the bubble settles.
	b.r.w.RunUntil(b.now())
	synctest.Wait()
	select {
	case <-b.writes:
	default:
	}
	b.r.dataplaneAt = b.proxyWrites()
	if b.cmp != nil {
		b.cmp.observe()
	}
}

// expect checks e now, or keeps it pending until its deadline.
func (b *bubble) expect(step int, e *Expect) {
	r := b.r
	fails := b.check(step, e)
	if len(fails) == 0 {
		return
	}
	if e.Within != nil && e.Within.D() > 0 {
		r.pending = append(r.pending, &pendingCheck{step: step, e: e, deadline: r.w.Now() + e.Within.D(), last: fails})
		return
	}
	r.fail(fails)
}

func (b *bubble) check(step int, e *Expect) []Failure {
	b.r.res.Checks++
	run := &Run{r: b.r, step: step, src: e.Src}
	for _, c := range b.checks[e] {
		c.Check(run)
	}
	return run.fails
}

// planBubble sorts the scenario's steps and expectations into those a
// proxy under test can be checked for and the others: an error naming
// every other one, or with SkipUnsupported the list of them.
func planBubble(s *Scenario, modeKeys []string, opts BubbleOptions) (map[*Expect][]Expectation, map[*Step][]Action, []Skipped, error) {
	ok := map[string]bool{}
	for _, k := range append(append([]string(nil), coreBubbleKeys...), modeKeys...) {
		ok[k] = true
	}
	ignored := map[string]bool{}
	for _, k := range opts.Ignore {
		ignored[k] = true
	}
	var skipped []Skipped
	reason := func(key string) string {
		if why, found := Unsupported[key]; found {
			return why
		}
		return "reads proxysim's own engine"
	}
	checks := map[*Expect][]Expectation{}
	acts := map[*Step][]Action{}
	for i := range s.Timeline {
		st := &s.Timeline[i]
		for _, a := range st.Actions {
			keys := presentKeys(a, st.Src)
			if fs, isFault := a.(*faultStep); isFault && fs.Fault != nil {
				f := fs.Fault
				if f.WatchBreak != nil {
					skipped = append(skipped, Skipped{Pos: f.Src.At("watchBreak"), Key: "watchBreak", Why: reason("watchBreak")})
				}
				var parts []Action
				for _, p := range f.Parts {
					if _, isSyncs := p.(*syncsFault); isSyncs {
						skipped = append(skipped, Skipped{Pos: f.Src.At("syncs"), Key: "syncs", Why: reason("syncs (fault)")})
						continue
					}
					parts = append(parts, p)
				}
				if len(parts) > 0 {
					acts[st] = append(acts[st], &faultStep{Fault: &Fault{Src: f.Src, Parts: parts, keys: f.keys}})
				}
				continue
			}
			bad := ""
			for _, k := range keys {
				if _, found := Unsupported[k]; found {
					bad = k
				}
			}
			if bad != "" {
				skipped = append(skipped, Skipped{Pos: st.Src.At(bad), Key: bad, Why: reason(bad)})
				continue
			}
			acts[st] = append(acts[st], a)
		}
		e := st.Expect
		if e == nil {
			continue
		}
		for _, c := range e.Checks {
			keys := presentKeys(c, e.Src)
			use := true
			for _, k := range keys {
				switch {
				case ignored[k]:
					use = false
				case !ok[k]:
					use = false
					skipped = append(skipped, Skipped{Pos: e.Src.At(k), Key: k, Why: reason(k)})
				}
			}
			if use {
				checks[e] = append(checks[e], c)
			}
		}
	}
	sort.SliceStable(skipped, func(i, j int) bool {
		a, b := skipped[i].Pos, skipped[j].Pos
		return a.Line < b.Line || a.Line == b.Line && a.Column < b.Column
	})
	if len(skipped) > 0 && !opts.SkipUnsupported {
		var b strings.Builder
		fmt.Fprintf(&b, "%s: a proxy under test cannot be checked for:", s.File)
		for _, sk := range skipped {
			fmt.Fprintf(&b, "\n  %s:%s", s.File, sk)
		}
		b.WriteString("\n(BubbleOptions.SkipUnsupported skips these)")
		return nil, nil, nil, fmt.Errorf("%s", b.String())
	}
	return checks, acts, skipped, nil
}

// presentKeys lists the yaml keys of part that its mapping (src) set.
func presentKeys(part any, src Src) []string {
	var out []string
	for _, k := range keysOf(reflect.TypeOf(part)) {
		if _, ok := src.Keys[k]; ok {
			out = append(out, k)
		}
	}
	return out
}
