package replay

import (
	"fmt"
	"time"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/sim"
	"github.com/proxysim/proxysim/sim/proxy"
	"github.com/proxysim/proxysim/sim/vclock"
)

// Replayer is one replay taken a step at a time, for a driver that holds
// virtual time itself: scenarios/bubble, which replays a scenario against
// a proxy of one's own in a testing/synctest bubble. Replay does the whole
// of a replay in one call; a Replayer gives the same pieces — the world
// built, a step's actions applied, an expect block checked, "within"
// expectations kept pending until their deadlines — and leaves the order
// and the clock to its driver.
type Replayer struct{ r *replayer }

// NewReplayer builds the world of s on clk, not yet started: proxysim's
// proxy configured from s.Proxy (its runner, resync period, node, zone and
// sync cost) with newBackend as its dataplane's backend (nil: it programs
// none), the scenario's objects created and its controllers attached. dp
// is the dataplane the expectations read. Of opts, Update, ContextLines
// (default 12) and the budget (MaxEvents, MaxMemory) apply. Close it when
// done.
func NewReplayer(s *scenarios.Scenario, dp scenarios.Dataplane, clk *vclock.Clock, newBackend func(*sim.World) (proxy.Backend, error), opts Options) (*Replayer, error) {
	if opts.ContextLines == 0 {
		opts.ContextLines = 12
	}
	r := &replayer{s: s, opts: opts, dp: dp, budget: newBudget(opts)}
	cfg := worldConfig(s.Proxy, clk)
	cfg.NewBackend = newBackend
	w, err := sim.NewWorld(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.File, err)
	}
	r.w = w
	r.res = &Result{Scenario: s, Env: dp.Name(), Trace: w.Trace}
	for _, o := range s.Initial {
		if err := w.Create(o.Obj); err != nil {
			w.Close()
			return nil, fmt.Errorf("%s: creating %s: %w", s.File, o.Key, err)
		}
	}
	if err := r.attachControllers(); err != nil {
		w.Close()
		return nil, err
	}
	return &Replayer{r: r}, nil
}

// World is the replay's world: its clock, trace, API server and
// proxysim's proxy (started by the driver, World().Start()).
func (p *Replayer) World() *sim.World { return p.r.w }

// Close closes the world.
func (p *Replayer) Close() { p.r.w.Close() }

// Result is what the replay has found so far: its failures, the count of
// expect blocks checked, the goldens WriteGoldens rewrote, the trace.
func (p *Replayer) Result() *Result { return p.r.res }

// Act applies actions, some or all of timeline[step]'s, after tracing the
// step's note: what did not hold while they ran is recorded as failures.
// An error means the step could not act (file:line:column: timeline[i]:
// ...), or a churn it started failed.
func (p *Replayer) Act(step int, actions []scenarios.Action) error {
	if err := p.r.act(step, actions); err != nil {
		return err
	}
	return p.r.churnErr
}

// Expect checks the parts checks of timeline[step]'s expect block e now
// (one check counted): what does not hold is a failure, or with e.Within
// the block stays pending, the same parts re-checked, until CheckPending
// finds they hold or its deadline passes.
func (p *Replayer) Expect(step int, e *scenarios.Expect, checks []scenarios.Expectation) {
	r := p.r
	fails := r.check(step, e, checks)
	if len(fails) == 0 {
		return
	}
	if e.Within != nil && e.Within.D() > 0 {
		r.pending = append(r.pending, &pendingCheck{step: step, e: e, checks: checks, deadline: r.w.Now() + e.Within.D(), last: fails})
		return
	}
	r.fail(fails)
}

// NextDeadline is the earliest deadline of a pending expect block, from
// the world's start; false when none is pending.
func (p *Replayer) NextDeadline() (time.Duration, bool) { return p.r.firstDeadline() }

// CheckPending re-checks the pending expect blocks now: one that holds is
// done, one past its deadline fails.
func (p *Replayer) CheckPending() { p.r.evalPending() }

// ExpirePending fails every expect block still pending: the timeline has
// ended.
func (p *Replayer) ExpirePending() { p.r.expirePending() }

// OverBudget is a *BudgetError once the replay has passed its event or
// memory budget (Options.MaxEvents, MaxMemory).
func (p *Replayer) OverBudget() error { return p.r.overBudget() }

// Err is the first error of a churn, which runs inside the clock and so
// cannot return it.
func (p *Replayer) Err() error { return p.r.churnErr }

// SetDataplaneWrites gives the instants of the dataplane's writes, from
// the world's start, as dataplaneOps expectations count them: the driver
// knows them when a dataplane other than proxysim's proxy's is written.
func (p *Replayer) SetDataplaneWrites(at []time.Duration) { p.r.dataplaneAt = at }

// WriteGoldens applies Options.Update: the goldens are rewritten with what
// the expectations read (Result().Updated lists them).
func (p *Replayer) WriteGoldens() error { return p.r.writeGoldens() }
