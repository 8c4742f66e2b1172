package iptablesmode

import (
	"fmt"
	"time"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/sim"
	"github.com/proxysim/proxysim/sim/iptables"
)

// LightWork computes light nodes' iptables work (iptables.LightShared) with
// the configuration Fake gives a node's proxier, its canary monitor
// included (NewBackend starts it).
func (Mode) LightWork(s *scenarios.Scenario) (scenarios.LightWorkers, error) {
	set, ok := s.Proxy.Settings.(*Settings)
	if !ok {
		return nil, fmt.Errorf("light nodes' iptables work needs mode %s's settings, not mode %q's", Name, s.Proxy.Mode)
	}
	cfg := iptables.Config{ClusterCIDR: set.ClusterCIDR, MasqueradeAll: set.MasqueradeAll}
	for _, ip := range set.nodeIPs {
		if ip.To4() != nil {
			cfg.NodeIP = ip
			break
		}
	}
	return &lightWorkers{cfg: cfg, shared: map[lightKey]*iptables.LightShared{}}, nil
}

type lightWorkers struct {
	cfg    iptables.Config
	shared map[lightKey]*iptables.LightShared
}

type lightKey struct {
	syncPeriod      time.Duration
	ignoreNodeHints bool
}

func (l *lightWorkers) For(p scenarios.Proxy, ignoreNodeHints bool) (sim.LightWorkFor, error) {
	k := lightKey{syncPeriodOf(p), ignoreNodeHints}
	sh := l.shared[k]
	if sh == nil {
		cfg := l.cfg
		cfg.SyncPeriod = k.syncPeriod
		var err error
		if sh, err = iptables.NewLightShared(iptables.LightConfig{Config: cfg, Canary: true, IgnoreNodeHints: ignoreNodeHints}); err != nil {
			return nil, err
		}
		l.shared[k] = sh
	}
	return func(node, zone string) (sim.LightWorker, error) { return sh.Worker(node, zone), nil }, nil
}

var _ scenarios.LightWorkMode = Mode{}
