package sim

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/proxysim/proxysim/sim/proxy"
)

// A light node's sync work: what its mode's proxier would report for each
// sync, computed without a proxier (docs/cluster.md, "A light node's
// work"). A work-based cost (a cost profile) needs it.
//
// A sync's work depends on the mode's rule for full syncs, on the sizes at
// the sync and, for a partial sync, on which Services changed since the
// node's last sync and on what its dataplane holds. The cluster keeps one
// log of every Service's states over the stream of events (ServiceState,
// one per change, shared by every node); a node's LightWorker keeps what
// its dataplane holds as a few numbers, and works out each sync from the
// Services that changed between the stream positions of its last sync and
// of this one.

// ServiceState is one Service's state from a position of the stream of
// events on: its ports as the proxy holds them and each port's endpoints
// (converted for no node: IsLocal is false). Shared by every node: never
// change it.
type ServiceState struct {
	Name types.NamespacedName
	// At is the stream position (events heard) from which this state holds.
	At    int
	Ports []ServicePortState
	// Endpoints counts the endpoints of its ports, as kube-proxy's
	// large-cluster threshold counts them.
	Endpoints int
	// Memo is the mode's to keep what it worked out from this state (the
	// same for many nodes).
	Memo any
}

// SyncStateOf is the state a proxier's sync sees of this Service alone
// on node (empty: a node holding none of its endpoints) in zone: its
// endpoints marked local where they are on node, their node hints
// dropped when the node's endpoint conversion ignores them. The shared
// endpoints are copied, never changed.
func (s *ServiceState) SyncStateOf(node, zone string, noNodeHints bool) *proxy.SyncState {
	st := &proxy.SyncState{Services: proxy.ServiceMap{}, Endpoints: proxy.EndpointsMap{}, NodeName: node, Zone: zone}
	for _, p := range s.Ports {
		st.Services[p.Name] = p.Port
		eps := p.Endpoints
		if node != "" {
			eps = make([]*proxy.Endpoint, len(p.Endpoints))
			for i, e := range p.Endpoints {
				c := *e
				c.IsLocal = c.NodeName == node
				if noNodeHints {
					c.NodeHints = nil
				}
				eps[i] = &c
			}
		}
		if len(eps) > 0 {
			st.Endpoints[p.Name] = eps
		}
	}
	return st
}

// ServicePortState is one port of a ServiceState.
type ServicePortState struct {
	Name      proxy.ServicePortName
	Port      *proxy.ServicePort
	Endpoints []*proxy.Endpoint
}

// Gone says the Service has no ports (deleted, or never had any).
func (s *ServiceState) Gone() bool { return s == nil || len(s.Ports) == 0 }

// LightSync is one sync of a light node that reached its proxier, as a
// LightWorker sees it.
type LightSync struct {
	// Now is the sync's start (when the proxier computes it).
	Now time.Time
	// Heard is the stream position the sync applies; Applied the position
	// the node's previous sync that reached its proxier applied (-1 when
	// none did: a new node).
	Heard, Applied int
	// Changed lists the Services a partial sync rewrites (kube-proxy's
	// changed services: a net change of its ports, or an EndpointSlice
	// change heard), sorted.
	Changed []types.NamespacedName
	// Touched lists every Service whose state may differ between Applied
	// and Heard (Changed included), sorted.
	Touched []types.NamespacedName
	// LargeEndpoints is the endpoints of every Service port at Heard
	// (kube-proxy's large-cluster count).
	LargeEndpoints int
	c              *cluster
}

// At is a Service's state at stream position h (nil: none then).
func (s *LightSync) At(name types.NamespacedName, h int) *ServiceState {
	return s.c.svcAt(name, h)
}

// SharedFrontend is "" unless, at some point of the stream so far, two
// Service ports held the same frontend: a ClusterIP (two Services), an
// IP, protocol and port, or a protocol and node port. It then says which.
// A mode whose dataplane keys sets by frontend (nftables) cannot tell one
// Service's elements from another's then.
func (s *LightSync) SharedFrontend() string { return s.c.sharedFrontend }

// Each calls f with every Service's state at Heard that has ports.
func (s *LightSync) Each(f func(*ServiceState)) {
	for name := range s.c.svcLog {
		if st := s.c.svcAt(name, s.Heard); !st.Gone() {
			f(st)
		}
	}
}

