package replay

import "github.com/proxysim/proxysim/scenarios"

func doSyncCostStep(s *scenarios.SyncCostStep, r *Run) error {
	if s.SyncCost == nil {
		return nil
	}
	r.Step("syncCost", "", "")
	r.World().SetCost(s.SyncCost.Model())
	return nil
}
