package proxy

import (
	"bytes"
	"cmp"
	"net/netip"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	netutils "k8s.io/utils/net"
)

// Endpoint is one backend of one service port.
type Endpoint struct {
	IP          string // canonical text form
	Port        int32
	Ready       bool
	Serving     bool
	Terminating bool
	NodeName    string
	Zone        string
	ZoneHints   []string // sorted, deduplicated
	NodeHints   []string // sorted, deduplicated
	IsLocal     bool
}

// String is the endpoint's IP:port, its identity within a service port.
func (e *Endpoint) String() string { return HostPort(e.IP, e.Port) }

// EndpointsMap is the applied endpoint state of a proxier. Each list is
// sorted by IP:port text.
type EndpointsMap map[ServicePortName][]*Endpoint

// sliceData is one EndpointSlice as last seen: the object itself, whose
// every change counts (as in kube-proxy, where a new resourceVersion alone is
// a change), and its endpoints by service port.
type sliceData struct {
	slice  *discovery.EndpointSlice
	remove bool
	ports  map[ServicePortName][]*Endpoint
}

func (d *sliceData) sameAs(o *sliceData) bool {
	if d.remove != o.remove {
		return false
	}
	// Two versions of a slice differ at least in their resourceVersion:
	// no need to walk them.
	if d.slice == o.slice {
		return true
	}
	if d.slice != nil && o.slice != nil && d.slice.ResourceVersion != o.slice.ResourceVersion {
		return false
	}
	return reflect.DeepEqual(d.slice, o.slice)
}

type serviceSlices struct {
	applied map[string]*sliceData
	pending map[string]*sliceData
	// merged is merge(applied), kept from the checkout that made it: the
	// next checkout's "before". Nil until the first checkout.
	merged EndpointsMap
}

// EndpointSliceTrackerOptions tune endpoint conversion.
type EndpointSliceTrackerOptions struct {
	// IgnoreNodeHints drops node hints, as kube-proxy did before the
	// PreferSameTrafficDistribution feature (on by default from v1.34).
	IgnoreNodeHints bool
}

// EndpointSliceTracker batches EndpointSlice changes between syncs. Slices
// are grouped by the service they belong to and keyed by slice name; each has
// an applied copy (as of the last sync) and a pending one.
type EndpointSliceTracker struct {
	family   Family
	nodeName string
	opts     EndpointSliceTrackerOptions
	mu       sync.Mutex
	services map[types.NamespacedName]*serviceSlices
	dirty    map[types.NamespacedName]bool // services with pending slices
}

// NewEndpointSliceTracker returns a tracker for one IP family on one node.
func NewEndpointSliceTracker(family Family, nodeName string, opts EndpointSliceTrackerOptions) *EndpointSliceTracker {
	return &EndpointSliceTracker{family: family, nodeName: nodeName, opts: opts,
		services: map[types.NamespacedName]*serviceSlices{}, dirty: map[types.NamespacedName]bool{}}
}

func (t *EndpointSliceTracker) addressType() discovery.AddressType {
	if t.family == v1.IPv6Protocol {
		return discovery.AddressTypeIPv6
	}
	return discovery.AddressTypeIPv4
}

// Update records a slice added or changed (remove false) or deleted (remove
// true) and reports whether that changed what is pending: a slice identical
// to the pending (else applied) copy, a slice of another address type, and
// the deletion of a slice never seen change nothing. A slice without the
// service-name label is ignored with ErrNoServiceName.
func (t *EndpointSliceTracker) Update(slice *discovery.EndpointSlice, remove bool) (bool, error) {
	if slice.AddressType != t.addressType() {
		return false, nil
	}
	svcName := slice.Labels[discovery.LabelServiceName]
	if svcName == "" || slice.Namespace == "" || slice.Name == "" {
		return false, ErrNoServiceName
	}
	key := types.NamespacedName{Namespace: slice.Namespace, Name: svcName}
	data := &sliceData{slice: slice, remove: remove}
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
	case known != nil && known.sameAs(data):
		return false, nil
	case known == nil && remove:
		return false, nil // deleting a slice we never had
	}
	if !remove {
		var prev map[ServicePortName][]*Endpoint
		if known != nil {
			prev = known.ports
		}
		data.ports = t.convert(slice, key, prev)
	}
	ss.pending[slice.Name] = data
	t.dirty[key] = true
	return true, nil
}

// convert extracts a slice's endpoints per service port. Ports without a
// name or a number are ignored, as are endpoints without an address; within
// a slice, a later copy of an endpoint replaces an earlier one unless it is
// terminating.
//
// Endpoints equal to ones of prev, the slice's previous conversion, are
// taken from it: endpoints are never modified once converted, and a change
// to a slice usually leaves most of them as they were.
func (t *EndpointSliceTracker) convert(slice *discovery.EndpointSlice, svc types.NamespacedName, prev map[ServicePortName][]*Endpoint) map[ServicePortName][]*Endpoint {
	out := map[ServicePortName][]*Endpoint{}
	for _, port := range slice.Ports {
		if port.Name == nil || port.Port == nil || *port.Port == 0 {
			continue
		}
		proto := v1.ProtocolTCP // the API server's default
		if port.Protocol != nil {
			proto = *port.Protocol
		}
		spn := ServicePortName{NamespacedName: svc, Port: *port.Name, Protocol: proto}
		out[spn] = addEndpoints(out[spn], t.endpoints(slice, *port.Port, prev[spn]))
	}
	for _, eps := range out {
		sortEndpoints(eps)
	}
	return out
}

