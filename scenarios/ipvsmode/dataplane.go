package ipvsmode

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/utils/clock"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/replay"
	"github.com/proxysim/proxysim/sim"
	"github.com/proxysim/proxysim/sim/iptables"
	"github.com/proxysim/proxysim/sim/ipvs"
	"github.com/proxysim/proxysim/sim/proxy"
	"github.com/proxysim/proxysim/sim/route"
)

// Dataplane is one replay's IPVS: the proxier's configuration, the dataplane
// it programs (with injectable faults), and the connections the scenario
// opened.
type Dataplane struct {
	name    string
	cfg     ipvs.Config
	raw     ipvs.Dataplane // what expectations read
	faulty  ipvs.Dataplane // what the proxier programs
	faults  *ipvs.Faults
	traffic ipvs.Traffic // nil: connect steps cannot run here
	conns   map[string]ipvs.ConnectResult
	close   func() error

	// The operator's side (operator.go): the node's own sysctls, written
	// once after the proxier's first startup; the latest outcome of each
	// connection's send; an ARP probe from the client's segment (nil: not
	// on this dataplane); and pace, which on a real kernel lets real time
	// catch up with virtual time before the kernel is touched.
	sysctls        map[string]int
	sysctlsWritten bool
	sends          map[string]string
	arp            func(addr string) (bool, error)
	arpSender      func(src string) (string, error)
	pace           func()

	// onKernel, on a kernel that holds the packet path
	// (OnKernelPacketPath), checks each route with real connections.
	onKernel *pathOnKernel
}

var _ scenarios.Dataplane = (*Dataplane)(nil)

func newDataplane(name string, set *Settings, failSync bool, dp ipvs.Dataplane, traffic ipvs.Traffic, close func() error) *Dataplane {
	faults := &ipvs.Faults{}
	return &Dataplane{
		name: name,
		cfg: ipvs.Config{
			Scheduler:        set.Scheduler,
			StrictARP:        set.StrictARP,
			Timeouts:         ipvs.Timeouts{TCP: set.IPVSTimeouts.TCP.D(), TCPFin: set.IPVSTimeouts.TCPFin.D(), UDP: set.IPVSTimeouts.UDP.D()},
			NodeIPs:          set.NodeIPs,
			SyncFailsOnError: failSync,
			ClusterCIDR:      set.ClusterCIDR,
			MasqueradeAll:    set.MasqueradeAll,
		},
		raw: dp, faulty: ipvs.WithFaults(dp, faults), faults: faults,
		traffic: traffic, conns: map[string]ipvs.ConnectResult{}, close: close,
		sysctls: set.Sysctls, sends: map[string]string{}, pace: func() {},
	}
}

func (d *Dataplane) Name() string { return d.name }

// NewBackend builds an IPVS proxier over the dataplane, at start and at
// every restart.
func (d *Dataplane) NewBackend(w *sim.World) (proxy.Backend, error) {
	b, err := ipvs.Backend(d.cfg, d.faulty)(w)
	if err != nil {
		return nil, err
	}
	return b, d.writeNodeSysctls(w)
}

// Snapshot is the IPVS table as `ipvsadm -Ln` shows it, sorted.
func (d *Dataplane) Snapshot() (string, error) { return ipvs.Table(d.raw.IPVS) }

func (d *Dataplane) Close() error { return d.close() }

// OnKernel binds the mode to a real kernel: open returns a fresh IPVS
// dataplane (a network namespace, say) and how to release it. The caller
// wires it to netns, which knows nothing of scenarios.
func OnKernel(open func() (dp ipvs.Dataplane, close func() error, err error)) scenarios.DataplaneFactory {
	return func(s *scenarios.Scenario, _ clock.PassiveClock) (scenarios.Dataplane, error) {
		set, err := settingsOf(s)
		if err != nil {
			return nil, err
		}
		dp, closeFn, err := open()
		if err != nil {
			return nil, err
		}
		if err := packetPathOn(set, dp, closeFn); err != nil {
			return nil, err
		}
		return newDataplane("netns, kernel "+dp.KernelVersion, set, s.Proxy.SyncFailsOnError, dp, nil, closeFn), nil
	}
}

// packetPathOn refuses packetPath on a dataplane without ipsets and
// iptables (a kernel's IPVS alone, or the client topology), closing it:
// the rules would not be written and every route would fail.
func packetPathOn(set *Settings, dp ipvs.Dataplane, closeFn func() error) error {
	if !set.PacketPath || (dp.IPSets != nil && dp.IPTables != nil) {
		return nil
	}
	_ = closeFn()
	return fmt.Errorf("proxy.packetPath: this kernel dataplane (%s) writes no ipsets and iptables rules; a kernel holds the packet path only for a scenario without client steps (connect, send, arp: ipvsmode.WithPacketPath)", dp.KernelVersion)
}

func dataplaneOf(r *replay.Run) *Dataplane {
	switch d := r.Dataplane().(type) {
	case *Dataplane:
		return d
	case *ownDataplane: // a proxy under test's (own.go)
		return d.Dataplane
	}
	return nil
}

// Route traces a new connection through the node's packet path as it is
// now (ipvs.PathView.Route): the ipsets and iptables rules, and the IPVS
// table with the persistence templates of earlier connect steps. The
// dataplane needs proxy.packetPath.
func (d *Dataplane) Route(pkt route.Packet, again *time.Duration) (route.Shares, error) {
	if again != nil {
		return nil, fmt.Errorf("the IPVS tracer follows one connection only")
	}
	sh, _, err := d.RouteMasquerade(pkt)
	return sh, err
}

// RouteMasquerade is Route with, for each outcome, the part of its share
// that leaves the node masqueraded.
func (d *Dataplane) RouteMasquerade(pkt route.Packet) (route.Shares, route.Shares, error) {
	v, err := ipvs.ReadPath(d.raw, d.cfg.NodeIPs)
	if err != nil {
		return nil, nil, err
	}
	return v.Route(pkt)
}

// Rules are the packet path's ipsets (ipvs.SaveIPSets) followed by
// iptables-save of the filter and nat tables.
func (d *Dataplane) Rules() (string, error) {
	sets, err := ipvs.SaveIPSets(d.raw.IPSets)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString(sets)
	for _, t := range iptables.Tables {
		text, err := d.raw.IPTables.Save(t)
		if err != nil {
			return "", err
		}
		b.WriteString(text)
	}
	return b.String(), nil
}

// FrozenTracer is RouteMasquerade for many connections through the packet
// path as it is now, read once (one ipvs.PathView, indexed on first use):
// the dataplane must not change while it is used.
func (d *Dataplane) FrozenTracer() (func(route.Packet) (route.Shares, route.Shares, error), error) {
	v, err := ipvs.ReadPath(d.raw, d.cfg.NodeIPs)
	if err != nil {
		return nil, err
	}
	return v.Route, nil
}
