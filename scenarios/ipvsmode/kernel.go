package ipvsmode

import (
	"errors"
	"time"

	"k8s.io/utils/clock"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/sim/ipvs"
)

// Client is a real kernel's client side: connections through the node's
// IPVS, data on them, and ARP from the client's segment (netns.Topology).
type Client interface {
	ipvs.Traffic
	ipvs.Sender
	ARP(addr string) (bool, error)
	// ARPSender is the sender address of the node's ARP request for a
	// datagram from src (a kube-ipvs0 address) to a neighbour on the
	// client's segment.
	ARPSender(src string) (string, error)
}

// OnKernelWithClient binds the mode to a real kernel like OnKernel, and
// gives a scenario that talks to the node as a client (connect, send,
// reset, arp) a topology instead: openClient returns the node's dataplane
// with a client and backends around it (10.244.1.2 and 10.244.2.2, port
// 8080) and how to remove them.
//
// Such a replay keeps pace with the kernel: before the kernel is touched,
// at least as much real time has passed since the last touch as virtual
// time has, so that what the kernel does in its own time (an entry
// expiring, a SYN retransmitted) has happened by the instant the scenario
// names. The world itself still runs in virtual time;
// the waiting is here, in the binding to the kernel, never in sim.
func OnKernelWithClient(openNode func() (ipvs.Dataplane, func() error, error), openClient func() (ipvs.Dataplane, Client, func() error, error)) scenarios.DataplaneFactory {
	node := OnKernel(openNode)
	return func(s *scenarios.Scenario, clk clock.PassiveClock) (scenarios.Dataplane, error) {
		if !NeedsClient(s) {
			return node(s, clk)
		}
		set, err := settingsOf(s)
		if err != nil {
			return nil, err
		}
		dp, client, closeFn, err := openClient()
		if err != nil {
			return nil, err
		}
		if err := packetPathOn(set, dp, closeFn); err != nil {
			return nil, err
		}
		// Each virtual gap between two touches of the kernel lasts at least
		// as long in real time: a slow connect delays what follows rather
		// than shortening the next gap.
		lastWall, lastVirt := time.Now(), clk.Now()
		pace := func() {
			if d := clk.Since(lastVirt) - time.Since(lastWall); d > 0 {
				time.Sleep(d)
			}
			lastWall, lastVirt = time.Now(), clk.Now()
		}
		dp.IPVS = pacedHandle{dp.IPVS, pace}
		c := pacedClient{client, pace}
		d := newDataplane("netns, kernel "+dp.KernelVersion+", with a client", set, s.Proxy.SyncFailsOnError, dp, c, closeFn)
		d.arp, d.arpSender, d.pace = c.ARP, c.ARPSender, pace
		return d, nil
	}
}

// NeedsClient reports whether a scenario talks to the node as a client
// would: it opens connections, sends or resets on them, or asks ARP.
func NeedsClient(s *scenarios.Scenario) bool {
	if HasTraffic(s) {
		return true
	}
	for _, st := range s.Timeline {
		for _, a := range st.Actions {
			switch a.(type) {
			case *sendStep, *resetStep, *abandonStep, *shutdownStep:
				return true
			}
		}
		if st.Expect == nil {
			continue
		}
		for _, c := range st.Expect.Checks {
			switch c.(type) {
			case *arpExpect, *arpSenderExpect:
				return true
			}
		}
	}
	return false
}

// pacedClient lets real time catch up before the client does anything or
// reads a connection's entry.
type pacedClient struct {
	c    Client
	pace func()
}

func (p pacedClient) Connect(name, protocol, client, service string) ipvs.ConnectResult {
	p.pace()
	return p.c.Connect(name, protocol, client, service)
}
func (p pacedClient) Close(name string) error {
	p.pace()
	return p.c.Close(name)
}
func (p pacedClient) Conn(name string) (ipvs.ConnInfo, bool) {
	p.pace()
	return p.c.Conn(name)
}
func (p pacedClient) Ping(name string, timeout time.Duration) error {
	p.pace()
	return p.c.Ping(name, timeout)
}
func (p pacedClient) Reset(name string) error {
	p.pace()
	return p.c.Reset(name)
}
func (p pacedClient) Abandon(name string) error {
	p.pace()
	return p.c.Abandon(name)
}
func (p pacedClient) Shutdown(name string) error {
	p.pace()
	return p.c.Shutdown(name)
}
func (p pacedClient) ARP(addr string) (bool, error) {
	p.pace()
	return p.c.ARP(addr)
}
func (p pacedClient) ARPSender(src string) (string, error) {
	p.pace()
	return p.c.ARPSender(src)
}

// pacedHandle lets real time catch up before every IPVS call, the
// proxier's and its graceful termination's included.
type pacedHandle struct {
	h    ipvs.Handle
	pace func()
}

func (p pacedHandle) VirtualServers() ([]ipvs.VirtualServer, error) {
	p.pace()
	return p.h.VirtualServers()
}
func (p pacedHandle) AddVirtualServer(vs ipvs.VirtualServer) error {
	p.pace()
	return p.h.AddVirtualServer(vs)
}
func (p pacedHandle) UpdateVirtualServer(vs ipvs.VirtualServer) error {
	p.pace()
	return p.h.UpdateVirtualServer(vs)
}
func (p pacedHandle) DeleteVirtualServer(vs ipvs.VirtualServer) error {
	p.pace()
	return p.h.DeleteVirtualServer(vs)
}
func (p pacedHandle) RealServers(vs ipvs.VirtualServer) ([]ipvs.RealServer, error) {
	p.pace()
	return p.h.RealServers(vs)
}
func (p pacedHandle) AddRealServer(vs ipvs.VirtualServer, rs ipvs.RealServer) error {
	p.pace()
	return p.h.AddRealServer(vs, rs)
}
func (p pacedHandle) UpdateRealServer(vs ipvs.VirtualServer, rs ipvs.RealServer) error {
	p.pace()
	return p.h.UpdateRealServer(vs, rs)
}
func (p pacedHandle) DeleteRealServer(vs ipvs.VirtualServer, rs ipvs.RealServer) error {
	p.pace()
	return p.h.DeleteRealServer(vs, rs)
}
func (p pacedHandle) SetTimeouts(t ipvs.Timeouts) error {
	p.pace()
	return p.h.SetTimeouts(t)
}

// ReadTimeouts passes through to a handle that can read them.
func (p pacedHandle) ReadTimeouts() (ipvs.Timeouts, error) {
	p.pace()
	if tr, ok := p.h.(ipvs.TimeoutReader); ok {
		return tr.ReadTimeouts()
	}
	return ipvs.Timeouts{}, errNoTimeouts
}

var errNoTimeouts = errors.New("this IPVS handle cannot read its timeouts")
