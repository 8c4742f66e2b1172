package fakes

import (
	"github.com/proxysim/proxysim/sim/ipvs"
)

// IPVSCalls counts the netlink calls that reach an IPVS dataplane, by kind,
// failed ones included, and what the listings returned: the dataplane's
// side of a sync's reported work (sim.IPVSWork), kept apart from the
// proxier's own bookkeeping so that tests can hold one to the other.
type IPVSCalls struct {
	VirtualServersAdded, VirtualServersUpdated, VirtualServersDeleted int
	RealServersAdded, RealServersUpdated, RealServersDeleted          int
	AddressesBound, AddressesUnbound, DeviceEnsures                   int
	VirtualServerListings, VirtualServersListed                       int
	RealServerListings, RealServersListed                             int
	AddressListings, AddressesListed                                  int
	SetTimeouts                                                       int
}

// CountIPVS returns dp with its IPVS handle and address binder counting
// into the returned IPVSCalls.
func CountIPVS(dp ipvs.Dataplane) (ipvs.Dataplane, *IPVSCalls) {
	c := &IPVSCalls{}
	dp.IPVS = &countedHandle{dp.IPVS, c}
	dp.Addresses = &countedBinder{dp.Addresses, c}
	return dp, c
}

// countedHandle embeds the handle, so that a call it does not count
// still passes through.
type countedHandle struct {
	ipvs.Handle
	c *IPVSCalls
}

func (h *countedHandle) VirtualServers() ([]ipvs.VirtualServer, error) {
	l, err := h.Handle.VirtualServers()
	h.c.VirtualServerListings++
	h.c.VirtualServersListed += len(l)
	return l, err
}

func (h *countedHandle) AddVirtualServer(vs ipvs.VirtualServer) error {
	h.c.VirtualServersAdded++
	return h.Handle.AddVirtualServer(vs)
}

func (h *countedHandle) UpdateVirtualServer(vs ipvs.VirtualServer) error {
	h.c.VirtualServersUpdated++
	return h.Handle.UpdateVirtualServer(vs)
}

func (h *countedHandle) DeleteVirtualServer(vs ipvs.VirtualServer) error {
	h.c.VirtualServersDeleted++
	return h.Handle.DeleteVirtualServer(vs)
}

func (h *countedHandle) RealServers(vs ipvs.VirtualServer) ([]ipvs.RealServer, error) {
	l, err := h.Handle.RealServers(vs)
	h.c.RealServerListings++
	h.c.RealServersListed += len(l)
	return l, err
}

func (h *countedHandle) AddRealServer(vs ipvs.VirtualServer, rs ipvs.RealServer) error {
	h.c.RealServersAdded++
	return h.Handle.AddRealServer(vs, rs)
}

func (h *countedHandle) UpdateRealServer(vs ipvs.VirtualServer, rs ipvs.RealServer) error {
	h.c.RealServersUpdated++
	return h.Handle.UpdateRealServer(vs, rs)
}

func (h *countedHandle) DeleteRealServer(vs ipvs.VirtualServer, rs ipvs.RealServer) error {
	h.c.RealServersDeleted++
	return h.Handle.DeleteRealServer(vs, rs)
}

func (h *countedHandle) SetTimeouts(t ipvs.Timeouts) error {
	h.c.SetTimeouts++
	return h.Handle.SetTimeouts(t)
}

type countedBinder struct {
	ipvs.AddressBinder
	c *IPVSCalls
}

func (b *countedBinder) EnsureDevice(dev string) error {
	b.c.DeviceEnsures++
	return b.AddressBinder.EnsureDevice(dev)
}

func (b *countedBinder) Addresses(dev string) ([]string, error) {
	l, err := b.AddressBinder.Addresses(dev)
	b.c.AddressListings++
	b.c.AddressesListed += len(l)
	return l, err
}

func (b *countedBinder) Bind(dev, addr string) error {
	b.c.AddressesBound++
	return b.AddressBinder.Bind(dev, addr)
}

func (b *countedBinder) Unbind(dev, addr string) error {
	b.c.AddressesUnbound++
	return b.AddressBinder.Unbind(dev, addr)
}
