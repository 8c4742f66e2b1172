package scenarios

import (
	"fmt"

	"github.com/proxysim/proxysim/sim"
)

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

// lightWorkFor gives a light node whose sync cost reads the sync's work
// what computes that work, or says why it cannot.
func (r *replayer) lightWorkFor(n ClusterNode, ignoreNodeHints bool) (sim.LightWorkFor, error) {
	if n.Proxy.Mode != r.s.Proxy.Mode {
		return nil, fmt.Errorf("%s: node %s: a cost of the sync's work (syncCost.profile) on a light node of mode %s needs the scenario's mode (%s): materialise its pool or use the scenario's mode", r.s.File, n.Name, n.Proxy.Mode, r.s.Proxy.Mode)
	}
	mode, ok := LookupMode(n.Proxy.Mode)
	if !ok {
		return nil, fmt.Errorf("%s: node %s: mode %q is not registered", r.s.File, n.Name, n.Proxy.Mode)
	}
	lm, ok := mode.(LightWorkMode)
	if !ok {
		return nil, fmt.Errorf("%s: node %s: a light node of mode %s has no sync work to cost (syncCost.profile): only iptables computes it (docs/cluster.md); materialise its pool (materialize: true) or use a cost without a profile", r.s.File, n.Name, n.Proxy.Mode)
	}
	if r.lightWorkers == nil {
		lw, err := lm.LightWork(r.s)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.s.File, err)
		}
		r.lightWorkers = lw
	}
	f, err := r.lightWorkers.For(n.Proxy, ignoreNodeHints)
	if err != nil {
		return nil, fmt.Errorf("%s: node %s: %w", r.s.File, n.Name, err)
	}
	return f, nil
}
