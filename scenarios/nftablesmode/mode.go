// Package nftablesmode is the nftables proxy mode of the scenario format:
// kube-proxy v1.36's nftables proxier (sim/nftables) over a
// knftables.Fake. Its proxy settings (nodeIPs, nodePortAddresses,
// clusterCIDR, masqueradeAll), its golden (`nftables:` /
// `nftablesFile:`, the Fake's dump), its `route` expectation (the tracer
// over the table, with exact shares and second connections), its metrics
// expectation (`nftablesMetrics`), its fault (`transactionFailures`), and
// OnKernel, the real-kernel binding that cmd/ and e2e/ wire to netns.
// Importing it registers the mode.
//
// A failed transaction fails the sync, as in kube-proxy, so
// proxy.syncFailsOnError changes nothing here. It must not import netns.
package nftablesmode

import (
	"fmt"
	"net"
	"time"

	"k8s.io/utils/clock"
	"sigs.k8s.io/knftables"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/replay"
	"github.com/proxysim/proxysim/sim"
	"github.com/proxysim/proxysim/sim/nftables"
	"github.com/proxysim/proxysim/sim/proxy"
	"github.com/proxysim/proxysim/sim/route"
	"github.com/proxysim/proxysim/sim/runner"
)

// Name is the mode's name in proxy.mode.
const Name = "nftables"

func init() { scenarios.RegisterMode(Mode{}) }

// Mode is the nftables mode.
type Mode struct{}

func (Mode) Name() string { return Name }

func (Mode) NewSettings() scenarios.Settings { return &Settings{} }

func (Mode) Actions() []func() scenarios.Action { return nil }

func (Mode) Faults() []func() scenarios.Action {
	return []func() scenarios.Action{func() scenarios.Action { return &transactionFault{} }}
}

func (Mode) Expectations() []func() scenarios.Expectation {
	return []func() scenarios.Expectation{
		func() scenarios.Expectation { return &tableExpect{} },
		func() scenarios.Expectation { return &metricsExpect{} },
		routeExpectation,
	}
}

// ShapeRunner gives the runner kube-proxy's nftables proxier builds
// (pkg/proxy/nftables/proxier.go NewProxier): minSyncPeriod, a failed
// sync retried after syncPeriod, and a periodic sync every
// FullSyncPeriod (1 h), in both runner generations.
func (Mode) ShapeRunner(p scenarios.Proxy, cfg runner.Config) runner.Config {
	cfg.MaxInterval = nftables.FullSyncPeriod
	cfg.RetryInterval = syncPeriodOf(p)
	return cfg
}

func syncPeriodOf(p scenarios.Proxy) time.Duration {
	if p.SyncPeriod != nil {
		return p.SyncPeriod.D()
	}
	return 30 * time.Second
}

// Settings are the nftables proxy's own fields.
type Settings struct {
	// NodeIPs are the node's addresses: `fib ... type local` for the
	// tracer, and a route from one of them starts on the node (output
	// hook).
	NodeIPs []string `yaml:"nodeIPs"`
	// NodePortAddresses is kube-proxy's --nodeport-addresses: unset, node
	// ports answer on every local address (`fib daddr type local`);
	// "primary", only on the first of nodeIPs, kube-proxy's nodeIP (the
	// nodeport-ips set).
	NodePortAddresses string `yaml:"nodePortAddresses"`
	// ClusterCIDR is the pod CIDR of the ClusterCIDR local-traffic
	// detector; without it no off-cluster masquerade rule is written.
	ClusterCIDR   string `yaml:"clusterCIDR"`
	MasqueradeAll bool   `yaml:"masqueradeAll"`
	// ServiceCIDRs are the ranges of the cluster's ServiceCIDR objects
	// (networking.k8s.io/v1; kube-apiserver makes the default one from
	// --service-cluster-ip-range) that kube-proxy watches: with them,
	// traffic to an unallocated ClusterIP is dropped (kubernetes
	// pkg/proxy/nftables/proxier.go, OnServiceCIDRsChanged and the
	// cluster-ips-check chain).
	ServiceCIDRs []string `yaml:"serviceCIDRs"`
	Src          scenarios.Src

	nodeIPs []net.IP
}

