// Package runner decides when a proxy's sync function runs: kube-proxy's
// BoundedFrequencyRunner in both of its generations, behind one type.
//
// The burst generation (kube-proxy up to v1.33) rate-limits runs with a token
// bucket that allows short bursts and supports RetryAfter. The cooldown
// generation (v1.34 and later) waits a fixed cooldown after every run, counted
// from completion, and retries failed runs by itself. Both take every timer
// from an injected clock, so the same code runs in production on the real
// clock and in simulation on a virtual one.
//
// The package must not read the wall clock or start goroutines of its own
// except in Loop, the production driver.
package runner

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Generation names a BoundedFrequencyRunner design.
type Generation int

const (
	// Burst is kube-proxy's runner up to v1.33: token bucket, RetryAfter.
	Burst Generation = iota + 1
	// Cooldown is kube-proxy's runner from v1.34: cooldown after completion,
	// retry interval for failed runs.
	Cooldown
)

func (g Generation) String() string {
	switch g {
	case Burst:
		return "burst"
	case Cooldown:
		return "cooldown"
	}
	return fmt.Sprintf("Generation(%d)", int(g))
}

// GenerationFor maps a kube-proxy version such as "v1.33.4" or "1.34" to the
// runner generation that version ships.
func GenerationFor(version string) (Generation, error) {
	v := strings.TrimPrefix(strings.TrimSpace(version), "v")
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return 0, fmt.Errorf("kube-proxy version %q: want MAJOR.MINOR[.PATCH]", version)
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(strings.SplitN(parts[1], "-", 2)[0])
	if err1 != nil || err2 != nil || major != 1 {
		return 0, fmt.Errorf("kube-proxy version %q: want 1.MINOR[.PATCH]", version)
	}
	if minor <= 33 {
		return Burst, nil
	}
	return Cooldown, nil
}

// DefaultBurstRuns is the burst size kube-proxy hard-codes for the burst
// generation.
const DefaultBurstRuns = 2

// Config holds a runner's intervals.
type Config struct {
	Generation Generation
	// MinInterval separates runs; 0 means every request runs (serialized).
	MinInterval time.Duration
	// MaxInterval forces a periodic run; it must be >= MinInterval.
	MaxInterval time.Duration
	// RetryInterval is how soon a failed run is retried; 0 disables retries.
	// In the cooldown generation this is the runner's own retryInterval. In the
	// burst generation the runner calls RetryAfter(RetryInterval) on failure,
	// as kube-proxy's iptables proxier does; its IPVS proxier never retries.
	RetryInterval time.Duration
	// BurstRuns is the bucket size of the burst generation (default 2).
	BurstRuns int
}

// Validate reports a configuration the upstream constructors would reject.
func (c Config) Validate() error {
	switch {
	case c.Generation != Burst && c.Generation != Cooldown:
		return fmt.Errorf("unknown runner generation %d", c.Generation)
	case c.MinInterval < 0 || c.MaxInterval < 0 || c.RetryInterval < 0:
		return fmt.Errorf("intervals must not be negative")
	case c.MaxInterval < c.MinInterval:
		return fmt.Errorf("maxInterval (%v) must be >= minInterval (%v)", c.MaxInterval, c.MinInterval)
	case c.MaxInterval == 0:
		return fmt.Errorf("maxInterval must be positive")
	case c.BurstRuns < 0:
		return fmt.Errorf("burstRuns must not be negative")
	}
	return nil
}

// Reason says why a run started or was deferred.
type Reason string

const (
	ReasonRequest  Reason = "request"  // Run() was called
	ReasonPeriodic Reason = "periodic" // maxInterval elapsed
	ReasonRetry    Reason = "retry"    // a failed run is retried
	ReasonDeferred Reason = "deferred" // a request held back earlier is now allowed

	// Deferral reasons.
	ReasonNoToken  Reason = "no-token" // burst: bucket empty
	ReasonRunning  Reason = "running"  // a run is in progress; requests coalesce
	ReasonCooldown Reason = "cooldown" // cooldown: minInterval since completion
	ReasonNotReady Reason = "not-ready"
)

// Observer is told about every decision. It is called with the runner's lock
// held and must not call back into the runner.
type Observer interface {
	Requested(at time.Time)
	// Deferred reports a request or timer that could not run at once; until is
	// when the runner will look again (zero when it waits for a run to end).
	Deferred(at time.Time, why Reason, until time.Time)
	Started(at time.Time, why Reason)
	Finished(at time.Time, err error)
	// Dropped reports a Run() that was discarded: the cooldown generation
	// ignores requests made before Loop starts.
	Dropped(at time.Time, why Reason)
}

// Func is the work a runner schedules; an error marks the run failed.
type Func func() error

// Runner schedules runs of a Func.
type Runner struct {
	mu      sync.Mutex
	cfg     Config
	clock   clock.WithDelayedExecution
	fn      Func
	obs     Observer
	p       policy
	running bool
	started bool
	stopped bool

	// Exactly one of these executes fn: virtual mode calls fn inline and
	// completes after cost(); Loop hands runs to its goroutine.
	cost   func() time.Duration
	loopCh chan Reason
}

