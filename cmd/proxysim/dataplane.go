package main

import (
	"github.com/proxysim/proxysim/netns"
	"github.com/proxysim/proxysim/scenarios/ipvsmode"
	"github.com/proxysim/proxysim/sim/ipvs"
)

// netnsDataplane replays IPVS scenarios on this kernel: a fresh node
// namespace per replay (with a client and backends around it when the
// scenario talks to the node as a client), removed afterwards. It is wired
// here, not in netns, so the kernel package never depends on the scenario
// format.
var netnsDataplane = ipvsmode.OnKernelWithClient(netns.OpenDataplane, openClient)

func openClient() (ipvs.Dataplane, ipvsmode.Client, func() error, error) {
	dp, topo, closeFn, err := netns.OpenTopology()
	if err != nil {
		return dp, nil, nil, err
	}
	return dp, topo, closeFn, nil
}
