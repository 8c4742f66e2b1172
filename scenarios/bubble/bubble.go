// Package bubble replays a scenario against a proxy of one's own — one
// proxysim does not run — inside a testing/synctest bubble: Replay.
// The scenario's world (API server, controllers, timeline) runs as in
// replay.Replay, its clock held in step with the bubble's; the proxy
// under test runs on its own goroutines, with its own informers, work
// queues and timers on the real time package, which the bubble makes
// virtual. Its dataplane is a fake of the scenario's mode, and the
// expectations that read a dataplane (route, the mode's goldens,
// dataplaneOps) read that fake. With Options.Compare, proxysim's
// model of kube-proxy runs beside it in the same world, and the two
// dataplanes are compared after every step.
//
// It drives the replay through scenarios.Replayer, stepping virtual time
// itself. A mode that can host a proxy under test implements
// OwnProxyMode (scenarios/ipvsmode, iptablesmode and nftablesmode do).
package bubble

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	"sigs.k8s.io/knftables"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/replay"
	"github.com/proxysim/proxysim/sim"
	"github.com/proxysim/proxysim/sim/ipvs"
	"github.com/proxysim/proxysim/sim/proxy"
	"github.com/proxysim/proxysim/sim/route"
	"github.com/proxysim/proxysim/sim/trace"
	"github.com/proxysim/proxysim/sim/vclock"
)

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
	Proxy scenarios.Proxy
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
	OwnDataplane(s *scenarios.Scenario, clk clock.PassiveClock) (OwnDataplane, error)
}

// ModelTracer is implemented by a mode whose own dataplane (Mode.Fake) is
// traced otherwise than through RouteTracer: it gives the comparison a
// tracer over it.
type ModelTracer interface {
	TraceModel(d scenarios.Dataplane) RouteTracer
}

// RouteTracer traces a connection through a dataplane as it is now.
type RouteTracer interface {
	Route(pkt route.Packet, again *time.Duration) (route.Shares, error)
}

// OwnDataplane is a mode's dataplane for a proxy under test: what the
// mode's expectations read (it is the replay's Dataplane), with a tracer,
// and the handles the proxy programs.
type OwnDataplane interface {
	scenarios.Dataplane
	RouteTracer
	// Attach sets env's handle for the mode; onWrite must be called after
	// every write operation the proxy makes through it (an nft
	// transaction, failed or not), on the proxy's goroutine.
	Attach(env *ProxyEnv, onWrite func())
	// Keys are the mode's expectation keys that read this dataplane (its
	// goldens, route).
	Keys() []string
}

// CompareKubeProxy is the one Options.Compare value: proxysim's
// model of kube-proxy v1.36 for the scenario's mode.
const CompareKubeProxy = "kube-proxy"

// Options tune Replay.
type Options struct {
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
	// the scenario; they are listed in Result.Skipped.
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
	Pos scenarios.Pos
	Key string
	Why string
}

func (s Skipped) String() string {
	return fmt.Sprintf("%d:%d: %s: %s", s.Pos.Line, s.Pos.Column, s.Pos.Path, s.Why)
}

// Result is what a bubble replay found.
type Result struct {
	Scenario *scenarios.Scenario
	Env      string // the proxy's dataplane
	Failures []replay.Failure
	Skipped  []Skipped
	// Checks counts the evaluations of expect blocks.
	Checks int
	// Writes are the instants of the proxy's dataplane writes.
	Writes []time.Duration
	// Compare is the comparison with proxysim's model of kube-proxy; nil
	// without Options.Compare.
	Compare *Comparison
	// Updated lists the golden files Update rewrote.
	Updated []string
	// Trace is the world's trace (the API server, controllers and, with
	// Compare, the model of kube-proxy).
	Trace *trace.Recorder
}

// Passed reports whether every checked expectation held.
func (r *Result) Passed() bool { return len(r.Failures) == 0 }

// Replay replays s inside a synctest bubble with the proxy under test, run
// by p, in the place of proxysim's own proxy, and checks what that proxy
// did against the scenario's expectations (see Options). It must be called from a test's own goroutine, not in a
// bubble, and not from a parallel test while another bubble replay runs
// in the same process if the proxy under test uses globals.
//
// An error means the replay could not run: the mode cannot host a proxy
// under test, the scenario asks for what only proxysim's engine can do
// (each such part named with its position and reason), or the proxy
// returned an error.
func Replay(t *testing.T, s *scenarios.Scenario, p ProxyFunc, opts Options) (*Result, error) {
	t.Helper()
	mode, ok := scenarios.LookupMode(s.Proxy.Mode)
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
	var res *Result
	var err error
	synctest.Test(t, func(*testing.T) {
		res, err = replayInBubble(s, mode, om, p, opts)
	})
	return res, err
}

