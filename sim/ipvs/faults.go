package ipvs

import (
	"errors"

	"github.com/proxysim/proxysim/sim"
)

// ErrInjected is what an injected dataplane fault returns.
var ErrInjected = errors.New("injected dataplane fault")

// Faults makes the next N dataplane write operations fail, whatever the
// dataplane is.
type Faults struct {
	armed sim.ArmedFailures
}

// FailNext arms n failures, replacing any left.
func (f *Faults) FailNext(n int) { f.armed.Set(n) }

func (f *Faults) take() error {
	if f.armed.Take() {
		return ErrInjected
	}
	return nil
}

// WithFaults returns dp with every write operation passing through f.
func WithFaults(dp Dataplane, f *Faults) Dataplane {
	dp.IPVS = faultyHandle{dp.IPVS, f}
	dp.Addresses = faultyBinder{dp.Addresses, f}
	return dp
}

type faultyHandle struct {
	Handle
	f *Faults
}

func (h faultyHandle) AddVirtualServer(vs VirtualServer) error {
	if err := h.f.take(); err != nil {
		return err
	}
	return h.Handle.AddVirtualServer(vs)
}

func (h faultyHandle) UpdateVirtualServer(vs VirtualServer) error {
	if err := h.f.take(); err != nil {
		return err
	}
	return h.Handle.UpdateVirtualServer(vs)
}

func (h faultyHandle) DeleteVirtualServer(vs VirtualServer) error {
	if err := h.f.take(); err != nil {
		return err
	}
	return h.Handle.DeleteVirtualServer(vs)
}

func (h faultyHandle) AddRealServer(vs VirtualServer, rs RealServer) error {
	if err := h.f.take(); err != nil {
		return err
	}
	return h.Handle.AddRealServer(vs, rs)
}

func (h faultyHandle) UpdateRealServer(vs VirtualServer, rs RealServer) error {
	if err := h.f.take(); err != nil {
		return err
	}
	return h.Handle.UpdateRealServer(vs, rs)
}

func (h faultyHandle) DeleteRealServer(vs VirtualServer, rs RealServer) error {
	if err := h.f.take(); err != nil {
		return err
	}
	return h.Handle.DeleteRealServer(vs, rs)
}

type faultyBinder struct {
	AddressBinder
	f *Faults
}

func (b faultyBinder) Bind(dev, addr string) error {
	if err := b.f.take(); err != nil {
		return err
	}
	return b.AddressBinder.Bind(dev, addr)
}

func (b faultyBinder) Unbind(dev, addr string) error {
	if err := b.f.take(); err != nil {
		return err
	}
	return b.AddressBinder.Unbind(dev, addr)
}
