package ipvsmode

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/utils/clock"

	"github.com/proxysim/proxysim/fakes"
	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/bubble"
	"github.com/proxysim/proxysim/sim"
	"github.com/proxysim/proxysim/sim/ipvs"
	"github.com/proxysim/proxysim/sim/proxy"
	"github.com/proxysim/proxysim/sim/route"
)

// OwnDataplane is the dataplane of a proxy under test in a bubble replay
// (bubble.Replay): the fake kernel's IPVS handle, dummy-device
// addresses and sysctls (sim/ipvs.Dataplane), the same fake kernel that
// answers connect steps, dumped as ipvsadm -Ln for the same goldens.
// IPVS has no tracer: a comparison with kube-proxy compares the two
// ipvsadm tables instead.
func (Mode) OwnDataplane(s *scenarios.Scenario, clk clock.PassiveClock) (bubble.OwnDataplane, error) {
	set, err := settingsOf(s)
	if err != nil {
		return nil, err
	}
	dp, h, _, _ := fakes.Dataplane(set.Kernel, clk)
	return &ownDataplane{newDataplane("the fake kernel's IPVS", set, false, dp, h, func() error { return nil })}, nil
}

type ownDataplane struct{ *Dataplane }

var _ bubble.OwnDataplane = (*ownDataplane)(nil)

// NewBackend refuses: proxysim's proxier never programs this dataplane.
func (d *ownDataplane) NewBackend(*sim.World) (proxy.Backend, error) {
	return nil, fmt.Errorf("the dataplane of a proxy under test is not proxysim's to program")
}

// errNoTracer is what a route through IPVS gives: there is no tracer.
var errNoTracer = errors.New("IPVS has no packet tracer (compare the ipvsadm tables)")

func (d *ownDataplane) Route(route.Packet, *time.Duration) (route.Shares, error) {
	return nil, errNoTracer
}

// ComparableSnapshot tells a comparison with kube-proxy to compare
// ipvsadm tables (in IPVS the table is the same whatever way it was
// programmed), without the connection counters: connect steps reach the
// proxy under test's kernel only.
func (d *ownDataplane) ComparableSnapshot(table string) string {
	lines := strings.Split(table, "\n")
	for i, l := range lines {
		f := strings.Fields(l)
		if len(f) == 6 && f[0] == "->" && f[1] != "RemoteAddress:Port" {
			lines[i] = fmt.Sprintf("  -> %-28s %-7s %s", f[1], f[2], f[3])
		}
	}
	return strings.Join(lines, "\n")
}

func (d *ownDataplane) Attach(env *bubble.ProxyEnv, onWrite func()) {
	dp := d.raw
	env.IPVS = ipvs.Dataplane{
		IPVS:          &observedIPVS{Handle: dp.IPVS, onWrite: onWrite},
		Addresses:     &observedAddresses{AddressBinder: dp.Addresses, onWrite: onWrite},
		Sysctl:        dp.Sysctl,
		KernelVersion: dp.KernelVersion,
	}
}

func (d *ownDataplane) Keys() []string {
	return []string{"ipvs", "ipvsFile", "sysctls", "addresses", "connections"}
}

// observedIPVS reports every write to the IPVS table.
type observedIPVS struct {
	ipvs.Handle
	onWrite func()
}

func (o *observedIPVS) AddVirtualServer(v ipvs.VirtualServer) error {
	defer o.onWrite()
	return o.Handle.AddVirtualServer(v)
}

func (o *observedIPVS) UpdateVirtualServer(v ipvs.VirtualServer) error {
	defer o.onWrite()
	return o.Handle.UpdateVirtualServer(v)
}

func (o *observedIPVS) DeleteVirtualServer(v ipvs.VirtualServer) error {
	defer o.onWrite()
	return o.Handle.DeleteVirtualServer(v)
}

func (o *observedIPVS) AddRealServer(v ipvs.VirtualServer, r ipvs.RealServer) error {
	defer o.onWrite()
	return o.Handle.AddRealServer(v, r)
}

func (o *observedIPVS) UpdateRealServer(v ipvs.VirtualServer, r ipvs.RealServer) error {
	defer o.onWrite()
	return o.Handle.UpdateRealServer(v, r)
}

func (o *observedIPVS) DeleteRealServer(v ipvs.VirtualServer, r ipvs.RealServer) error {
	defer o.onWrite()
	return o.Handle.DeleteRealServer(v, r)
}

func (o *observedIPVS) SetTimeouts(t ipvs.Timeouts) error {
	defer o.onWrite()
	return o.Handle.SetTimeouts(t)
}

// observedAddresses reports every bind and unbind on the dummy device.
type observedAddresses struct {
	ipvs.AddressBinder
	onWrite func()
}

func (o *observedAddresses) Bind(dev, addr string) error {
	defer o.onWrite()
	return o.AddressBinder.Bind(dev, addr)
}

func (o *observedAddresses) Unbind(dev, addr string) error {
	defer o.onWrite()
	return o.AddressBinder.Unbind(dev, addr)
}
