package proxy

import (
	"net"
	"reflect"
	"sort"
	"sync"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Endpoint is one backend of one service port.
type Endpoint struct {
	IP          string
	Port        int32
	Ready       bool
	Serving     bool
	Terminating bool
	NodeName    string
	Zone        string
	ZoneHints   []string
	NodeHints   []string
	IsLocal     bool
}

// String is the endpoint's IP:port, its identity within a service port.
func (e *Endpoint) String() string { return HostPort(e.IP, e.Port) }

// EndpointsMap is the applied endpoint state of a proxier.
type EndpointsMap map[ServicePortName][]*Endpoint

// sliceData is one EndpointSlice, reduced to what the proxy uses.
type sliceData struct {
	remove bool
	ports  map[ServicePortName][]*Endpoint
}

type serviceSlices struct {
	applied map[string]*sliceData
	pending map[string]*sliceData
}

// EndpointSliceTracker batches EndpointSlice changes between syncs. Slices
// are grouped by the service they belong to and keyed by slice name; each has
// an applied copy (as of the last sync) and a pending one.
type EndpointSliceTracker struct {
	family   Family
	nodeName string
	mu       sync.Mutex
	services map[types.NamespacedName]*serviceSlices
	dirty    map[types.NamespacedName]bool // services with pending slices
}

// NewEndpointSliceTracker returns a tracker for one IP family on one node.
func NewEndpointSliceTracker(family Family, nodeName string) *EndpointSliceTracker {
	return &EndpointSliceTracker{family: family, nodeName: nodeName, services: map[types.NamespacedName]*serviceSlices{}, dirty: map[types.NamespacedName]bool{}}
}

func (t *EndpointSliceTracker) addressType() discovery.AddressType {
	if t.family == v1.IPv6Protocol {
		return discovery.AddressTypeIPv6
	}
	return discovery.AddressTypeIPv4
}

// Update records a slice added or changed (remove false) or deleted (remove
// true) and reports whether that changed anything pending.
func (t *EndpointSliceTracker) Update(slice *discovery.EndpointSlice, remove bool) (bool, error) {
	if slice.AddressType != t.addressType() {
		return false, nil
	}
	svcName := slice.Labels[discovery.LabelServiceName]
	if svcName == "" {
		return false, ErrNoServiceName
	}
	key := types.NamespacedName{Namespace: slice.Namespace, Name: svcName}
	data := &sliceData{remove: remove}
	if !remove {
		data.ports = t.convert(slice, key)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	ss, ok := t.services[key]
	if !ok {
		ss = &serviceSlices{applied: map[string]*sliceData{}, pending: map[string]*sliceData{}}
		t.services[key] = ss
	}
	known, inPending := ss.pending[slice.Name]
	if !inPending {
		known = ss.applied[slice.Name]
	}
	switch {
	case known == nil && remove:
		return false, nil // deleting a slice we never had
	case known != nil && reflect.DeepEqual(known, data):
		return false, nil
	}
	ss.pending[slice.Name] = data
	t.dirty[key] = true
	return true, nil
}

func (t *EndpointSliceTracker) convert(slice *discovery.EndpointSlice, svc types.NamespacedName) map[ServicePortName][]*Endpoint {
	out := map[ServicePortName][]*Endpoint{}
	for _, port := range slice.Ports {
		if port.Port == nil {
			continue
		}
		name := ""
		if port.Name != nil {
			name = *port.Name
		}
		proto := v1.ProtocolTCP
		if port.Protocol != nil {
			proto = *port.Protocol
		}
		spn := ServicePortName{NamespacedName: svc, Port: name, Protocol: proto}
		var eps []*Endpoint
		for i := range slice.Endpoints {
			ep := &slice.Endpoints[i]
			if len(ep.Addresses) == 0 || net.ParseIP(ep.Addresses[0]) == nil {
				continue
			}
			e := &Endpoint{
				IP:          ep.Addresses[0],
				Port:        *port.Port,
				Ready:       ep.Conditions.Ready == nil || *ep.Conditions.Ready,
				Serving:     ep.Conditions.Serving == nil || *ep.Conditions.Serving,
				Terminating: ep.Conditions.Terminating != nil && *ep.Conditions.Terminating,
			}
			if ep.NodeName != nil {
				e.NodeName = *ep.NodeName
				e.IsLocal = e.NodeName == t.nodeName
			}
			if ep.Zone != nil {
				e.Zone = *ep.Zone
			}
			if h := ep.Hints; h != nil {
				for _, z := range h.ForZones {
					e.ZoneHints = append(e.ZoneHints, z.Name)
				}
				for _, n := range h.ForNodes {
					e.NodeHints = append(e.NodeHints, n.Name)
				}
			}
			eps = append(eps, e)
		}
		out[spn] = dedupSorted(eps)
	}
	return out
}

// Pending reports how many services have slice changes waiting.
func (t *EndpointSliceTracker) Pending() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.dirty)
}

