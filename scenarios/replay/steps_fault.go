package replay

import (
	"fmt"

	"github.com/proxysim/proxysim/scenarios"
)

func doFaultStep(fs *scenarios.FaultStep, r *Run) error {
	f := fs.Fault
	if f == nil {
		return nil
	}
	for _, p := range f.Parts {
		if err := do(p, r); err != nil {
			return err
		}
	}
	if d := f.WatchBreak; d != nil {
		r.Step("fault", "", fmt.Sprintf("watch breaks for %v", d))
		r.World().BreakWatch(d.D())
	}
	return nil
}
