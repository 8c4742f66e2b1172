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
	pending map[gtKey]gtEntry
	timer   clock.Timer
}

type gtEntry struct {
	vs VirtualServer
	rs RealServer
}

// gtKey identifies a draining real server: its virtual server's key fields
// and its own. InProgress runs for every wanted real server at every sync, so
// no text is built for it.
type gtKey struct {
	proto, vsAddr string
	vsPort        uint16
	rsAddr        string
	rsPort        uint16
}

func keyOf(vs VirtualServer, rs RealServer) gtKey {
	return gtKey{proto: vs.Protocol, vsAddr: vs.Address, vsPort: vs.Port, rsAddr: rs.Address, rsPort: rs.Port}
}

// NewGracefulTerminationManager starts the periodic check on clk.
func NewGracefulTerminationManager(h Handle, clk clock.WithDelayedExecution, observe func(Op)) *GracefulTerminationManager {
	if observe == nil {
		observe = func(Op) {}
	}
	m := &GracefulTerminationManager{h: h, clock: clk, observe: observe, pending: map[gtKey]gtEntry{}}
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
	if len(m.pending) == 0 {
		return false
	}
	_, ok := m.pending[keyOf(vs, rs)]
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
	e, ok := m.pending[keyOf(vs, rs)]
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
	delete(m.pending, keyOf(vs, rs))
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
	m.pending[keyOf(vs, rs)] = gtEntry{vs: vs, rs: rs}
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
		if !d.sameAs(rs) {
			continue
		}
		if !isConnectionless(vs.Protocol) && d.ActiveConn+d.InactiveConn > 0 {
			return false, nil
		}
		err := m.h.DeleteRealServer(vs, d)
		m.observe(Op{Name: "delete-rs", Detail: rsOp(vs, rs, ""), Err: err})
		return err == nil, err
	}
	return true, fmt.Errorf("real server %s -> %s not found", vs.Key(), rs.Key())
}

// Check deletes every draining real server whose connections have closed.
func (m *GracefulTerminationManager) Check() {
	// In the order of "VS/RS" text.
	type ordered struct {
		text string
		key  gtKey
	}
	m.mu.Lock()
	keys := make([]ordered, 0, len(m.pending))
	for k, e := range m.pending {
		keys = append(keys, ordered{e.vs.Key() + "/" + e.rs.Key(), k})
	}
	m.mu.Unlock()
	sort.Slice(keys, func(i, j int) bool { return keys[i].text < keys[j].text })
	for _, o := range keys {
		k := o.key
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