type endpointsChange struct {
	previous, current EndpointsMap
}

// checkout applies every pending slice to the applied copies and returns, per
// service, its endpoints before and after.
func (t *EndpointSliceTracker) checkout() map[types.NamespacedName]endpointsChange {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[types.NamespacedName]endpointsChange{}
	for name := range t.dirty {
		ss := t.services[name]
		prev := merge(ss.applied)
		for slice, d := range ss.pending {
			if d.remove {
				delete(ss.applied, slice)
			} else {
				ss.applied[slice] = d
			}
		}
		ss.pending = map[string]*sliceData{}
		out[name] = endpointsChange{previous: prev, current: merge(ss.applied)}
		if len(ss.applied) == 0 {
			delete(t.services, name)
		}
	}
	t.dirty = map[types.NamespacedName]bool{}
	return out
}

// merge joins a service's slices, in slice-name order. An endpoint listed in
// more than one slice appears once, preferring a copy that is not
// terminating.
func merge(slices map[string]*sliceData) EndpointsMap {
	if len(slices) == 1 {
		// The common case: one slice, whose endpoint lists are sorted at
		// conversion and never mutated, so they can be shared.
		for _, d := range slices {
			out := make(EndpointsMap, len(d.ports))
			for spn, eps := range d.ports {
				if len(eps) > 0 {
					out[spn] = eps
				}
			}
			return out
		}
	}
	names := make([]string, 0, len(slices))
	for n := range slices {
		names = append(names, n)
	}
	sort.Strings(names)
	out := EndpointsMap{}
	index := map[ServicePortName]map[string]int{}
	for _, n := range names {
		for spn, eps := range slices[n].ports {
			if index[spn] == nil {
				index[spn] = map[string]int{}
				if _, ok := out[spn]; !ok {
					out[spn] = nil
				}
			}
			for _, e := range eps {
				k := e.String()
				if i, dup := index[spn][k]; dup {
					if out[spn][i].Terminating && !e.Terminating {
						out[spn][i] = e
					}
					continue
				}
				index[spn][k] = len(out[spn])
				out[spn] = append(out[spn], e)
			}
		}
	}
	for spn, eps := range out {
		if len(eps) == 0 {
			delete(out, spn)
			continue
		}
		sort.SliceStable(eps, func(i, j int) bool { return lessEndpoint(eps[i], eps[j]) })
	}
	return out
}

// dedupSorted sorts endpoints by address and keeps one per IP:port,
// preferring a copy that is not terminating.
func dedupSorted(eps []*Endpoint) []*Endpoint {
	sort.SliceStable(eps, func(i, j int) bool { return lessEndpoint(eps[i], eps[j]) })
	out := eps[:0]
	for _, e := range eps {
		if n := len(out); n > 0 && out[n-1].String() == e.String() {
			if out[n-1].Terminating && !e.Terminating {
				out[n-1] = e
			}
			continue
		}
		out = append(out, e)
	}
	return out
}

func lessEndpoint(a, b *Endpoint) bool {
	ai, bi := net.ParseIP(a.IP), net.ParseIP(b.IP)
	if c := compareIP(ai, bi); c != 0 {
		return c < 0
	}
	return a.Port < b.Port
}

func compareIP(a, b net.IP) int {
	a16, b16 := a.To16(), b.To16()
	for i := range a16 {
		if a16[i] != b16[i] {
			if a16[i] < b16[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}

// EndpointsMapResult says what an Update of an EndpointsMap changed.
type EndpointsMapResult struct {
	// Updated lists the services whose endpoints changed, sorted.
	Updated []types.NamespacedName
}

// Update applies the tracker's pending changes, replacing each changed
// service's endpoints wholesale.
func (m EndpointsMap) Update(t *EndpointSliceTracker) EndpointsMapResult {
	var res EndpointsMapResult
	for name, ch := range t.checkout() {
		if reflect.DeepEqual(ch.previous, ch.current) {
			continue
		}
		res.Updated = append(res.Updated, name)
		for spn := range ch.previous {
			delete(m, spn)
		}
		for spn, eps := range ch.current {
			m[spn] = eps
		}
	}
	sort.Slice(res.Updated, func(i, j int) bool { return res.Updated[i].String() < res.Updated[j].String() })
	return res
}
