package main

import (
	"k8s.io/utils/clock"
	"sigs.k8s.io/knftables"

	"github.com/proxysim/proxysim/netns"
	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/ipvsmode"
	"github.com/proxysim/proxysim/scenarios/nftablesmode"
)

// netnsDataplane replays scenarios on this kernel: a fresh node namespace
// per replay, removed afterwards, programmed by the scenario's mode. It is
// wired here, not in netns, so the kernel package never depends on the
// scenario format.
func netnsDataplane(s *scenarios.Scenario, clk clock.PassiveClock) (scenarios.Dataplane, error) {
	if s.Proxy.Mode == nftablesmode.Name {
		return nftablesNetns(s, clk)
	}
	return ipvsNetns(s, clk)
}

var ipvsNetns = ipvsmode.OnKernel(netns.OpenDataplane)

var nftablesNetns = nftablesmode.OnKernel(func() (knftables.Interface, string, func() error, error) {
	return netns.OpenNFTables()
})
