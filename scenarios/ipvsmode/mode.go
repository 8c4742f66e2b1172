// Package ipvsmode is the IPVS proxy mode of the scenario format: its proxy
// settings (scheduler, strictARP, ipvsTimeouts, kernel, nodeIPs), its golden
// (`ipvs:` / `ipvsFile:`, an `ipvsadm -Ln` table), its expectations
// (sysctls, addresses, draining, connections, and route over the packet
// path's tracer with packetPath), its steps (connect, close,
// fault.dataplaneOps) and its dataplanes: the in-memory fake, and OnKernel
// for a real one. Importing it registers the mode, as the default.
//
// It must not import netns: a real-kernel binding is wired by the caller
// (cmd, e2e), so that the kernel packages never depend on scenarios.
package ipvsmode

import (
	"fmt"
	"net"
	"net/netip"

	"k8s.io/utils/clock"

	"github.com/proxysim/proxysim/fakes"
	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/sim/ipvs"
	"github.com/proxysim/proxysim/sim/runner"
)

// Name is the mode's name in proxy.mode.
const Name = "ipvs"

func init() { scenarios.RegisterDefaultMode(Mode{}) }

// Mode is the IPVS mode.
type Mode struct{}

func (Mode) Name() string { return Name }

func (Mode) NewSettings() scenarios.Settings { return &Settings{} }

// ShapeRunner gives the runner kube-proxy's IPVS proxier builds: the burst
// generation's never calls RetryAfter; from v1.34 the runner retries a
// failed sync by itself, after syncPeriod (retryInterval = maxInterval,
// pkg/proxy/ipvs/proxier.go NewProxier).
func (Mode) ShapeRunner(_ scenarios.Proxy, cfg runner.Config) runner.Config {
	if cfg.Generation == runner.Cooldown {
		cfg.RetryInterval = cfg.MaxInterval
	}
	return cfg
}

func (Mode) Actions() []func() scenarios.Action {
	return append([]func() scenarios.Action{
		func() scenarios.Action { return &connectStep{} },
		func() scenarios.Action { return &closeStep{} },
	}, plugins.actions...)
}

func (Mode) Faults() []func() scenarios.Action {
	return []func() scenarios.Action{func() scenarios.Action { return &opsFault{} }}
}

func (Mode) Expectations() []func() scenarios.Expectation {
	return append([]func() scenarios.Expectation{
		func() scenarios.Expectation { return &tableExpect{} },
		func() scenarios.Expectation { return &sysctlsExpect{} },
		func() scenarios.Expectation { return &addressesExpect{} },
		func() scenarios.Expectation { return &drainingExpect{} },
		func() scenarios.Expectation { return &connectionsExpect{} },
		routeExpectation,
		func() scenarios.Expectation { return &rulesExpect{} },
	}, plugins.expectations...)
}

// plugins are the mode's steps and expectations that register themselves
// from files of their own (see operator.go).
var plugins struct {
	actions      []func() scenarios.Action
	expectations []func() scenarios.Expectation
}

// Fake is the in-memory IPVS of fakes/, for the scenario's kernel, on the
// world's clock.
func (Mode) Fake(s *scenarios.Scenario, clk clock.PassiveClock) (scenarios.Dataplane, error) {
	set, err := settingsOf(s)
	if err != nil {
		return nil, err
	}
	dp, h, sys, binder := fakes.Dataplane(set.Kernel, clk)
	if set.PacketPath {
		dp.IPSets, dp.IPTables = fakes.NewIPSets(), fakes.NewIPTables()
	}
	d := newDataplane("fake", set, s.Proxy.SyncFailsOnError, dp, h, func() error { return nil })
	// The fake's ARP follows net/ipv4/arp.c on a node laid out as the
	// client topology's (netns BuildTopology), kube-ipvs0 included: asked
	// from the client's segment, it answers by arp_ignore; its own requests
	// to that segment name a sender by arp_announce.
	host := &fakes.Host{Links: nodeLinks, Binder: binder, Sysctls: sys}
	d.arp = func(addr string) (bool, error) {
		target, err := netip.ParseAddr(addr)
		if err != nil {
			return false, err
		}
		return host.AnswersARP(nodeClientLink, clientAddr, target)
	}
	d.arpSender = func(src string) (string, error) {
		ip, err := netip.ParseAddr(src)
		if err != nil {
			return "", err
		}
		sender, err := host.ARPSender(nodeClientLink, ip, clientNeighbour)
		return sender.String(), err
	}
	return d, nil
}

