package ipvs

import (
	"github.com/proxysim/proxysim/sim"
)

// countingHandle and countingBinder count the proxier's netlink calls into
// the work of the sync under way (nil between syncs: the startup sysctls
// and timeouts, and the graceful termination manager's periodic check,
// belong to no sync).
type countingHandle struct {
	Handle
	work **sim.IPVSWork
}

type countingBinder struct {
	AddressBinder
	work **sim.IPVSWork
}

// counted wraps dp's IPVS handle and address binder so that p's syncs
// count their calls.
func (p *Proxier) counted(dp Dataplane) Dataplane {
	dp.IPVS = countingHandle{dp.IPVS, &p.cur}
	dp.Addresses = countingBinder{dp.Addresses, &p.cur}
	return dp
}

func (h countingHandle) count(f func(w *sim.IPVSWork)) {
	if *h.work != nil {
		f(*h.work)
	}
}

func (h countingHandle) VirtualServers() ([]VirtualServer, error) {
	l, err := h.Handle.VirtualServers()
	h.count(func(w *sim.IPVSWork) { w.VirtualServerListings++; w.VirtualServersListed += len(l) })
	return l, err
}

func (h countingHandle) AddVirtualServer(vs VirtualServer) error {
	h.count(func(w *sim.IPVSWork) { w.VirtualServersAdded++ })
	return h.Handle.AddVirtualServer(vs)
}

func (h countingHandle) UpdateVirtualServer(vs VirtualServer) error {
	h.count(func(w *sim.IPVSWork) { w.VirtualServersUpdated++ })
	return h.Handle.UpdateVirtualServer(vs)
}

func (h countingHandle) DeleteVirtualServer(vs VirtualServer) error {
	h.count(func(w *sim.IPVSWork) { w.VirtualServersDeleted++ })
	return h.Handle.DeleteVirtualServer(vs)
}

func (h countingHandle) RealServers(vs VirtualServer) ([]RealServer, error) {
	l, err := h.Handle.RealServers(vs)
	h.count(func(w *sim.IPVSWork) { w.RealServerListings++; w.RealServersListed += len(l) })
	return l, err
}

func (h countingHandle) AddRealServer(vs VirtualServer, rs RealServer) error {
	h.count(func(w *sim.IPVSWork) { w.RealServersAdded++ })
	return h.Handle.AddRealServer(vs, rs)
}

func (h countingHandle) UpdateRealServer(vs VirtualServer, rs RealServer) error {
	h.count(func(w *sim.IPVSWork) { w.RealServersUpdated++ })
	return h.Handle.UpdateRealServer(vs, rs)
}

func (h countingHandle) DeleteRealServer(vs VirtualServer, rs RealServer) error {
	h.count(func(w *sim.IPVSWork) { w.RealServersDeleted++ })
	return h.Handle.DeleteRealServer(vs, rs)
}

func (b countingBinder) count(f func(w *sim.IPVSWork)) {
	if *b.work != nil {
		f(*b.work)
	}
}

func (b countingBinder) EnsureDevice(dev string) error {
	b.count(func(w *sim.IPVSWork) { w.DeviceEnsures++ })
	return b.AddressBinder.EnsureDevice(dev)
}

func (b countingBinder) Addresses(dev string) ([]string, error) {
	l, err := b.AddressBinder.Addresses(dev)
	b.count(func(w *sim.IPVSWork) { w.AddressListings++; w.AddressesListed += len(l) })
	return l, err
}

func (b countingBinder) Bind(dev, addr string) error {
	b.count(func(w *sim.IPVSWork) { w.AddressesBound++ })
	return b.AddressBinder.Bind(dev, addr)
}

func (b countingBinder) Unbind(dev, addr string) error {
	b.count(func(w *sim.IPVSWork) { w.AddressesUnbound++ })
	return b.AddressBinder.Unbind(dev, addr)
}

// TakeSyncWork returns what the last sync wrote and read (sim.WorkReporter),
// once.
func (p *Proxier) TakeSyncWork() (sim.SyncWork, bool) {
	if p.work == nil {
		return sim.SyncWork{}, false
	}
	w := sim.SyncWork{Full: p.workFull, IPVS: p.work}
	p.work = nil
	return w, true
}

var _ sim.WorkReporter = (*Proxier)(nil)
