package replay

import (
	"fmt"
	"time"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/sim"
	"github.com/proxysim/proxysim/sim/kpmetrics"
	"github.com/proxysim/proxysim/sim/trace"
)

// Run is what a part of a scenario sees while it replays: the world, the
// mode's dataplane, the trace, and where to report what did not hold.
type Run struct {
	r     *replayer
	step  int
	src   scenarios.Src
	fails []Failure
}

// World is the simulated node and cluster.
func (r *Run) World() *sim.World { return r.r.w }

// Metrics is kube-proxy's metrics registry as the replay has filled it so
// far; nil for a mode without one.
func (r *Run) Metrics() *kpmetrics.Registry { return r.r.metrics }

// Dataplane is the replay's instance of the scenario's mode.
func (r *Run) Dataplane() scenarios.Dataplane { return r.r.dp }

// Now is the virtual instant, from the proxy's start.
func (r *Run) Now() time.Duration { return r.r.w.Now() }

// Trace records an event at the current instant.
func (r *Run) Trace(e trace.Event) { r.r.w.Trace.Add(e) }

// Step traces what a step does.
func (r *Run) Step(op, object, detail string) {
	r.Trace(trace.Event{Kind: trace.Step, Op: op, Object: object, Detail: detail})
}

// Fail reports an expectation that does not hold now: what was expected and
// what is, at the field p.
func (r *Run) Fail(p scenarios.Pos, what, expected, got string) {
	r.fails = append(r.fails, Failure{File: r.r.s.File, Pos: p, At: r.Now(), What: what, Expected: expected, Got: got})
}

// where names the current step in errors: file:line:column: timeline[i].
func (r *Run) where() string {
	return fmt.Sprintf("%s:%d:%d: timeline[%d]", r.r.s.File, r.src.Line, r.src.Column, r.step)
}
