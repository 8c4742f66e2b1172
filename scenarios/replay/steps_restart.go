package replay

import "github.com/proxysim/proxysim/scenarios"

func doRestartStep(rs *scenarios.RestartStep, r *Run) error {
	if !rs.Restart {
		return nil
	}
	r.Step("restart", "", "")
	return r.World().Restart()
}