func (t *EndpointSliceTracker) endpoints(slice *discovery.EndpointSlice, port int32, prev []*Endpoint) []*Endpoint {
	// New endpoints come from one block, with room for every endpoint from
	// the first new one on, so that it never moves.
	var block []Endpoint
	eps := make([]*Endpoint, 0, len(slice.Endpoints))
	for i := range slice.Endpoints {
		ep := &slice.Endpoints[i]
		if len(ep.Addresses) == 0 {
			continue
		}
		ip, ok := canonicalIP(ep.Addresses[0])
		if !ok {
			continue
		}
		e := Endpoint{
			IP:          ip,
			Port:        port,
			Ready:       ep.Conditions.Ready == nil || *ep.Conditions.Ready,
			Serving:     ep.Conditions.Serving == nil || *ep.Conditions.Serving,
			Terminating: ep.Conditions.Terminating != nil && *ep.Conditions.Terminating,
		}
		if ep.NodeName != nil {
			e.NodeName = *ep.NodeName
			e.IsLocal = t.nodeName != "" && e.NodeName == t.nodeName
		}
		if ep.Zone != nil {
			e.Zone = *ep.Zone
		}
		if h := ep.Hints; h != nil {
			for _, z := range h.ForZones {
				e.ZoneHints = append(e.ZoneHints, z.Name)
			}
			if !t.opts.IgnoreNodeHints {
				for _, n := range h.ForNodes {
					e.NodeHints = append(e.NodeHints, n.Name)
				}
			}
			e.ZoneHints, e.NodeHints = uniqueSorted(e.ZoneHints), uniqueSorted(e.NodeHints)
		}
		if old := findEndpoint(prev, i, ip, port); old != nil && endpointEqual(old, &e) {
			eps = append(eps, old)
			continue
		}
		if block == nil {
			block = make([]Endpoint, 0, len(slice.Endpoints)-i)
		}
		block = append(block, e)
		eps = append(eps, &block[len(block)-1])
	}
	return eps
}

// findEndpoint finds ip:port in a converted list (sorted by IP:port),
// trying position hint first.
func findEndpoint(list []*Endpoint, hint int, ip string, port int32) *Endpoint {
	if len(list) == 0 {
		return nil
	}
	if hint < len(list) && list[hint].IP == ip && list[hint].Port == port {
		return list[hint]
	}
	i, ok := slices.BinarySearchFunc(list, ip, func(e *Endpoint, ip string) int { return CompareHostPorts(e.IP, e.Port, ip, port) })
	if !ok {
		return nil
	}
	return list[i]
}

// endpointEqual reports whether two endpoints are the same in every field.
func endpointEqual(a, b *Endpoint) bool {
	return a.IP == b.IP && a.Port == b.Port && a.Ready == b.Ready && a.Serving == b.Serving &&
		a.Terminating == b.Terminating && a.NodeName == b.NodeName && a.Zone == b.Zone &&
		slices.Equal(a.ZoneHints, b.ZoneHints) && slices.Equal(a.NodeHints, b.NodeHints) && a.IsLocal == b.IsLocal
}

// canonicalIP is an address in its canonical text form. A dotted-quad IPv4
// address that netip accepts is already canonical, so the common case
// allocates nothing; anything else goes through the sloppy parser.
func canonicalIP(a string) (string, bool) {
	if ip, err := netip.ParseAddr(a); err == nil && ip.Is4() {
		return a, true
	}
	ip := netutils.ParseIPSloppy(a)
	if ip == nil {
		return "", false
	}
	return ip.String(), true
}

// sameEndpoint reports whether two endpoints have the same IP:port, their
// identity: the text form is a one-to-one function of a canonical IP and a
// port.
func sameEndpoint(a, b *Endpoint) bool { return a.IP == b.IP && a.Port == b.Port }

// compareEndpoints orders endpoints by their IP:port text.
func compareEndpoints(a, b *Endpoint) int { return CompareHostPorts(a.IP, a.Port, b.IP, b.Port) }

// CompareHostPorts orders two address:port pairs as their HostPort text
// sorts, without building it (sorts and searches of endpoints and real
// servers run at every sync).
func CompareHostPorts(ipA string, portA int32, ipB string, portB int32) int {
	if strings.IndexByte(ipA, ':') >= 0 || strings.IndexByte(ipB, ':') >= 0 {
		var x, y [64]byte
		return bytes.Compare(AppendHostPort(x[:0], ipA, portA), AppendHostPort(y[:0], ipB, portB))
	}
	n := min(len(ipA), len(ipB))
	if ipA[:n] != ipB[:n] {
		return strings.Compare(ipA[:n], ipB[:n])
	}
	// One address is a prefix of the other: the text goes on with ':' after
	// the shorter one, and with no ':' in the longer one.
	switch {
	case len(ipA) < len(ipB):
		return cmp.Compare(':', ipB[n])
	case len(ipA) > len(ipB):
		return cmp.Compare(ipA[n], ':')
	case portA == portB:
		return 0
	}
	var x, y [16]byte
	return bytes.Compare(strconv.AppendInt(x[:0], int64(portA), 10), strconv.AppendInt(y[:0], int64(portB), 10))
}

