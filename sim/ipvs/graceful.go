package ipvs

import (
	"fmt"
	"sort"
	"sync"

	"k8s.io/utils/clock"
)

// GracefulTerminationManager drains real servers that must go. A real server
// of a connectionless protocol, or one with no connections, is deleted at
// once; any other is set to weight 0, so new connections avoid it, and checked
// every CheckInterval until its connections reach zero. There is no hard
// timeout.
type GracefulTerminationManager struct {
	h       Handle
	clock   clock.WithDelayedExecution
	observe func(Op)

	mu      sync.Mutex
	pending map[string]gtEntry
	timer   clock.Timer
}

type gtEntry struct {
	vs VirtualServer
	rs RealServer
}

func gtKey(vs VirtualServer, rs RealServer) string { return vs.Key() + "/" + rs.Key() }

// NewGracefulTerminationManager starts the periodic check on clk.
func NewGracefulTerminationManager(h Handle, clk clock.WithDelayedExecution, observe func(Op)) *GracefulTerminationManager {
	if observe == nil {
		observe = func(Op) {}
	}
	m := &GracefulTerminationManager{h: h, clock: clk, observe: observe, pending: map[string]gtEntry{}}
	m.timer = clk.AfterFunc(CheckInterval, m.tick)
	return m
}

func (m *GracefulTerminationManager) tick() {
	m.Check()
	m.mu.Lock()
	m.timer = m.clock.AfterFunc(CheckInterval, m.tick)
	m.mu.Unlock()
}

// Stop ends the periodic check.
func (m *GracefulTerminationManager) Stop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.timer != nil {
		m.timer.Stop()
	}
}

// InProgress reports whether rs of vs is draining.
func (m *GracefulTerminationManager) InProgress(vs VirtualServer, rs RealServer) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.pending[gtKey(vs, rs)]
	return ok
}

// Pending lists the draining real servers as "VS -> RS", sorted.
func (m *GracefulTerminationManager) Pending() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, 0, len(m.pending))
	for _, e := range m.pending {
		out = append(out, e.vs.Key()+" -> "+e.rs.Key())
	}
	sort.Strings(out)
	return out
}

// Cancel takes rs out of graceful termination because its endpoint came
// back: the draining real server is deleted now (the caller re-adds it at
// weight 1). If the delete fails, rs stays listed and the error is returned.
func (m *GracefulTerminationManager) Cancel(vs VirtualServer, rs RealServer) error {
	m.mu.Lock()
	e, ok := m.pending[gtKey(vs, rs)]
	m.mu.Unlock()
	if !ok {
		return fmt.Errorf("%s -> %s is not draining", vs.Key(), rs.Key())
	}
	err := m.h.DeleteRealServer(e.vs, e.rs)
	m.observe(Op{Name: "delete-rs", Detail: fmt.Sprintf("%s -> %s (returned while draining)", vs.Key(), rs.Key()), Err: err})
	if err != nil {
		return err
	}
	m.mu.Lock()
	delete(m.pending, gtKey(vs, rs))
	m.mu.Unlock()
	return nil
}

// Delete removes rs from vs now if it may go (a connectionless protocol, or
// no connections left), else sets its weight to 0 and drains it.
func (m *GracefulTerminationManager) Delete(vs VirtualServer, rs RealServer) error {
	if m.InProgress(vs, rs) {
		return nil
	}
	if gone, _ := m.tryDelete(vs, rs); gone {
		return nil
	}
	quiet := rs
	quiet.Weight = 0
	err := m.h.UpdateRealServer(vs, quiet)
	m.observe(Op{Name: "update-rs", Detail: fmt.Sprintf("%s -> %s weight 0 (draining)", vs.Key(), rs.Key()), Err: err})
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.pending[gtKey(vs, rs)] = gtEntry{vs: vs, rs: rs}
	m.mu.Unlock()
	return nil
}

// tryDelete deletes rs if it may go and reports whether it is gone. As in
// kube-proxy, a real server that is no longer there counts as gone (with an
// error), while a virtual server that cannot be listed keeps the entry.
func (m *GracefulTerminationManager) tryDelete(vs VirtualServer, rs RealServer) (bool, error) {
	dsts, err := m.h.RealServers(vs)
	if err != nil {
		return false, err
	}
	for _, d := range dsts {
		if d.Key() != rs.Key() {
			continue
		}
		if !isConnectionless(vs.Protocol) && d.ActiveConn+d.InactiveConn > 0 {
			return false, nil
		}
		err := m.h.DeleteRealServer(vs, d)
		m.observe(Op{Name: "delete-rs", Detail: vs.Key() + " -> " + rs.Key(), Err: err})
		return err == nil, err
	}
	return true, fmt.Errorf("real server %s -> %s not found", vs.Key(), rs.Key())
}

// Check deletes every draining real server whose connections have closed.
func (m *GracefulTerminationManager) Check() {
	m.mu.Lock()
	keys := make([]string, 0, len(m.pending))
	for k := range m.pending {
		keys = append(keys, k)
	}
	m.mu.Unlock()
	sort.Strings(keys)
	for _, k := range keys {
		m.mu.Lock()
		e, ok := m.pending[k]
		m.mu.Unlock()
		if !ok {
			continue
		}
		if gone, _ := m.tryDelete(e.vs, e.rs); gone {
			m.mu.Lock()
			delete(m.pending, k)
			m.mu.Unlock()
		}
	}
}
