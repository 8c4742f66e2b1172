package replay

import (
	"fmt"

	"github.com/proxysim/proxysim/scenarios"
)

// Action is a part of a step (or of a fault step) that replays itself: a
// mode's or a controller's. Do runs at the step's instant.
type Action interface {
	scenarios.Action
	Do(r *Run) error
}

// Expectation is an expect entry that checks itself: a mode's or a
// controller's. Check reports what does not hold now with Run.Fail.
type Expectation interface {
	scenarios.Expectation
	Check(r *Run)
}

// Attacher is implemented by a controller's settings
// (scenarios.ControllerSettings): Attach builds the controller for one
// replay and subscribes it to r.World(), before the world starts; it keeps
// what its parts need with Run.SetController.
type Attacher interface {
	Attach(r *Run) error
}

// do replays one part of a step: the core's by its kind, a mode's or a
// controller's by its own Do.
func do(a scenarios.Action, r *Run) error {
	switch a := a.(type) {
	case *scenarios.ApplyStep:
		return doApplyStep(a, r)
	case *scenarios.ChurnStep:
		return doChurnStep(a, r)
	case *scenarios.CreateStep:
		return doCreateStep(a, r)
	case *scenarios.DeleteStep:
		return doDeleteStep(a, r)
	case *scenarios.FaultStep:
		return doFaultStep(a, r)
	case *scenarios.NodeStep:
		return doNodeStep(a, r)
	case *scenarios.PatchStep:
		return doPatchStep(a, r)
	case *scenarios.PodReadyStep:
		return doPodReadyStep(a, r)
	case *scenarios.RestartStep:
		return doRestartStep(a, r)
	case *scenarios.RetryAfterStep:
		return doRetryAfterStep(a, r)
	case *scenarios.RolloutStep:
		return doRolloutStep(a, r)
	case *scenarios.RunStep:
		return doRunStep(a, r)
	case *scenarios.StopStep:
		return doStopStep(a, r)
	case *scenarios.SyncCostStep:
		return doSyncCostStep(a, r)
	case *scenarios.SyncsFault:
		return doSyncsFault(a, r)
	case *scenarios.UpdateStep:
		return doUpdateStep(a, r)
	case Action:
		return a.Do(r)
	}
	return fmt.Errorf("%T has no replay (its package implements no replay.Action)", a)
}

// check checks one expect entry: the core's by its kind, a mode's or a
// controller's by its own Check.
func check(e scenarios.Expectation, r *Run) {
	switch e := e.(type) {
	case *scenarios.ClusterExpectation:
		checkClusterExpectation(e, r)
	case *scenarios.EndpointsExpectation:
		checkEndpointsExpectation(e, r)
	case *scenarios.LatencyExpectation:
		checkLatencyExpectation(e, r)
	case *scenarios.MetricsExpectation:
		checkMetricsExpectation(e, r)
	case *scenarios.NextRunExpectation:
		checkNextRunExpectation(e, r)
	case *scenarios.OpsExpectation:
		checkOpsExpectation(e, r)
	case *scenarios.ProgrammingExpectation:
		checkProgrammingExpectation(e, r)
	case *scenarios.SyncsExpectation:
		checkSyncsExpectation(e, r)
	case *scenarios.WritesExpectation:
		checkWritesExpectation(e, r)
	case Expectation:
		e.Check(r)
	default:
		panic(fmt.Sprintf("%s: %T has no replay (its package implements no replay.Expectation)", r.where(), e))
	}
}
