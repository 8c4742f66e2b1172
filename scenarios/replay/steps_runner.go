package replay

import (
	"fmt"

	"github.com/proxysim/proxysim/scenarios"
)

func doRunStep(s *scenarios.RunStep, r *Run) error {
	if s.Run == nil || !*s.Run {
		return nil
	}
	r.Step("run", "", "Run()")
	r.World().RequestRun()
	return nil
}

func doRetryAfterStep(s *scenarios.RetryAfterStep, r *Run) error {
	if s.RetryAfter == nil {
		return nil
	}
	r.Step("retryAfter", "", fmt.Sprintf("RetryAfter(%v)", s.RetryAfter))
	return r.World().RetryAfter(s.RetryAfter.D())
}

func doStopStep(s *scenarios.StopStep, r *Run) error {
	if s.Stop == nil || !*s.Stop {
		return nil
	}
	r.Step("stop", "", "")
	r.World().StopRunner()
	return nil
}

func doSyncsFault(f *scenarios.SyncsFault, r *Run) error {
	if f.Syncs == nil || *f.Syncs < 1 {
		return nil
	}
	r.Step("fault", "", fmt.Sprintf("next %d syncs fail", *f.Syncs))
	r.World().FailSyncs(*f.Syncs)
	return nil
}