func (p *Settings) Validate(v *scenarios.Validator) {
	p.nodeIPs = nil
	for i, s := range p.NodeIPs {
		ip := net.ParseIP(s)
		if ip == nil || ip.To4() == nil {
			at := p.Src.At("nodeIPs")
			v.Errorf(scenarios.Pos{Line: at.Line, Column: at.Column, Path: fmt.Sprintf("%s[%d]", at.Path, i)}, "%q is not an IPv4 address", s)
			continue
		}
		p.nodeIPs = append(p.nodeIPs, ip)
	}
	switch p.NodePortAddresses {
	case "":
	case "primary":
		if len(p.NodeIPs) == 0 {
			v.Errorf(p.Src.At("nodePortAddresses"), "primary needs nodeIPs")
		}
	default:
		v.Errorf(p.Src.At("nodePortAddresses"), "want primary, or leave it out for every local address; got %q", p.NodePortAddresses)
	}
	if p.ClusterCIDR != "" {
		if _, _, err := net.ParseCIDR(p.ClusterCIDR); err != nil {
			v.Errorf(p.Src.At("clusterCIDR"), "%q is not a CIDR", p.ClusterCIDR)
		}
	}
	for i, c := range p.ServiceCIDRs {
		if ip, _, err := net.ParseCIDR(c); err != nil || ip.To4() == nil {
			at := p.Src.At("serviceCIDRs")
			v.Errorf(scenarios.Pos{Line: at.Line, Column: at.Column, Path: fmt.Sprintf("%s[%d]", at.Path, i)}, "%q is not an IPv4 CIDR", c)
		}
	}
}

// Config is the proxier configuration the settings describe.
func (p *Settings) Config() nftables.Config {
	c := nftables.Config{ClusterCIDR: p.ClusterCIDR, MasqueradeAll: p.MasqueradeAll, ServiceCIDRs: p.ServiceCIDRs}
	if p.NodePortAddresses == "primary" && len(p.nodeIPs) > 0 {
		// kube-proxy resolves primary to its nodeIP alone, one per family
		// (pkg/proxy/util NewNodePortAddresses), not every node address.
		c.NodePortIPs = p.nodeIPs[:1]
	}
	if len(p.nodeIPs) > 0 {
		c.NodeIP = p.nodeIPs[0] // kube-proxy's nodeIP: the primary address
	}
	return c
}

// Fake is a knftables.Fake behind transaction-failure injection, taking
// the proxier's set and map elements through an index
// (nftables.IndexedFake: the same table, without the Fake's linear
// element lookup).
func (Mode) Fake(s *scenarios.Scenario, _ clock.PassiveClock) (scenarios.Dataplane, error) {
	set, ok := s.Proxy.Settings.(*Settings)
	if !ok {
		return nil, fmt.Errorf("%s: an nftables dataplane replays mode %s scenarios, not mode %q", s.File, Name, s.Proxy.Mode)
	}
	fake := nftables.NewIndexedFake(knftables.IPv4Family, nftables.Table)
	return &Dataplane{name: "fake", cfg: set.Config(), fake: fake.Fake, faults: nftables.WithFaults(fake), nodeIPs: set.nodeIPs}, nil
}

// Kernel is a real kube-proxy table a replay programs: a network
// namespace's, say (netns.NFTablesDataplane), with pods around its node.
type Kernel interface {
	knftables.Interface
	// Name says which kernel and nft ("netns, kernel 6.1.0, nftables
	// v1.0.6").
	Name() string
	// Verify reports how the kernel's table differs, by meaning, from dump
	// (knftables.Fake's Dump of the table it should hold).
	Verify(dump string) error
	// CheckRoute sends real connections as pkt describes, each trial run
	// as the probe says, and reports an error when where they went
	// disagrees with the predicted shares.
	CheckRoute(pkt route.Packet, predicted route.Shares, p nftables.Probe) error
	Close() error
}

// OnKernel binds the mode to a real kernel: open returns a fresh one for a
// replay, given the scenario's node IPs. The proxier programs the kernel
// through an nftables.Mirror, whose fake runs every transaction the kernel
// accepted (a transaction the kernel refuses fails the sync, as it would
// fail kube-proxy's). Every snapshot and every route first checks that
// the kernel's table means what the fake's does (Kernel.Verify); then a
// golden is the fake's dump, and a route is the tracer's shares over the
// fake's table, checked against real connections on the kernel. The
// caller wires open to netns, which knows nothing of scenarios.
func OnKernel(open func(nodeIPs []string) (Kernel, error)) scenarios.DataplaneFactory {
	return func(s *scenarios.Scenario, _ clock.PassiveClock) (scenarios.Dataplane, error) {
		set, ok := s.Proxy.Settings.(*Settings)
		if !ok {
			return nil, fmt.Errorf("%s: an nftables dataplane replays mode %s scenarios, not mode %q", s.File, Name, s.Proxy.Mode)
		}
		k, err := open(set.NodeIPs)
		if err != nil {
			return nil, err
		}
		m := &nftables.Mirror{Real: k, Shadow: knftables.NewFake(knftables.IPv4Family, nftables.Table)}
		return &Dataplane{name: k.Name(), cfg: set.Config(), fake: m.Shadow, kernel: k,
			faults: nftables.WithFaults(m), nodeIPs: set.nodeIPs}, nil
	}
}