// LightWorker computes a light node's sync work as its mode's proxier
// would report it, keeping only a few numbers per node.
type LightWorker interface {
	// Sync returns the work of one sync that reached the proxier (the mode
	// section and Full; the world fills the sizes), or an error when it
	// cannot be exact.
	Sync(s *LightSync) (SyncWork, error)
	// Restart is a new proxier over the same dataplane.
	Restart()
}

// LightWorkFor builds a light node's LightWorker (NodeSpec.LightWork).
type LightWorkFor func(node, zone string) (LightWorker, error)

// lightWork is a light node's part of the above.
type lightWork struct {
	w       LightWorker
	applied int // the stream position its last sync reaching the proxier applied; -1 none
}

// recordVersions takes the reference proxier's sync state after an event:
// a new ServiceState for every Service it changed.
func (c *cluster) recordVersions(st *proxy.SyncState) {
	if !c.versions {
		return
	}
	seen := map[types.NamespacedName]bool{}
	for _, l := range [][]types.NamespacedName{st.ServiceChanges.Updated, st.EndpointsChanges.Updated} {
		for _, name := range l {
			if seen[name] {
				continue
			}
			seen[name] = true
			ns := &ServiceState{Name: name, At: c.head}
			for _, spn := range st.PortsOf(name) {
				eps := st.Endpoints[spn]
				ns.Ports = append(ns.Ports, ServicePortState{Name: spn, Port: st.Services[spn], Endpoints: eps})
				ns.Endpoints += len(eps)
			}
			log := c.svcLog[name]
			var prev *ServiceState
			if len(log) > 0 {
				prev = log[len(log)-1]
			}
			if prev.Gone() && ns.Gone() {
				continue
			}
			c.trackFrontends(prev, ns)
			if prev != nil {
				c.largeEps -= prev.Endpoints
			}
			c.largeEps += ns.Endpoints
			if prev != nil && prev.At == ns.At {
				log[len(log)-1] = ns // the listing's, before any event
			} else {
				c.svcLog[name] = append(log, ns)
			}
		}
	}
}

// trackFrontends moves a Service's frontends from its state prev to cur in
// the index of the frontends held at the head, noting the first one held
// twice (SharedFrontend).
func (c *cluster) trackFrontends(prev, cur *ServiceState) {
	if c.frontends == nil {
		c.frontends = map[string]types.NamespacedName{}
	}
	if prev != nil {
		for _, k := range frontendsOf(prev, nil) {
			if c.frontends[k] == prev.Name {
				delete(c.frontends, k)
			}
		}
	}
	if cur == nil {
		return
	}
	for _, k := range frontendsOf(cur, func(k string) {
		if c.sharedFrontend == "" {
			c.sharedFrontend = fmt.Sprintf("Service %s holds %s twice (after %d events)", cur.Name, k, cur.At)
		}
	}) {
		if o, ok := c.frontends[k]; ok && o != cur.Name && c.sharedFrontend == "" {
			c.sharedFrontend = fmt.Sprintf("Services %s and %s both hold %s (after %d events)", o, cur.Name, k, cur.At)
		}
		c.frontends[k] = cur.Name
	}
}

// frontendsOf lists a Service state's frontends, each once; twice is
// called with one its ports hold twice (a ClusterIP aside: each port has
// it).
func frontendsOf(s *ServiceState, twice func(string)) []string {
	seen := map[string]bool{}
	var out []string
	add := func(k string, once bool) {
		if seen[k] {
			if once && twice != nil {
				twice(k)
			}
			return
		}
		seen[k] = true
		out = append(out, k)
	}
	for _, p := range s.Ports {
		sp := p.Port
		port := "/" + string(sp.Protocol) + "/" + strconv.Itoa(int(sp.Port))
		ip := sp.ClusterIP.String()
		add("ClusterIP "+ip, false)
		add(ip+port, true)
		for _, e := range sp.ExternalIPs {
			add(e+port, true)
		}
		for _, l := range sp.LoadBalancerIPs {
			add(l+port, true)
		}
		if sp.NodePort != 0 {
			add("node port "+string(sp.Protocol)+"/"+strconv.Itoa(int(sp.NodePort)), true)
		}
	}
	return out
}

// LightWorkErr is the first error a light node's worker met working out a
// sync's work (it could not be exact): the run's results are then wrong.
func (w *World) LightWorkErr() error {
	if w.cluster == nil {
		return nil
	}
	return w.cluster.lightErr
}

