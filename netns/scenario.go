package netns

import (
	"github.com/proxysim/proxysim/scenarios"
)

// ScenarioDataplane is a scenarios.DataplaneFactory for the real kernel: a
// fresh node namespace per replay, removed afterwards. Scenarios with client
// connections need real time and stay on the fake dataplane.
func ScenarioDataplane(s *scenarios.Scenario) (*scenarios.Env, error) {
	node, err := NewNode()
	if err != nil {
		return nil, err
	}
	return &scenarios.Env{Name: "netns, kernel " + node.Dataplane.KernelVersion, Dataplane: node.Dataplane, Close: node.Close}, nil
}
