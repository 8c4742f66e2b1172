package iptablesmode

import (
	"k8s.io/utils/clock"

	"fmt"
	"time"

	"github.com/proxysim/proxysim/fakes"
	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/bubble"
	"github.com/proxysim/proxysim/sim"
	"github.com/proxysim/proxysim/sim/iptables"
	"github.com/proxysim/proxysim/sim/proxy"
	"github.com/proxysim/proxysim/sim/route"
)

// OwnDataplane is the dataplane of a proxy under test in a bubble replay
// (bubble.Replay): the in-memory iptables (fakes.IPTables)
// behind sim/iptables.Dataplane — iptables-restore of whole payloads,
// iptables-save, and the two ensure calls — with the mode's restore
// failure injection (`fault: {restoreFailures: N}`), traced by the same
// tracer as kube-proxy's rules and saved for the same goldens.
func (Mode) OwnDataplane(s *scenarios.Scenario, _ clock.PassiveClock) (bubble.OwnDataplane, error) {
	set, ok := s.Proxy.Settings.(*Settings)
	if !ok {
		return nil, fmt.Errorf("%s: an iptables dataplane replays mode %s scenarios, not mode %q", s.File, Name, s.Proxy.Mode)
	}
	raw := fakes.NewIPTables()
	return &ownDataplane{Dataplane{name: "an iptables fake", raw: raw, faults: iptables.WithFaults(raw), nodeIPs: set.nodeIPs, recent: iptables.Recent{}}}, nil
}

type ownDataplane struct{ Dataplane }

var _ bubble.OwnDataplane = (*ownDataplane)(nil)

// NewBackend refuses: proxysim's proxier never programs this dataplane.
func (d *ownDataplane) NewBackend(*sim.World) (proxy.Backend, error) {
	return nil, fmt.Errorf("the dataplane of a proxy under test is not proxysim's to program")
}

func (d *ownDataplane) Route(pkt route.Packet, _ *time.Duration) (route.Shares, error) {
	sh, _, err := d.Dataplane.Route(pkt)
	return sh, err
}

func (d *ownDataplane) Attach(env *bubble.ProxyEnv, onWrite func()) {
	env.IPTables = &observed{Dataplane: d.faults, onWrite: onWrite}
}

func (d *ownDataplane) Keys() []string { return []string{"route", "iptables", "iptablesFile"} }

// TraceModel gives a comparison the tracer of proxysim's own iptables
// dataplane.
func (Mode) TraceModel(dp scenarios.Dataplane) bubble.RouteTracer {
	d, ok := dp.(*Dataplane)
	if !ok {
		return nil
	}
	return &ownDataplane{Dataplane: *d}
}

// observed reports every write made through it: restores and the ensure
// calls.
type observed struct {
	iptables.Dataplane
	onWrite func()
}

func (o *observed) Restore(payload string) error {
	defer o.onWrite()
	return o.Dataplane.Restore(payload)
}

func (o *observed) EnsureChain(table, chain string) error {
	defer o.onWrite()
	return o.Dataplane.EnsureChain(table, chain)
}

func (o *observed) EnsureRule(table, chain, rule string) error {
	defer o.onWrite()
	return o.Dataplane.EnsureRule(table, chain, rule)
}
