package replay

import (
	"fmt"

	"github.com/proxysim/proxysim/scenarios"
)

func checkNextRunExpectation(e *scenarios.NextRunExpectation, r *Run) {
	n := e.NextRun
	if n == nil {
		return
	}
	at, why, ok := r.World().NextRun()
	got := "none"
	if ok {
		got = fmt.Sprintf("%v (%s)", at, why)
	}
	switch {
	case n.None && ok:
		r.Fail(n.Src.At("none"), "nextRun.none", "no next run", got)
	case n.None:
	case !ok:
		r.Fail(n.Src.At("at"), "nextRun.at", n.At.String(), got)
	case at != n.At.D():
		r.Fail(n.Src.At("at"), "nextRun.at", n.At.String(), got)
	case n.Reason != "" && string(why) != n.Reason:
		r.Fail(n.Src.At("reason"), "nextRun.reason", n.Reason, got)
	}
}
