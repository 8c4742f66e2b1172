package nftablesmode

import (
	"fmt"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/sim"
	"github.com/proxysim/proxysim/sim/nftables"
)

// LightWork computes light nodes' nftables work (nftables.LightShared)
// with the configuration Fake gives a node's proxier.
func (Mode) LightWork(s *scenarios.Scenario) (scenarios.LightWorkers, error) {
	set, ok := s.Proxy.Settings.(*Settings)
	if !ok {
		return nil, fmt.Errorf("light nodes' nftables work needs mode %s's settings, not mode %q's", Name, s.Proxy.Mode)
	}
	return &lightWorkers{cfg: set.Config(), shared: map[bool]*nftables.LightShared{}}, nil
}

type lightWorkers struct {
	cfg    nftables.Config
	shared map[bool]*nftables.LightShared // by ignoreNodeHints
}

func (l *lightWorkers) For(_ scenarios.Proxy, ignoreNodeHints bool) (sim.LightWorkFor, error) {
	sh := l.shared[ignoreNodeHints]
	if sh == nil {
		var err error
		if sh, err = nftables.NewLightShared(nftables.LightConfig{Config: l.cfg, IgnoreNodeHints: ignoreNodeHints}); err != nil {
			return nil, err
		}
		l.shared[ignoreNodeHints] = sh
	}
	return func(node, zone string) (sim.LightWorker, error) { return sh.Worker(node, zone), nil }, nil
}

var _ scenarios.LightWorkMode = Mode{}