// svcAt is a Service's state at stream position h.
func (c *cluster) svcAt(name types.NamespacedName, h int) *ServiceState {
	log := c.svcLog[name]
	i, found := slices.BinarySearchFunc(log, h, func(s *ServiceState, h int) int { return s.At - h })
	if found {
		return log[i]
	}
	if i == 0 {
		return nil
	}
	return log[i-1]
}

// trimVersions lets go of the states no node can ask for: those replaced
// before every light worker's applied position. It looks every 1,024
// events (a walk over the Services and the nodes).
func (c *cluster) trimVersions() {
	if !c.versions || c.head < c.versionsTrimmedAt+1024 {
		return
	}
	c.versionsTrimmedAt = c.head
	low := c.lowestApplied(c.head)
	for name, log := range c.svcLog {
		i, found := slices.BinarySearchFunc(log, low, func(s *ServiceState, h int) int { return s.At - h })
		if !found {
			i--
		}
		if i <= 0 {
			continue
		}
		if i == len(log)-1 && log[i].Gone() {
			delete(c.svcLog, name)
			continue
		}
		c.svcLog[name] = slices.Clone(log[i:])
	}
}

// lowestApplied is the earliest stream position a light worker still
// reads events from.
func (c *cluster) lowestApplied(low int) int {
	for _, n := range c.nodes {
		if n.lw != nil && n.lw.applied >= 0 {
			low = min(low, n.lw.applied)
		}
	}
	if c.own != nil && c.own.applied >= 0 {
		low = min(low, c.own.applied)
	}
	return low
}

// lightWorkSync works out a light node's sync that reaches its proxier:
// the Services touched and changed since its last one, then its worker's
// work.
func (n *Node) lightWorkSync() SyncWork {
	work := SyncWork{ServicePorts: n.size[0], Endpoints: n.size[1]}
	if n.lw == nil {
		return work
	}
	return n.c.lightWorkAt(n.lw, n.heard, n.spec.Name, work)
}

// lightWorkAt is the work of a sync by lw's node that applies the stream
// up to heard, whose sizes are work's.
func (c *cluster) lightWorkAt(lw *lightWork, heard int, node string, work SyncWork) SyncWork {
	s := &LightSync{Now: c.w.Clock.Now(), Heard: heard, Applied: lw.applied, c: c}
	s.LargeEndpoints = c.largeAt(heard)
	if s.Applied >= 0 {
		touched, changed := map[types.NamespacedName]bool{}, map[types.NamespacedName]bool{}
		for i := s.Applied; i < s.Heard; i++ {
			se := &c.stream[i-c.base]
			if se.svcName.Name == "" {
				continue
			}
			touched[se.svcName] = true
			if se.sliceChanged {
				changed[se.svcName] = true
			}
		}
		for name := range touched {
			old, cur := c.svcAt(name, s.Applied), c.svcAt(name, s.Heard)
			if old == cur {
				delete(changed, name)
				delete(touched, name)
				continue
			}
			if !samePorts(old, cur) {
				changed[name] = true
			}
		}
		s.Touched = sortedNames(touched)
		s.Changed = sortedNames(changed)
	}
	w, err := lw.w.Sync(s)
	if err != nil {
		err = fmt.Errorf("node %s: %w", node, err)
		c.w.keep(err)
		if c.lightErr == nil {
			c.lightErr = err
		}
	}
	lw.applied = heard
	w.ServicePorts, w.Endpoints = work.ServicePorts, work.Endpoints
	return w
}

// samePorts says whether two states of a Service have the same ports, as
// kube-proxy's Service change tracker compares them.
func samePorts(a, b *ServiceState) bool {
	var pa, pb []ServicePortState
	if a != nil {
		pa = a.Ports
	}
	if b != nil {
		pb = b.Ports
	}
	if len(pa) != len(pb) {
		return false
	}
	for i := range pa {
		if pa[i].Name != pb[i].Name || !reflect.DeepEqual(pa[i].Port, pb[i].Port) {
			return false
		}
	}
	return true
}

func sortedNames(m map[types.NamespacedName]bool) []types.NamespacedName {
	out := make([]types.NamespacedName, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.SortFunc(out, proxy.CompareNames)
	return out
}

// largeAt is kube-proxy's large-cluster count after k events.
func (c *cluster) largeAt(k int) int {
	if k == 0 {
		return c.initialLarge
	}
	return c.stream[k-1-c.base].largeEps
}
