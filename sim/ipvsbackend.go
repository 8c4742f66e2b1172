package sim

import (
	"github.com/proxysim/proxysim/sim/ipvs"
	"github.com/proxysim/proxysim/sim/proxy"
	"github.com/proxysim/proxysim/sim/trace"
)

// IPVSBackend returns a Config.NewBackend that programs dp with the IPVS
// proxier, on the world's clock, tracing every dataplane operation. Each
// restart builds a new proxier over the same dataplane; World.Backend
// returns the current one, a *ipvs.Proxier.
func IPVSBackend(cfg ipvs.Config, dp ipvs.Dataplane) func(*World) (proxy.Backend, error) {
	return func(w *World) (proxy.Backend, error) {
		p, err := ipvs.New(cfg, dp, w.Clock, func(op ipvs.Op) {
			e := trace.Event{Kind: trace.Dataplane, Op: op.Name, Detail: op.Detail}
			if op.Err != nil {
				e.Err = op.Err.Error()
			}
			w.Trace.Add(e)
		})
		if err != nil {
			return nil, err
		}
		return p, nil
	}
}
