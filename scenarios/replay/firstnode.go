package replay

import (
	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/sim"
	"github.com/proxysim/proxysim/sim/proxy"
	"github.com/proxysim/proxysim/sim/runner"
)

// The first node of a cluster is the world's own proxy. It programs the
// replay's dataplane only when something looks at it; otherwise it runs
// light, its syncs' work worked out as a light node's (sim.LightBackend).
// Its syncs, samples and pod latencies are the same either way
// (TestClusterFirstNodeLight); what it lacks is the dataplane itself:
// no rules, no dataplane events in the trace, no dataplane metrics.

// firstNodeBackend returns the world's backend for a cluster's first node
// that nothing looks at (looksAtDataplane), or nil when its work needs its
// proxier: a cost of the work in a mode that works out no light node's
// (IPVS).
func (r *replayer) firstNodeBackend() (func(*sim.World) (proxy.Backend, error), error) {
	s := r.s
	first := s.Nodes()[0]
	if first.Proxy.SyncCost.Model().Work == nil {
		return sim.LightBackend(nil), nil
	}
	mode, ok := scenarios.LookupMode(first.Proxy.Mode)
	if !ok {
		return nil, nil
	}
	if _, ok := mode.(scenarios.LightWorkMode); !ok {
		return nil, nil // its work needs its proxier (IPVS)
	}
	lw, err := r.lightWorkFor(first, RunnerConfig(first.Proxy).Generation == runner.Burst)
	if err != nil {
		return nil, err
	}
	return sim.LightBackend(lw), nil
}

// looksAtDataplane says whether anything in the replay may read or write
// the first node's dataplane, which is then materialised: always but in a
// cluster; when its pool or the caller asks (materialize: true,
// Options.MaterializeFirst); when the caller brings a dataplane, reads
// the trace or the world as the replay goes, takes metrics at an instant
// or rewrites goldens; or when a step or expectation may look
// (scenarios.DataplaneBlind).
func looksAtDataplane(s *scenarios.Scenario, opts Options) bool {
	nodes := s.Nodes()
	if len(nodes) < 2 || nodes[0].Materialize || opts.MaterializeFirst {
		return true
	}
	if opts.Dataplane != nil || opts.Follow != nil || opts.TraceStream != nil || opts.World != nil ||
		opts.Update || opts.MetricsAt != nil {
		return true
	}
	for _, st := range s.Timeline {
		for _, a := range st.Actions {
			if _, ok := a.(scenarios.DataplaneBlind); !ok {
				return true
			}
		}
		if st.Expect != nil {
			for _, e := range st.Expect.Checks {
				if _, ok := e.(scenarios.DataplaneBlind); !ok {
					return true
				}
			}
		}
	}
	return false
}