type policy interface {
	start(now time.Time) (bool, Reason)
	request(now time.Time) (bool, Reason)
	retryAfter(now time.Time, d time.Duration) (bool, Reason)
	launched(now time.Time)
	finish(now time.Time, err error) (bool, Reason)
	stop()
	// next is when the runner will run next if nothing else asks it to,
	// and why; false when no timer is armed.
	next() (time.Time, Reason, bool)
}

// New builds a runner. The observer may be nil.
func New(cfg Config, clk clock.WithDelayedExecution, fn Func, obs Observer) (*Runner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Generation == Burst && cfg.BurstRuns == 0 {
		cfg.BurstRuns = DefaultBurstRuns
	}
	if obs == nil {
		obs = nopObserver{}
	}
	r := &Runner{cfg: cfg, clock: clk, fn: fn, obs: obs}
	if cfg.Generation == Burst {
		r.p = newBurst(r)
	} else {
		r.p = newCooldown(r)
	}
	return r, nil
}

// Config returns the runner's configuration.
func (r *Runner) Config() Config { return r.cfg }

// StartVirtual starts the runner in virtual mode: fn is called inline on the
// goroutine that delivers the triggering event, and the run completes cost()
// later on the runner's clock. This is how a simulation drives the runner.
func (r *Runner) StartVirtual(cost func() time.Duration) {
	if cost == nil {
		cost = func() time.Duration { return 0 }
	}
	r.mu.Lock()
	r.cost = cost
	r.mu.Unlock()
	r.begin()
}

// Loop runs the runner on the calling goroutine until stop is closed; fn runs
// on this goroutine and a run lasts as long as fn takes. This is the
// production driver, used with a real clock.
func (r *Runner) Loop(stop <-chan struct{}) {
	r.mu.Lock()
	r.loopCh = make(chan Reason, 1)
	ch := r.loopCh
	r.mu.Unlock()
	r.begin()
	for {
		select {
		case <-stop:
			r.mu.Lock()
			r.p.stop()
			r.mu.Unlock()
			return
		case <-ch:
			err := r.fn()
			r.complete(err)
		}
	}
}

func (r *Runner) begin() {
	r.mu.Lock()
	r.started = true
	ok, why := r.p.start(r.clock.Now())
	r.mu.Unlock()
	if ok {
		r.launch(why)
	}
}

// Stop ends a virtually driven runner: its timers are disarmed and nothing
// runs any more; a run in progress completes without consequences.
func (r *Runner) Stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped = true
	r.p.stop()
}

// Run asks for a run as soon as the rules allow; requests coalesce.
func (r *Runner) Run() {
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return
	}
	now := r.clock.Now()
	r.obs.Requested(now)
	ok, why := r.p.request(now)
	r.mu.Unlock()
	if ok {
		r.launch(why)
	}
}

// RetryAfter asks for a run no later than d from now. Only the burst
// generation has it; on the cooldown generation it is a request for a retry
// timer exactly as a failed run would set it, which upstream does not offer, so
// it returns an error there.
func (r *Runner) RetryAfter(d time.Duration) error {
	r.mu.Lock()
	if r.cfg.Generation != Burst {
		r.mu.Unlock()
		return fmt.Errorf("RetryAfter: the %s generation has no RetryAfter; return an error from the run instead", r.cfg.Generation)
	}
	ok, why := r.p.retryAfter(r.clock.Now(), d)
	r.mu.Unlock()
	if ok {
		r.launch(why)
	}
	return nil
}

// launch executes one run. The policy has already decided it may start.
func (r *Runner) launch(why Reason) {
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return
	}
	now := r.clock.Now()
	r.running = true
	r.p.launched(now)
	r.obs.Started(now, why)
	loop, cost := r.loopCh, r.cost
	r.mu.Unlock()
	if loop != nil {
		loop <- why
		return
	}
	err := r.fn()
	if r.cfg.Generation == Burst && err != nil && r.cfg.RetryInterval > 0 {
		r.mu.Lock()
		r.p.retryAfter(r.clock.Now(), r.cfg.RetryInterval)
		r.mu.Unlock()
	}
	d := cost()
	if d <= 0 {
		r.complete(err)
		return
	}
	r.clock.AfterFunc(d, func() { r.complete(err) })
}

func (r *Runner) complete(err error) {
	r.mu.Lock()
	if r.loopCh != nil && r.cfg.Generation == Burst && err != nil && r.cfg.RetryInterval > 0 {
		r.p.retryAfter(r.clock.Now(), r.cfg.RetryInterval)
	}
	now := r.clock.Now()
	r.running = false
	if r.stopped {
		r.mu.Unlock()
		return
	}
	r.obs.Finished(now, err)
	ok, why := r.p.finish(now, err)
	r.mu.Unlock()
	if ok {
		r.launch(why)
	}
}

type nopObserver struct{}

func (nopObserver) Requested(time.Time)                   {}
func (nopObserver) Deferred(time.Time, Reason, time.Time) {}
func (nopObserver) Started(time.Time, Reason)             {}
func (nopObserver) Finished(time.Time, error)             {}
func (nopObserver) Dropped(time.Time, Reason)             {}

// Started reports whether Loop or StartVirtual has started the runner.
func (r *Runner) Started() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.started
}
