package main

import (
	"k8s.io/utils/clock"

	"github.com/proxysim/proxysim/netns"
	"github.com/proxysim/proxysim/scenarios"
)

// netnsDataplane is a scenarios.DataplaneFactory for this kernel: a fresh
// node namespace per replay, removed afterwards. It is wired here, not in
// netns, so the kernel package never depends on the scenario format.
func netnsDataplane(*scenarios.Scenario, clock.PassiveClock) (*scenarios.Env, error) {
	node, err := netns.NewNode()
	if err != nil {
		return nil, err
	}
	return &scenarios.Env{Name: "netns, kernel " + node.Dataplane.KernelVersion, Dataplane: node.Dataplane, Close: node.Close}, nil
}
