package nftablesmode

import (
	"k8s.io/utils/clock"

	"context"
	"fmt"

	"sigs.k8s.io/knftables"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/bubble"
	"github.com/proxysim/proxysim/sim"
	"github.com/proxysim/proxysim/sim/nftables"
	"github.com/proxysim/proxysim/sim/proxy"
)

// OwnDataplane is the dataplane of a proxy under test in a bubble replay
// (bubble.Replay): a knftables.Fake of family ip and table
// "kube-proxy", behind the mode's transaction-failure injection (so
// `fault: {transactionFailures: N}` fails the proxy's next N
// transactions), traced by the same tracer as kube-proxy's table and
// dumped for the same goldens.
func (Mode) OwnDataplane(s *scenarios.Scenario, _ clock.PassiveClock) (bubble.OwnDataplane, error) {
	set, ok := s.Proxy.Settings.(*Settings)
	if !ok {
		return nil, fmt.Errorf("%s: an nftables dataplane replays mode %s scenarios, not mode %q", s.File, Name, s.Proxy.Mode)
	}
	fake := knftables.NewFake(knftables.IPv4Family, nftables.Table)
	return &ownDataplane{Dataplane{name: "a knftables fake", cfg: set.Config(), fake: fake, faults: nftables.WithFaults(fake), nodeIPs: set.nodeIPs}}, nil
}

type ownDataplane struct{ Dataplane }

var _ bubble.OwnDataplane = (*ownDataplane)(nil)

// NewBackend refuses: proxysim's proxier never programs this dataplane.
func (d *ownDataplane) NewBackend(*sim.World) (proxy.Backend, error) {
	return nil, fmt.Errorf("the dataplane of a proxy under test is not proxysim's to program")
}

func (d *ownDataplane) Attach(env *bubble.ProxyEnv, onWrite func()) {
	env.NFTables = &observed{Interface: d.faults, onWrite: onWrite}
}

func (d *ownDataplane) Keys() []string { return []string{"route", "nftables", "nftablesFile"} }

// observed reports every transaction run through it.
type observed struct {
	knftables.Interface
	onWrite func()
}

func (o *observed) Run(ctx context.Context, tx *knftables.Transaction) error {
	err := o.Interface.Run(ctx, tx)
	o.onWrite()
	return err
}
