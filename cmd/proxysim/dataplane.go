package main

import (
	"github.com/proxysim/proxysim/netns"
	"github.com/proxysim/proxysim/scenarios/ipvsmode"
	"github.com/proxysim/proxysim/sim/ipvs"
)

// netnsDataplane replays IPVS scenarios on this kernel: a fresh node
// namespace per replay, removed afterwards. It is wired here, not in netns,
// so the kernel package never depends on the scenario format.
var netnsDataplane = ipvsmode.OnKernel(func() (ipvs.Dataplane, func() error, error) {
	node, err := netns.NewNode()
	if err != nil {
		return ipvs.Dataplane{}, nil, err
	}
	return node.Dataplane, node.Close, nil
})
