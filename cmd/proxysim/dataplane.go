package main

import (
	"github.com/proxysim/proxysim/netns"
	"github.com/proxysim/proxysim/scenarios/ipvsmode"
)

// netnsDataplane replays IPVS scenarios on this kernel: a fresh node
// namespace per replay, removed afterwards. It is wired here, not in netns,
// so the kernel package never depends on the scenario format.
var netnsDataplane = ipvsmode.OnKernel(netns.OpenDataplane)
