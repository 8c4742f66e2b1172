// Package iptablesmode is the iptables proxy mode of the scenario format:
// kube-proxy v1.36's iptables proxier (sim/iptables) over the in-memory
// iptables of fakes/. Its proxy settings (nodeIPs, clusterCIDR,
// masqueradeAll), its golden (`iptables:` / `iptablesFile:`, iptables-save
// text), its `route` expectation (where a new connection goes, with what
// exact share, given the clients' earlier connections), its
// `iptablesMetrics` expectation, its `connection` step (a client's
// connection went to an endpoint: affinity history), its operator's
// `iptablesFlush` step (the tables emptied behind kube-proxy's back, which
// its canary monitor answers), and its fault (`restoreFailures`).
// Importing it registers the mode.
//
// A failed restore fails the sync: that is kube-proxy's iptables proxier,
// so proxy.syncFailsOnError changes nothing here. It must not import netns.
package iptablesmode

import (
	"fmt"
	"net"
	"time"

	"k8s.io/utils/clock"

	"github.com/proxysim/proxysim/fakes"
	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/replay"
	"github.com/proxysim/proxysim/sim"
	"github.com/proxysim/proxysim/sim/iptables"
	"github.com/proxysim/proxysim/sim/proxy"
	"github.com/proxysim/proxysim/sim/runner"
	"github.com/proxysim/proxysim/sim/trace"
)

// Name is the mode's name in proxy.mode.
const Name = "iptables"

func init() { scenarios.RegisterMode(Mode{}) }

// Mode is the iptables mode.
type Mode struct{}

func (Mode) Name() string { return Name }

func (Mode) NewSettings() scenarios.Settings { return &Settings{} }

func (Mode) Actions() []func() scenarios.Action {
	return []func() scenarios.Action{
		func() scenarios.Action { return &connectionStep{} },
		func() scenarios.Action { return &flushStep{} },
	}
}

func (Mode) Faults() []func() scenarios.Action {
	return []func() scenarios.Action{func() scenarios.Action { return &restoreFault{} }}
}

func (Mode) Expectations() []func() scenarios.Expectation {
	return []func() scenarios.Expectation{
		func() scenarios.Expectation { return &tableExpect{} },
		routeExpectation,
		func() scenarios.Expectation { return &metricsExpect{} },
	}
}

// FullSyncPeriod is kube-proxy's proxyutil.FullSyncPeriod: the iptables
// proxier's runner has it as its maxInterval, in both generations.
const FullSyncPeriod = iptables.FullSyncPeriod

// ShapeRunner gives the runner kube-proxy's iptables proxier builds: a
// periodic sync every FullSyncPeriod, and a failed sync retried after
// syncPeriod (RetryAfter(syncPeriod) up to v1.33, the runner's
// retryInterval from v1.34; pkg/proxy/iptables/proxier.go NewProxier and
// syncProxyRules).
func (Mode) ShapeRunner(p scenarios.Proxy, cfg runner.Config) runner.Config {
	cfg.MaxInterval = FullSyncPeriod
	cfg.RetryInterval = syncPeriodOf(p)
	return cfg
}

// syncPeriodOf is proxy.syncPeriod, or kube-proxy's default.
func syncPeriodOf(p scenarios.Proxy) time.Duration {
	if p.SyncPeriod != nil {
		return p.SyncPeriod.D()
	}
	return 30 * time.Second
}

// Fake is fakes.IPTables behind restore-failure injection.
func (Mode) Fake(s *scenarios.Scenario, clk clock.PassiveClock) (scenarios.Dataplane, error) {
	set, ok := s.Proxy.Settings.(*Settings)
	if !ok {
		return nil, fmt.Errorf("%s: an iptables dataplane replays mode %s scenarios, not mode %q", s.File, Name, s.Proxy.Mode)
	}
	raw := fakes.NewIPTables()
	cfg := iptables.Config{ClusterCIDR: set.ClusterCIDR, MasqueradeAll: set.MasqueradeAll, SyncPeriod: syncPeriodOf(s.Proxy)}
	for _, ip := range set.nodeIPs {
		if ip.To4() != nil {
			cfg.NodeIP = ip
			break
		}
	}
	return &Dataplane{
		name: "fake", cfg: cfg, clk: clk,
		raw: raw, faults: iptables.WithFaults(raw), nodeIPs: set.nodeIPs,
		recent: iptables.Recent{},
	}, nil
}

// Settings are the iptables proxy's own fields.
type Settings struct {
	// NodeIPs are the node's addresses: a route from one of them starts on
	// the node (nat OUTPUT), and they are `addrtype LOCAL`.
	NodeIPs []string `yaml:"nodeIPs"`
	// ClusterCIDR is the pod CIDR of kube-proxy's ClusterCIDR local-traffic
	// detector; without it kube-proxy writes no off-cluster masquerade
	// rules.
	ClusterCIDR   string `yaml:"clusterCIDR"`
	MasqueradeAll bool   `yaml:"masqueradeAll"`
	Src           scenarios.Src

	nodeIPs []net.IP
}

