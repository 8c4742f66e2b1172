package ipvs

import (
	"github.com/proxysim/proxysim/sim"
	"github.com/proxysim/proxysim/sim/proxy"
)

// Backend returns a sim.Config.NewBackend that programs dp with the IPVS
// proxier, on the world's clock, tracing every dataplane operation. Each
// restart builds a new proxier over the same dataplane; World.Backend
// returns the current one, a *Proxier. A Config without a Family gets the
// world's. The mode depends on the world, never the other way round.
func Backend(cfg Config, dp Dataplane) func(*sim.World) (proxy.Backend, error) {
	return func(w *sim.World) (proxy.Backend, error) {
		cfg := cfg
		if cfg.Family == "" {
			cfg.Family = w.Config().Family
		}
		p, err := New(cfg, dp, w.Clock, func(op Op) { w.TraceDataplane(op.Name, op.Detail, op.Err) })
		if err != nil {
			return nil, err
		}
		return p, nil
	}
}