// The client topology's node, as netns BuildTopology lays it out: lo, its
// link to the client's segment (c0, 10.0.0.1/24) and one to each backend's
// (bK, 10.244.K.1/24). The client asks ARP from 10.0.0.5; the node's own
// requests go to 10.0.0.9, a neighbour on the client's segment.
var (
	nodeLinks = []fakes.Link{
		{Name: "lo", Addrs: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/8")}, HostScope: true},
		{Name: nodeClientLink, Addrs: []netip.Prefix{netip.MustParsePrefix("10.0.0.1/24")}},
		{Name: "b1", Addrs: []netip.Prefix{netip.MustParsePrefix("10.244.1.1/24")}},
		{Name: "b2", Addrs: []netip.Prefix{netip.MustParsePrefix("10.244.2.1/24")}},
	}
	clientAddr      = netip.MustParseAddr("10.0.0.5")
	clientNeighbour = netip.MustParseAddr("10.0.0.9")
)

const nodeClientLink = "c0"

// Settings are the IPVS proxy's own fields.
type Settings struct {
	NodeIPs      []string `yaml:"nodeIPs"`
	StrictARP    bool     `yaml:"strictARP"`
	Scheduler    string   `yaml:"scheduler"`
	IPVSTimeouts Timeouts `yaml:"ipvsTimeouts"`
	Kernel       string   `yaml:"kernel"`
	// Sysctls are the node's own settings, written once after the
	// proxier's startup writes, as an operator's sysctl -w would be.
	Sysctls map[string]int `yaml:"sysctls"`
	// PacketPath has the proxier write the ipsets and iptables rules
	// kube-proxy's IPVS proxier writes next to IPVS, so that `route`
	// expectations can trace a packet; ClusterCIDR and MasqueradeAll
	// shape those rules as in the iptables mode.
	PacketPath    bool   `yaml:"packetPath"`
	ClusterCIDR   string `yaml:"clusterCIDR"`
	MasqueradeAll bool   `yaml:"masqueradeAll"`
	Src           scenarios.Src
}

// Timeouts are ipvsadm --set's timeouts; zero leaves the kernel's.
type Timeouts struct {
	TCP    scenarios.Duration `yaml:"tcp"`
	TCPFin scenarios.Duration `yaml:"tcpFin"`
	UDP    scenarios.Duration `yaml:"udp"`
}

// Schedulers are the IPVS schedulers the fake dataplane models.
var Schedulers = map[string]bool{"rr": true, "wrr": true, "sh": true}

// DefaultKernel is the kernel a scenario that names none runs on.
const DefaultKernel = "6.1.0"

func (p *Settings) Validate(v *scenarios.Validator) {
	for i, ip := range p.NodeIPs {
		if net.ParseIP(ip) == nil {
			at := p.Src.At("nodeIPs")
			v.Errorf(scenarios.Pos{Line: at.Line, Column: at.Column, Path: fmt.Sprintf("%s[%d]", at.Path, i)}, "%q is not an IP address", ip)
		}
	}
	if p.Kernel == "" {
		p.Kernel = DefaultKernel
	} else if _, err := ipvs.ParseKernelVersion(p.Kernel); err != nil {
		v.Errorf(p.Src.At("kernel"), "%v", err)
	}
	validateSysctls(v, p.Src.At("sysctls"), p.Sysctls)
	if p.ClusterCIDR != "" {
		if ip, _, err := net.ParseCIDR(p.ClusterCIDR); err != nil || ip.To4() == nil {
			v.Errorf(p.Src.At("clusterCIDR"), "%q is not an IPv4 CIDR", p.ClusterCIDR)
		}
	}
	if p.Scheduler == "" {
		p.Scheduler = ipvs.DefaultScheduler
	} else if !Schedulers[p.Scheduler] {
		v.Errorf(p.Src.At("scheduler"), "scheduler %q is not modelled (want rr, wrr or sh)", p.Scheduler)
	}
}

// SettingsOf returns an IPVS scenario's settings.
func SettingsOf(s *scenarios.Scenario) (*Settings, bool) {
	set, ok := s.Proxy.Settings.(*Settings)
	return set, ok
}

func settingsOf(s *scenarios.Scenario) (*Settings, error) {
	set, ok := SettingsOf(s)
	if !ok {
		return nil, fmt.Errorf("%s: an IPVS dataplane replays mode %s scenarios, not mode %q", s.File, Name, s.Proxy.Mode)
	}
	return set, nil
}