func (p *Settings) Validate(v *scenarios.Validator) {
	p.nodeIPs = nil
	for i, s := range p.NodeIPs {
		ip := net.ParseIP(s)
		if ip == nil {
			at := p.Src.At("nodeIPs")
			v.Errorf(scenarios.Pos{Line: at.Line, Column: at.Column, Path: fmt.Sprintf("%s[%d]", at.Path, i)}, "%q is not an IP address", s)
			continue
		}
		p.nodeIPs = append(p.nodeIPs, ip)
	}
	if p.ClusterCIDR != "" {
		if _, _, err := net.ParseCIDR(p.ClusterCIDR); err != nil {
			v.Errorf(p.Src.At("clusterCIDR"), "%q is not a CIDR", p.ClusterCIDR)
		}
	}
}

// Dataplane is one replay's iptables: the proxier's configuration, the
// fake it programs (with injectable restore failures) and the node's
// addresses for routes.
type Dataplane struct {
	name    string
	cfg     iptables.Config
	clk     clock.PassiveClock
	raw     *fakes.IPTables
	faults  *iptables.Faults
	nodeIPs []net.IP
	kernel  Kernel // nil on the fake; see OnKernel
	// recent is the kernel's `recent` lists, filled by connection steps.
	recent iptables.Recent
	// proxier is the one built at start or at the last restart: its
	// metrics are the current ones (a restart resets counters).
	proxier *iptables.Proxier
}

var _ scenarios.Dataplane = (*Dataplane)(nil)

func (d *Dataplane) Name() string { return d.name }

// NewBackend builds an iptables proxier over the dataplane, at start and
// at every restart, with its canary monitor (iptables.Monitor) on the
// world's clock: a flush of the tables (the iptablesFlush step) is found
// at the monitor's next look and answered with a direct full sync.
func (d *Dataplane) NewBackend(w *sim.World) (proxy.Backend, error) {
	d.proxier = iptables.New(d.cfg, d.faults, w.Clock, w.TraceDataplane)
	d.proxier.StartMonitor(w.Clock, func() { w.SyncNow("canary") }, func(detail string, err error) {
		e := trace.Event{Kind: trace.Note, Detail: detail}
		if err != nil {
			e.Err = err.Error()
		}
		w.Trace.Add(e)
	})
	return d.proxier, nil
}

// Snapshot is iptables-save of the filter and nat tables.
func (d *Dataplane) Snapshot() (string, error) {
	if d.kernel != nil {
		return d.kernelSnapshot()
	}
	return d.raw.SaveAll(), nil
}

func (d *Dataplane) Close() error {
	if d.kernel != nil {
		return d.kernel.Close()
	}
	return nil
}

// Route traces a new connection through the rules the fake holds now,
// with the clients' history of earlier connection steps; it also returns
// the recent lists a connection ending at each outcome sets. On a kernel
// the prediction is then checked with real connections.
func (d *Dataplane) Route(pkt iptables.Packet) (iptables.Shares, map[string][]string, error) {
	if d.kernel != nil {
		return d.kernelRoute(pkt)
	}
	return iptables.RouteWith(d.raw.Ruleset(), d.nodeIPs, pkt, d.history())
}

func (d *Dataplane) history() iptables.History {
	var now time.Time
	if d.clk != nil {
		now = d.clk.Now()
	}
	return iptables.History{Recent: d.recent, Now: now}
}

func dataplaneOf(r *replay.Run) *Dataplane {
	switch d := r.Dataplane().(type) {
	case *Dataplane:
		return d
	case *ownDataplane: // a proxy under test's (own.go)
		return &d.Dataplane
	}
	return nil
}

// RouteMasquerade traces a new connection through the rules the fake holds
// now, as a client with no history, and tells for each outcome the part of
// its share that leaves masqueraded (iptables.RouteMasquerade). It reads
// the in-memory rules only: on a kernel, Route checks the shares.
func (d *Dataplane) RouteMasquerade(pkt iptables.Packet) (iptables.Shares, iptables.Shares, error) {
	return iptables.RouteMasquerade(d.raw.Ruleset(), d.nodeIPs, pkt)
}

// FrozenTracer is RouteMasquerade for many connections through the rules
// as they are now, indexed once (iptables.Tracer): the rules must not
// change while it is used.
func (d *Dataplane) FrozenTracer() (func(iptables.Packet) (iptables.Shares, iptables.Shares, error), error) {
	return iptables.NewTracer(d.raw.Ruleset(), d.nodeIPs).RouteMasquerade, nil
}