func ownProxyModes() []string {
	var out []string
	for _, n := range scenarios.ModeNames() {
		if m, _ := scenarios.LookupMode(n); m != nil {
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
	r      *replay.Replayer
	s      *scenarios.Scenario
	od     OwnDataplane
	model  scenarios.Dataplane // nil without Compare
	mode   scenarios.Mode
	start  time.Time // the bubble instant of the world's time 0
	checks map[*scenarios.Expect][]scenarios.Expectation
	acts   map[*scenarios.Step][]scenarios.Action

	writes  chan struct{} // one pending "the proxy wrote"
	mu      sync.Mutex
	writeAt []time.Duration

	cmp *comparer // nil without Compare
}

func (b *bubble) now() time.Duration { return time.Since(b.start) }

func replayInBubble(s *scenarios.Scenario, mode scenarios.Mode, om OwnProxyMode, p ProxyFunc, opts Options) (*Result, error) {
	res := &Result{Scenario: s}
	b := &bubble{s: s, writes: make(chan struct{}, 1), mode: mode}
	clk := vclock.New(vclock.Epoch)
	od, err := om.OwnDataplane(s, clk)
	if err != nil {
		return nil, err
	}
	defer od.Close()
	if b.checks, b.acts, res.Skipped, err = plan(s, od.Keys(), opts); err != nil {
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
	ropts := replay.Options{Update: opts.Update, ContextLines: opts.ContextLines}
	var newBackend func(*sim.World) (proxy.Backend, error)
	if b.model != nil {
		newBackend = b.model.NewBackend
	}
	r, err := replay.NewReplayer(s, od, clk, newBackend, ropts)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	b.r = r
	w := r.World()
	res.Trace = w.Trace
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
		if err := r.WriteGoldens(); err != nil {
			return nil, err
		}
	}
	rr := r.Result()
	res.Failures = rr.Failures
	res.Checks = rr.Checks
	res.Updated = rr.Updated
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
	r, s := b.r, b.s
	for i := range s.Timeline {
		st := &s.Timeline[i]
		if err := b.runUntil(st.At.D()); err != nil {
			return err
		}
		if b.cmp != nil {
			b.cmp.beforeStep(i)
		}
		if err := r.Act(i, b.acts[st]); err != nil {
			return err
		}
		// The proxy hears of the step's writes and does what it does at
		// once; then the step is judged.
		b.settle()
		if b.cmp != nil {
			b.cmp.refreshProbes()
			b.cmp.observe()
		}
		if st.Expect != nil {
			r.Expect(i, st.Expect, b.checks[st.Expect])
		}
		if b.cmp != nil {
			b.cmp.afterStep(i)
		}
	}
	if err := b.runUntil(s.Length()); err != nil {
		return err
	}
	r.ExpirePending()
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
	r := b.r
	w := r.World()
	for {
		target := t
		if at, ok := w.Clock.Pending(); ok {
			if d := at.Sub(w.Config().Start); d < target {
				target = d
			}
		}
		if d, ok := r.NextDeadline(); ok && d < target {
			target = d
		}
		if now := b.now(); target > now {
			timer := time.NewTimer(target - now)
		wait:
			for {
				select {
				case <-b.writes:
					b.settle()
					r.CheckPending()
				case <-timer.C:
					break wait
				}
			}
		} else if target < now {
			target = now
		}
		if err := r.OverBudget(); err != nil {
			return err
		}
		w.RunUntil(target)
		if err := r.Err(); err != nil {
			return err
		}
		b.settle()
		r.CheckPending()
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
	b.r.World().RunUntil(b.now())
	synctest.Wait()
	select {
	case <-b.writes:
	default:
	}
	b.r.SetDataplaneWrites(b.proxyWrites())
	if b.cmp != nil {
		b.cmp.observe()
	}
}

// plan sorts the scenario's steps and expectations into those a proxy
// under test can be checked for and the others: an error naming every
// other one, or with SkipUnsupported the list of them.
func plan(s *scenarios.Scenario, modeKeys []string, opts Options) (map[*scenarios.Expect][]scenarios.Expectation, map[*scenarios.Step][]scenarios.Action, []Skipped, error) {
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
	checks := map[*scenarios.Expect][]scenarios.Expectation{}
	acts := map[*scenarios.Step][]scenarios.Action{}
	for i := range s.Timeline {
		st := &s.Timeline[i]
		for _, a := range st.Actions {
			keys := scenarios.PartKeys(a, st.Src)
			if f := scenarios.FaultOf(a); f != nil {
				if f.WatchBreak != nil {
					skipped = append(skipped, Skipped{Pos: f.Src.At("watchBreak"), Key: "watchBreak", Why: reason("watchBreak")})
				}
				var parts []scenarios.Action
				for _, p := range f.Parts {
					// The runner's fault (syncs: N); keys are unique
					// across a fault's parts.
					if slices.Contains(scenarios.PartKeys(p, f.Src), "syncs") {
						skipped = append(skipped, Skipped{Pos: f.Src.At("syncs"), Key: "syncs", Why: reason("syncs (fault)")})
						continue
					}
					parts = append(parts, p)
				}
				if len(parts) > 0 {
					acts[st] = append(acts[st], f.Only(parts))
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
			keys := scenarios.PartKeys(c, e.Src)
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
		b.WriteString("\n(bubble.Options.SkipUnsupported skips these)")
		return nil, nil, nil, fmt.Errorf("%s", b.String())
	}
	return checks, acts, skipped, nil
}
