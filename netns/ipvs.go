package netns

import (
	"fmt"
	"net"
	"syscall"

	mobyipvs "github.com/moby/ipvs"

	"github.com/proxysim/proxysim/sim/ipvs"
)

// IPVS programs the kernel's IPVS in one namespace through moby/ipvs.
type IPVS struct {
	h *mobyipvs.Handle
}

var _ ipvs.Handle = (*IPVS)(nil)

// persistentFlag is IP_VS_SVC_F_PERSISTENT.
const persistentFlag = 0x1

// NewIPVS opens n's IPVS. It fails on a kernel without IPVS.
func (n *Namespace) NewIPVS() (*IPVS, error) {
	if !n.HasIPVS() {
		return nil, ErrNoIPVS
	}
	h, err := mobyipvs.New(n.Path())
	if err != nil {
		return nil, fmt.Errorf("%s: ipvs: %w", n.Name, err)
	}
	return &IPVS{h: h}, nil
}

// Close releases the netlink socket.
func (i *IPVS) Close() { i.h.Close() }

func family(ip net.IP) uint16 {
	if ip.To4() != nil {
		return syscall.AF_INET
	}
	return syscall.AF_INET6
}

func protoNum(p string) uint16 {
	switch p {
	case "UDP":
		return syscall.IPPROTO_UDP
	case "SCTP":
		return 132
	}
	return syscall.IPPROTO_TCP
}

func protoName(p uint16) string {
	switch p {
	case syscall.IPPROTO_UDP:
		return "UDP"
	case 132:
		return "SCTP"
	}
	return "TCP"
}

func toService(vs ipvs.VirtualServer) *mobyipvs.Service {
	ip := net.ParseIP(vs.Address)
	s := &mobyipvs.Service{
		Address: ip, Protocol: protoNum(vs.Protocol), Port: vs.Port, SchedName: vs.Scheduler,
		AddressFamily: family(ip), Netmask: 0xffffffff,
	}
	if family(ip) == syscall.AF_INET6 {
		s.Netmask = 128
	}
	if vs.Persistent {
		s.Flags |= persistentFlag
		s.Timeout = vs.Timeout
	}
	return s
}

func fromService(s *mobyipvs.Service) ipvs.VirtualServer {
	vs := ipvs.VirtualServer{Address: s.Address.String(), Protocol: protoName(s.Protocol), Port: s.Port, Scheduler: s.SchedName}
	if s.Flags&persistentFlag != 0 {
		vs.Persistent, vs.Timeout = true, s.Timeout
	}
	return vs
}

func toDest(rs ipvs.RealServer) *mobyipvs.Destination {
	ip := net.ParseIP(rs.Address)
	return &mobyipvs.Destination{Address: ip, Port: rs.Port, Weight: rs.Weight, AddressFamily: family(ip), ConnectionFlags: mobyipvs.ConnFwdMasq}
}

func (i *IPVS) VirtualServers() ([]ipvs.VirtualServer, error) {
	list, err := i.h.GetServices()
	if err != nil {
		return nil, err
	}
	out := make([]ipvs.VirtualServer, 0, len(list))
	for _, s := range list {
		out = append(out, fromService(s))
	}
	return out, nil
}

func (i *IPVS) AddVirtualServer(vs ipvs.VirtualServer) error { return i.h.NewService(toService(vs)) }

func (i *IPVS) UpdateVirtualServer(vs ipvs.VirtualServer) error {
	return i.h.UpdateService(toService(vs))
}

func (i *IPVS) DeleteVirtualServer(vs ipvs.VirtualServer) error { return i.h.DelService(toService(vs)) }

func (i *IPVS) RealServers(vs ipvs.VirtualServer) ([]ipvs.RealServer, error) {
	list, err := i.h.GetDestinations(toService(vs))
	if err != nil {
		return nil, err
	}
	out := make([]ipvs.RealServer, 0, len(list))
	for _, d := range list {
		out = append(out, ipvs.RealServer{Address: d.Address.String(), Port: d.Port, Weight: d.Weight,
			ActiveConn: d.ActiveConnections, InactiveConn: d.InactiveConnections})
	}
	return out, nil
}

func (i *IPVS) AddRealServer(vs ipvs.VirtualServer, rs ipvs.RealServer) error {
	return i.h.NewDestination(toService(vs), toDest(rs))
}

func (i *IPVS) UpdateRealServer(vs ipvs.VirtualServer, rs ipvs.RealServer) error {
	return i.h.UpdateDestination(toService(vs), toDest(rs))
}

func (i *IPVS) DeleteRealServer(vs ipvs.VirtualServer, rs ipvs.RealServer) error {
	return i.h.DelDestination(toService(vs), toDest(rs))
}

func (i *IPVS) SetTimeouts(t ipvs.Timeouts) error {
	cur, err := i.h.GetConfig()
	if err != nil {
		return err
	}
	c := *cur
	if t.TCP > 0 {
		c.TimeoutTCP = t.TCP
	}
	if t.TCPFin > 0 {
		c.TimeoutTCPFin = t.TCPFin
	}
	if t.UDP > 0 {
		c.TimeoutUDP = t.UDP
	}
	return i.h.SetConfig(&c)
}

// Dataplane returns the real dataplane of a namespace: its IPVS, its
// kube-ipvs0 binder and its sysctls.
func (n *Namespace) Dataplane() (ipvs.Dataplane, *IPVS, error) {
	h, err := n.NewIPVS()
	if err != nil {
		return ipvs.Dataplane{}, nil, err
	}
	kv, err := KernelVersion()
	if err != nil {
		h.Close()
		return ipvs.Dataplane{}, nil, err
	}
	return ipvs.Dataplane{IPVS: h, Addresses: n.Binder(), Sysctl: n.Sysctl(), KernelVersion: kv}, h, nil
}

// Node is a namespace standing in for a node: the dataplane a proxy
// programs, with nothing else attached.
type Node struct {
	NS        *Namespace
	Dataplane ipvs.Dataplane
	ipvs      *IPVS
}

// OpenDataplane creates a node namespace (see NewNode) and returns its IPVS
// dataplane and how to remove it: what a replay on this kernel needs.
func OpenDataplane() (ipvs.Dataplane, func() error, error) {
	node, err := NewNode()
	if err != nil {
		return ipvs.Dataplane{}, nil, err
	}
	return node.Dataplane, node.Close, nil
}

// NewNode creates a node namespace with a real IPVS dataplane. It fails with
// ErrNoIPVS on a kernel without IPVS, and without root.
func NewNode() (*Node, error) {
	if !Privileged() {
		return nil, fmt.Errorf("the netns dataplane needs root")
	}
	ns, err := Create("node")
	if err != nil {
		return nil, err
	}
	dp, h, err := ns.Dataplane()
	if err != nil {
		ns.Close()
		return nil, err
	}
	return &Node{NS: ns, Dataplane: dp, ipvs: h}, nil
}

// Close removes the node and everything in it.
func (n *Node) Close() error {
	n.ipvs.Close()
	return n.NS.Close()
}