// AppendHostPort appends what HostPort (net.JoinHostPort) returns, without
// building the string.
func AppendHostPort(b []byte, ip string, port int32) []byte {
	if strings.IndexByte(ip, ':') >= 0 {
		b = append(b, '[')
		b = append(b, ip...)
		b = append(b, ']')
	} else {
		b = append(b, ip...)
	}
	b = append(b, ':')
	return strconv.AppendInt(b, int64(port), 10)
}

// addEndpoints adds eps to set, in order: a new endpoint is added; a copy of
// one already there replaces it unless the copy is terminating.
func addEndpoints(set, eps []*Endpoint) []*Endpoint {
	if len(set) == 0 && !hasDuplicates(eps) {
		return eps // the callers' lists are their own
	}
	for _, e := range eps {
		replaced := false
		for i, have := range set {
			if sameEndpoint(have, e) {
				if !e.Terminating {
					set[i] = e
				}
				replaced = true
				break
			}
		}
		if !replaced {
			set = append(set, e)
		}
	}
	return set
}

func strictlyIncreasing(eps []*Endpoint) bool {
	for i := 1; i < len(eps); i++ {
		if compareEndpoints(eps[i-1], eps[i]) >= 0 {
			return false
		}
	}
	return true
}

func hasDuplicates(eps []*Endpoint) bool {
	if strictlyIncreasing(eps) {
		return false // the usual case, answered in one pass
	}
	for i, e := range eps {
		for _, o := range eps[:i] {
			if sameEndpoint(o, e) {
				return true
			}
		}
	}
	return false
}

func uniqueSorted(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	sort.Strings(s)
	out := s[:1]
	for _, x := range s[1:] {
		if x != out[len(out)-1] {
			out = append(out, x)
		}
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
	out := make(map[types.NamespacedName]endpointsChange, len(t.dirty))
	for name := range t.dirty {
		ss := t.services[name]
		prev := ss.merged
		for slice, d := range ss.pending {
			if d.remove {
				delete(ss.applied, slice)
			} else {
				ss.applied[slice] = d
			}
		}
		clear(ss.pending)
		ss.merged = merge(ss.applied)
		out[name] = endpointsChange{previous: prev, current: ss.merged}
		if len(ss.applied) == 0 {
			delete(t.services, name)
		}
	}
	t.dirty = map[types.NamespacedName]bool{}
	return out
}

// merge joins a service's slices in slice-name order, under the same rule as
// within a slice: a later copy of an endpoint wins unless it is terminating.
// Each list comes out sorted by IP:port text.
func merge(slices map[string]*sliceData) EndpointsMap {
	if len(slices) == 1 {
		// The common case: one slice, whose lists are sorted at conversion
		// and never mutated afterwards, so they can be shared.
		for _, d := range slices {
			if !hasEmpty(d.ports) {
				return d.ports
			}
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
	for _, n := range names {
		for spn, eps := range slices[n].ports {
			out[spn] = addEndpoints(append([]*Endpoint(nil), out[spn]...), eps)
		}
	}
	for spn, eps := range out {
		if len(eps) == 0 {
			delete(out, spn)
			continue
		}
		sortEndpoints(eps)
	}
	return out
}

func hasEmpty(m map[ServicePortName][]*Endpoint) bool {
	for _, eps := range m {
		if len(eps) == 0 {
			return true
		}
	}
	return false
}

func sortEndpoints(eps []*Endpoint) {
	if !slices.IsSortedFunc(eps, compareEndpoints) {
		slices.SortFunc(eps, compareEndpoints)
	}
}

// EndpointsMapResult says what an Update of an EndpointsMap changed.
type EndpointsMapResult struct {
	// Updated lists the services that had slice changes pending, sorted
	// (their endpoints may have ended up the same).
	Updated []types.NamespacedName
}

// Update applies the tracker's pending changes, replacing each changed
// service's endpoints wholesale.
func (m EndpointsMap) Update(t *EndpointSliceTracker) EndpointsMapResult {
	res, _ := m.update(t)
	return res
}

// update is Update, also reporting by how much the number of endpoints in m
// changed.
func (m EndpointsMap) update(t *EndpointSliceTracker) (EndpointsMapResult, int) {
	var res EndpointsMapResult
	delta := 0
	for name, ch := range t.checkout() {
		res.Updated = append(res.Updated, name)
		for spn := range ch.previous {
			delta -= len(m[spn])
			delete(m, spn)
		}
		for spn, eps := range ch.current {
			delta -= len(m[spn]) // a port another service's slices named
			m[spn] = eps
			delta += len(eps)
		}
	}
	slices.SortFunc(res.Updated, CompareNames)
	return res, delta
}
