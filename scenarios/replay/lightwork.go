package replay

import (
	"fmt"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/sim"
)

// lightWorkFor gives a light node whose sync cost reads the sync's work
// what computes that work, or says why it cannot.
func (r *replayer) lightWorkFor(n scenarios.ClusterNode, ignoreNodeHints bool) (sim.LightWorkFor, error) {
	if n.Proxy.Mode != r.s.Proxy.Mode {
		return nil, fmt.Errorf("%s: node %s: a cost of the sync's work (syncCost.profile) on a light node of mode %s needs the scenario's mode (%s): materialise its pool or use the scenario's mode", r.s.File, n.Name, n.Proxy.Mode, r.s.Proxy.Mode)
	}
	mode, ok := scenarios.LookupMode(n.Proxy.Mode)
	if !ok {
		return nil, fmt.Errorf("%s: node %s: mode %q is not registered", r.s.File, n.Name, n.Proxy.Mode)
	}
	lm, ok := mode.(scenarios.LightWorkMode)
	if !ok {
		return nil, fmt.Errorf("%s: node %s: a light node of mode %s has no sync work to cost (syncCost.profile): only iptables and nftables compute it (docs/cluster.md); materialise its pool (materialize: true) or use a cost without a profile", r.s.File, n.Name, n.Proxy.Mode)
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
