package scenarios

import (
	"github.com/proxysim/proxysim/sim/runner"
)

func init() { RegisterExpectation(func() Expectation { return &NextRunExpectation{} }) }

// NextRunExpect pins when the runner will next run if nothing asks it to:
// the instant its timers say, read without moving time.
type NextRunExpect struct {
	At     *Duration `yaml:"at"`
	Reason string    `yaml:"reason"`
	// None expects no armed timer: the runner is stopped.
	None bool `yaml:"none"`
	Src  Src
}

// NextRunExpectation is `nextRun: {at: D, reason: R}` or `nextRun: {none: true}`.
type NextRunExpectation struct {
	NextRun *NextRunExpect `yaml:"nextRun"`
}

var nextRunReasons = map[string]bool{
	string(runner.ReasonPeriodic): true, string(runner.ReasonRetry): true,
	string(runner.ReasonDeferred): true, string(runner.ReasonRequest): true,
}

func (e *NextRunExpectation) Validate(v *Validator) {
	n := e.NextRun
	if n == nil {
		return
	}
	switch {
	case n.None && (n.At != nil || n.Reason != ""):
		v.Errorf(n.Src.At("none"), "none: true expects no next run; it takes no at or reason")
	case !n.None && n.At == nil:
		v.Errorf(Pos{n.Src.Line, n.Src.Column, n.Src.Path}, "say what to expect: at (the instant) or none: true")
	}
	if n.Reason != "" && !nextRunReasons[n.Reason] {
		v.Errorf(n.Src.At("reason"), "want periodic, retry, deferred or request, got %q", n.Reason)
	}
	if at, ok := v.At(); ok && n.At != nil && *n.At < at {
		v.Errorf(n.Src.At("at"), "the next run cannot be at %v, before this step at %v", n.At, at)
	}
}
