// Package ipvs is proxysim's IPVS proxier: it turns the applied service and
// endpoint state into IPVS virtual and real servers, addresses on the
// kube-ipvs0 dummy device and sysctls, through the interfaces defined here;
// on a Dataplane with IPSets and IPTables, also the ipsets and iptables
// rules kube-proxy's IPVS proxier writes (rules.go). PathView.Route traces
// a packet through those rules and the IPVS table (route.go).
//
// Backend plugs the proxier into a sim.World as its dataplane backend: this
// package imports sim, never the other way round. fakes/ implements the
// interfaces in memory, netns/ against a real kernel in a network namespace.
// This package must not touch the host.
package ipvs

import (
	"fmt"
	"strconv"
	"time"

	"github.com/proxysim/proxysim/sim/iptables"
	"github.com/proxysim/proxysim/sim/proxy"
)

// VirtualServer is an IPVS service. Address is in its canonical text form.
type VirtualServer struct {
	Address    string
	Protocol   string // TCP, UDP or SCTP
	Port       uint16
	Scheduler  string
	Persistent bool   // ClientIP affinity
	Timeout    uint32 // persistence timeout in seconds
}

// Key identifies a virtual server: protocol, address and port.
func (v VirtualServer) Key() string {
	var b [80]byte
	return string(v.appendKey(b[:0]))
}

func (v VirtualServer) appendKey(b []byte) []byte {
	b = append(b, v.Protocol...)
	b = append(b, ' ')
	return proxy.AppendHostPort(b, v.Address, int32(v.Port))
}

func (v VirtualServer) String() string {
	s := v.Key() + " " + v.Scheduler
	if v.Persistent {
		s += fmt.Sprintf(" persistent %d", v.Timeout)
	}
	return s
}

// RealServer is an IPVS destination. ActiveConn and InactiveConn are read
// from the kernel and ignored on writes.
type RealServer struct {
	Address      string
	Port         uint16
	Weight       int
	ActiveConn   int
	InactiveConn int
}

// Key identifies a real server within its virtual server.
func (r RealServer) Key() string {
	var b [64]byte
	return string(proxy.AppendHostPort(b[:0], r.Address, int32(r.Port)))
}

// sameAs reports whether two real servers have the same key.
func (r RealServer) sameAs(o RealServer) bool { return r.Address == o.Address && r.Port == o.Port }

// compareRealServers orders real servers by key text without building it.
func compareRealServers(a, b RealServer) int {
	return proxy.CompareHostPorts(a.Address, int32(a.Port), b.Address, int32(b.Port))
}

// rsOpWeight is rsOp with the suffix " weight N".
func rsOpWeight(vs VirtualServer, rs RealServer) string {
	var b [160]byte
	out := vs.appendKey(b[:0])
	out = append(out, " -> "...)
	out = proxy.AppendHostPort(out, rs.Address, int32(rs.Port))
	out = append(out, " weight "...)
	out = strconv.AppendInt(out, int64(rs.Weight), 10)
	return string(out)
}

// rsOp is an operation's detail "VS -> RS" plus a suffix, in one allocation.
func rsOp(vs VirtualServer, rs RealServer, suffix string) string {
	var b [160]byte
	out := vs.appendKey(b[:0])
	out = append(out, " -> "...)
	out = proxy.AppendHostPort(out, rs.Address, int32(rs.Port))
	out = append(out, suffix...)
	return string(out)
}

// Timeouts are IPVS's connection timeouts (ipvsadm --set); zero means unset.
type Timeouts struct {
	TCP, TCPFin, UDP time.Duration
}

// Handle programs IPVS in one network namespace.
type Handle interface {
	VirtualServers() ([]VirtualServer, error)
	AddVirtualServer(VirtualServer) error
	UpdateVirtualServer(VirtualServer) error
	DeleteVirtualServer(VirtualServer) error
	RealServers(VirtualServer) ([]RealServer, error)
	AddRealServer(VirtualServer, RealServer) error
	UpdateRealServer(VirtualServer, RealServer) error
	DeleteRealServer(VirtualServer, RealServer) error
	SetTimeouts(Timeouts) error
}

// AddressBinder manages the addresses on the dummy device that make virtual
// IPs local to the node.
type AddressBinder interface {
	EnsureDevice(dev string) error
	Addresses(dev string) ([]string, error)
	Bind(dev, addr string) error
	Unbind(dev, addr string) error
}

// Sysctl reads and writes integer sysctls by path under /proc/sys, e.g.
// "net/ipv4/vs/conn_reuse_mode", in one network namespace.
type Sysctl interface {
	Get(name string) (int, error)
	Set(name string, value int) error
}

// Dataplane bundles what the proxier programs, plus the kernel's version.
type Dataplane struct {
	IPVS          Handle
	Addresses     AddressBinder
	Sysctl        Sysctl
	KernelVersion string
	// IPSets and IPTables, when both are set, get the ipsets and iptables
	// rules kube-proxy's IPVS proxier writes next to IPVS; without them
	// the proxier programs IPVS and kube-ipvs0 only.
	IPSets   IPSetHandle
	IPTables iptables.Dataplane
}
