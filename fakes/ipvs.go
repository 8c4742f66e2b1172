package fakes

import (
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/proxysim/proxysim/sim/ipvs"
)

// ErrInjected is what an injected fault returns.
var ErrInjected = errors.New("injected dataplane fault")

// IPVS is an in-memory IPVS table: virtual servers and their real servers,
// with connection counters that tests (and the connection model) set.
type IPVS struct {
	mu       sync.Mutex
	services map[string]*fakeVS
	timeouts ipvs.Timeouts
	failNext int
}

type fakeVS struct {
	vs   ipvs.VirtualServer
	dsts map[string]*ipvs.RealServer
}

var _ ipvs.Handle = (*IPVS)(nil)

// NewIPVS returns an empty table.
func NewIPVS() *IPVS { return &IPVS{services: map[string]*fakeVS{}} }

// FailNext makes the next n write operations fail with ErrInjected.
func (f *IPVS) FailNext(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failNext = n
}

func (f *IPVS) fault() error {
	if f.failNext > 0 {
		f.failNext--
		return ErrInjected
	}
	return nil
}

func (f *IPVS) VirtualServers() ([]ipvs.VirtualServer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]ipvs.VirtualServer, 0, len(f.services))
	for _, s := range f.services {
		out = append(out, s.vs)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key() < out[j].Key() })
	return out, nil
}

func (f *IPVS) AddVirtualServer(vs ipvs.VirtualServer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fault(); err != nil {
		return err
	}
	if _, ok := f.services[vs.Key()]; ok {
		return fmt.Errorf("virtual server %s: file exists", vs.Key())
	}
	f.services[vs.Key()] = &fakeVS{vs: vs, dsts: map[string]*ipvs.RealServer{}}
	return nil
}

func (f *IPVS) UpdateVirtualServer(vs ipvs.VirtualServer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fault(); err != nil {
		return err
	}
	s, ok := f.services[vs.Key()]
	if !ok {
		return fmt.Errorf("virtual server %s: no such process", vs.Key())
	}
	s.vs = vs
	return nil
}

func (f *IPVS) DeleteVirtualServer(vs ipvs.VirtualServer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fault(); err != nil {
		return err
	}
	if _, ok := f.services[vs.Key()]; !ok {
		return fmt.Errorf("virtual server %s: no such process", vs.Key())
	}
	delete(f.services, vs.Key())
	return nil
}

func (f *IPVS) RealServers(vs ipvs.VirtualServer) ([]ipvs.RealServer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.services[vs.Key()]
	if !ok {
		return nil, fmt.Errorf("virtual server %s: no such process", vs.Key())
	}
	out := make([]ipvs.RealServer, 0, len(s.dsts))
	for _, d := range s.dsts {
		out = append(out, *d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key() < out[j].Key() })
	return out, nil
}

func (f *IPVS) AddRealServer(vs ipvs.VirtualServer, rs ipvs.RealServer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fault(); err != nil {
		return err
	}
	s, ok := f.services[vs.Key()]
	if !ok {
		return fmt.Errorf("virtual server %s: no such process", vs.Key())
	}
	if _, dup := s.dsts[rs.Key()]; dup {
		return fmt.Errorf("real server %s: file exists", rs.Key())
	}
	rs.ActiveConn, rs.InactiveConn = 0, 0
	s.dsts[rs.Key()] = &rs
	return nil
}

func (f *IPVS) UpdateRealServer(vs ipvs.VirtualServer, rs ipvs.RealServer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fault(); err != nil {
		return err
	}
	d, err := f.dst(vs, rs)
	if err != nil {
		return err
	}
	d.Weight = rs.Weight
	return nil
}

func (f *IPVS) DeleteRealServer(vs ipvs.VirtualServer, rs ipvs.RealServer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fault(); err != nil {
		return err
	}
	if _, err := f.dst(vs, rs); err != nil {
		return err
	}
	delete(f.services[vs.Key()].dsts, rs.Key())
	return nil
}

func (f *IPVS) dst(vs ipvs.VirtualServer, rs ipvs.RealServer) (*ipvs.RealServer, error) {
	s, ok := f.services[vs.Key()]
	if !ok {
		return nil, fmt.Errorf("virtual server %s: no such process", vs.Key())
	}
	d, ok := s.dsts[rs.Key()]
	if !ok {
		return nil, fmt.Errorf("real server %s: no such process", rs.Key())
	}
	return d, nil
}

func (f *IPVS) SetTimeouts(t ipvs.Timeouts) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fault(); err != nil {
		return err
	}
	f.timeouts = t
	return nil
}

// SetConnections sets a real server's connection counters, as traffic would.
func (f *IPVS) SetConnections(vsKey, rsKey string, active, inactive int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.services[vsKey]
	if !ok {
		return fmt.Errorf("no virtual server %s", vsKey)
	}
	d, ok := s.dsts[rsKey]
	if !ok {
		return fmt.Errorf("no real server %s in %s", rsKey, vsKey)
	}
	d.ActiveConn, d.InactiveConn = active, inactive
	return nil
}