// Dataplane is one replay's nftables: the proxier's configuration, the
// Fake it programs (with injectable failures), the proxier of the current
// run (for its metrics) and the node's addresses for routes.
type Dataplane struct {
	name    string
	cfg     nftables.Config
	fake    *knftables.Fake
	faults  *nftables.Faults
	nodeIPs []net.IP
	kernel  Kernel // on a real kernel; see OnKernel
	proxier *nftables.Proxier
	// before sums the metrics of proxiers replaced by restarts: kube-proxy's
	// counters start again at 0 in a new process, but a scenario's
	// expectation reads the whole story.
	before nftables.Metrics
}

var _ scenarios.Dataplane = (*Dataplane)(nil)

func (d *Dataplane) Name() string { return d.name }

// NewBackend builds an nftables proxier over the Fake, at start and at
// every restart.
func (d *Dataplane) NewBackend(w *sim.World) (proxy.Backend, error) {
	return nftables.Backend(d.cfg, d.faults, func(p *nftables.Proxier) {
		if d.proxier != nil {
			d.before = add(d.before, d.proxier.Metrics())
		}
		d.proxier = p
	})(w)
}

// Metrics are the metrics of every proxier of the replay so far.
func (d *Dataplane) Metrics() nftables.Metrics {
	m := d.before
	if d.proxier != nil {
		m = add(m, d.proxier.Metrics())
		m.NoLocalEndpointsInternal = d.proxier.Metrics().NoLocalEndpointsInternal
		m.NoLocalEndpointsExternal = d.proxier.Metrics().NoLocalEndpointsExternal
	}
	return m
}

func add(a, b nftables.Metrics) nftables.Metrics {
	a.SyncFailures += b.SyncFailures
	a.CleanupFailures += b.CleanupFailures
	a.FullSyncs += b.FullSyncs
	a.PartialSyncs += b.PartialSyncs
	return a
}

// Snapshot is the Fake's dump with each set's and map's elements sorted;
// on a real kernel, only once the kernel's table agrees with it.
func (d *Dataplane) Snapshot() (string, error) {
	dump := d.fake.Dump()
	if d.kernel != nil {
		if err := d.kernel.Verify(dump); err != nil {
			return "", err
		}
	}
	return nftables.SortElements(dump), nil
}

func (d *Dataplane) Close() error {
	if d.kernel != nil {
		return d.kernel.Close()
	}
	return nil
}

// Route traces connections through the table the Fake holds now. On a
// kernel, the kernel's table is first shown to mean the same, and the
// traced shares are then checked with real connections.
func (d *Dataplane) Route(pkt route.Packet, again *time.Duration) (route.Shares, error) {
	d.fake.RLock()
	shares, err := d.trace(pkt, again)
	probe := nftables.ProbeFor(d.fake.Table, again)
	d.fake.RUnlock()
	if d.kernel == nil || err != nil {
		return shares, err
	}
	if err := d.kernel.Verify(d.fake.Dump()); err != nil {
		return nil, err
	}
	if err := d.kernel.CheckRoute(pkt, shares, probe); err != nil {
		return nil, fmt.Errorf("the tracer says %s, the kernel disagrees: %w", shares, err)
	}
	return shares, nil
}

func (d *Dataplane) trace(pkt route.Packet, again *time.Duration) (route.Shares, error) {
	if again != nil {
		return nftables.RouteAgain(d.fake.Table, d.nodeIPs, pkt, *again)
	}
	return nftables.Route(d.fake.Table, d.nodeIPs, pkt)
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

// RouteMasquerade traces a new connection through the table the Fake holds
// now, as a client with no affinity, and tells for each outcome the part of
// its share that leaves masqueraded (nftables.RouteMasquerade). It reads
// the Fake only: on a kernel, Route checks the shares.
func (d *Dataplane) RouteMasquerade(pkt route.Packet) (route.Shares, route.Shares, error) {
	d.fake.RLock()
	defer d.fake.RUnlock()
	return nftables.RouteMasquerade(d.fake.Table, d.nodeIPs, pkt)
}

// FrozenTracer is RouteMasquerade for many connections through the table
// as it is now, indexed once (nftables.Tracer): the table must not change
// while it is used.
func (d *Dataplane) FrozenTracer() (func(route.Packet) (route.Shares, route.Shares, error), error) {
	t := nftables.NewTracer(d.fake.Table, d.nodeIPs)
	return func(pkt route.Packet) (route.Shares, route.Shares, error) {
		d.fake.RLock()
		defer d.fake.RUnlock()
		return t.RouteMasquerade(pkt)
	}, nil
}
