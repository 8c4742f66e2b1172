package routeexpect

import "github.com/proxysim/proxysim/sim/route"

// Probe is the connection the expectation traces (its first, with again),
// once validated: what a comparison of two dataplanes traces too (see
// scenarios/bubble).
func (e *Expect) Probe() (route.Packet, bool) {
	if e.Route == nil || e.Route.pkt.Dst == nil {
		return route.Packet{}, false
	}
	return e.Route.pkt, true
}
