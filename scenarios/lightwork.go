package scenarios

import "github.com/proxysim/proxysim/sim"

// LightWorkMode is a Mode that computes its light nodes' sync work
// (sim.LightWorker), so that a cost of the sync's work (a cost profile)
// can price a light node's syncs exactly as its materialised self's. See
// docs/cluster.md, "A light node's work".
type LightWorkMode interface {
	Mode
	// LightWork returns what builds light nodes' workers for scenario s,
	// shared by the nodes of one replay.
	LightWork(s *Scenario) (LightWorkers, error)
}

// LightWorkers builds light nodes' LightWorkers: for a node with proxy
// settings p (its pool's) whose endpoint conversion ignores node hints or
// not.
type LightWorkers interface {
	For(p Proxy, ignoreNodeHints bool) (sim.LightWorkFor, error)
}
