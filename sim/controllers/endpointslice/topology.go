package endpointslice

import (
	"math"
	"sort"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// overloadThreshold is how much more than its share of traffic (by its
// zone's CPU) an endpoint may get under topology-mode Auto (upstream
// topologycache.overloadThreshold). A constant, so that the expressions
// using it round exactly as upstream's do.
const overloadThreshold float64 = 0.2

// TopologyCache is what topology-mode Auto allots hints from (upstream
// k8s.io/endpointslice topologycache.TopologyCache): each zone's share of
// the ready nodes' allocatable CPU, and per Service and address type the
// number of endpoints hinted for each zone (for the overload check that
// requeues Services after node changes).
//
// Upstream ranges over maps where several answers are equally right (which
// zone gives or receives first on a tie, which receiving zone a donated
// endpoint goes to); this one takes zones in name order, which is one of
// upstream's possible outcomes.
type TopologyCache struct {
	ratios    map[string]float64 // zone -> share of CPU; nil: too little node information
	zones     []string           // the keys of ratios, sorted
	byService map[string]map[discovery.AddressType]map[string]int
}

// NewTopologyCache is an empty cache: no node information yet.
func NewTopologyCache() *TopologyCache {
	return &TopologyCache{byService: map[string]map[discovery.AddressType]map[string]int{}}
}

// SetNodes recomputes the zones' shares (upstream SetNodes). Control-plane
// nodes (node-role.kubernetes.io/control-plane or master labels) and nodes
// not Ready are left out; one counted node without a zone or allocatable
// CPU, or fewer than two zones, leaves no shares at all, so that Auto
// hints are removed everywhere.
func (t *TopologyCache) SetNodes(nodes []*v1.Node) {
	cpu := map[string]*resource.Quantity{}
	var total resource.Quantity
	sufficient := true
	for _, n := range nodes {
		if excludedNode(n) || !nodeReady(n) {
			continue
		}
		c := n.Status.Allocatable.Cpu()
		z, ok := n.Labels[v1.LabelTopologyZone]
		if !ok || z == "" || c.IsZero() {
			sufficient = false
			break
		}
		total.Add(*c)
		if q, ok := cpu[z]; ok {
			q.Add(*c)
		} else {
			cpu[z] = c
		}
	}
	t.ratios, t.zones = nil, nil
	if total.IsZero() || !sufficient || len(cpu) < 2 {
		return
	}
	t.ratios = map[string]float64{}
	for z, q := range cpu {
		t.ratios[z] = float64(q.MilliValue()) / float64(total.MilliValue())
		t.zones = append(t.zones, z)
	}
	sort.Strings(t.zones)
}

// Shares returns each zone's share of the ready nodes' CPU; nil when Auto
// hints cannot be given.
func (t *TopologyCache) Shares() map[string]float64 { return t.ratios }

func excludedNode(n *v1.Node) bool {
	_, cp := n.Labels["node-role.kubernetes.io/control-plane"]
	_, master := n.Labels["node-role.kubernetes.io/master"]
	return cp || master
}

// nodeReady is the controller's isNodeReady: a Ready condition True.
func nodeReady(n *v1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// Overloaded lists, sorted, the Services some zone of which has fewer
// endpoints hinted for it than its share allows (upstream
// GetOverloadedServices and serviceOverloaded); with no shares, every
// Service that has hints.
func (t *TopologyCache) Overloaded() []string {
	var out []string
	for k, byType := range t.byService {
		for _, perZone := range byType {
			if t.overloaded(perZone) {
				out = append(out, k)
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

func (t *TopologyCache) overloaded(perZone map[string]int) bool {
	if len(perZone) == 0 {
		return false
	}
	if len(t.ratios) == 0 {
		return true
	}
	total := 0.0
	for _, n := range perZone {
		total += float64(n)
	}
	for _, z := range t.zones {
		n, ok := perZone[z]
		if !ok || n < int(math.Ceil(total*t.ratios[z]*(1/(1+overloadThreshold)))) {
			return true
		}
	}
	return false
}

// Hinted returns, by address type, how many endpoints of a Service
// ("ns/name") are hinted for each zone under Auto (a copy; nil when
// none).
func (t *TopologyCache) Hinted(service string) map[discovery.AddressType]map[string]int {
	var out map[discovery.AddressType]map[string]int
	for at, perZone := range t.byService[service] {
		if out == nil {
			out = map[discovery.AddressType]map[string]int{}
		}
		out[at] = map[string]int{}
		for z, n := range perZone {
			out[at][z] = n
		}
	}
	return out
}

// forget drops a Service's hinted counts for one address type (upstream
// RemoveHints).
func (t *TopologyCache) forget(key string, at discovery.AddressType) {
	if m, ok := t.byService[key]; ok {
		delete(m, at)
		if len(m) == 0 {
			delete(t.byService, key)
		}
	}
}

func (t *TopologyCache) remember(key string, at discovery.AddressType, perZone map[string]int) {
	m := t.byService[key]
	if m == nil {
		m = map[discovery.AddressType]map[string]int{}
		t.byService[key] = m
	}
	m[at] = perZone
}

// allotment bounds the endpoints hinted for one zone.
type allotment struct {
	minimum, maximum int
	desired          float64
}

// allot shares n ready endpoints among the zones (upstream getAllocations):
// each zone its CPU share, at least that share shrunk by the overload
// threshold (rounded up). No allotment (ok false) with no shares, fewer
// endpoints than zones, or minimums adding up to more than n.
func (t *TopologyCache) allot(n int) (map[string]allotment, bool) {
	if t.ratios == nil || len(t.ratios) < 2 || len(t.ratios) > n {
		return nil, false
	}
	out := map[string]allotment{}
	minTotal := 0
	for _, z := range t.zones {
		desired := t.ratios[z] * float64(n)
		minimum := int(math.Ceil(desired * (1 / (1 + overloadThreshold))))
		out[z] = allotment{minimum: minimum, desired: math.Max(desired, float64(minimum))}
		minTotal += minimum
	}
	if minTotal > n {
		return nil, false
	}
	for z, a := range out {
		a.maximum = a.minimum + n - minTotal
		out[z] = a
	}
	return out, true
}

// addHints gives topology-mode Auto's hints to one address type's slices
// (upstream AddHints): every ready endpoint of a slice being written is
// first hinted for its own zone, then zones with more than their desired
// share donate endpoints to zones with less. Unchanged slices keep their
// hints while those stay valid. Hints go away everywhere when there is no
// allotment or a ready endpoint being written has no zone.
func (t *TopologyCache) addHints(key string, at discovery.AddressType, ss *sliceSet) {
	total := 0
	for _, group := range [][]*discovery.EndpointSlice{ss.create, ss.update, ss.unchanged} {
		for _, s := range group {
			for i := range s.Endpoints {
				if ready(&s.Endpoints[i]) {
					total++
				}
			}
		}
	}
	allot, ok := t.allot(total)
	if !ok {
		t.forget(key, at)
		ss.clearHints()
		return
	}
	hinted := ss.keepValidHints(allot)
	writable := append(append([]*discovery.EndpointSlice(nil), ss.create...), ss.update...)
	for _, s := range writable {
		for i := range s.Endpoints {
			e := &s.Endpoints[i]
			// Upstream means to clear a not-ready endpoint's hints but
			// clears a copy's: they stay as they were.
			if !ready(e) {
				continue
			}
			if e.Zone == nil || *e.Zone == "" {
				t.forget(key, at)
				ss.clearHints()
				return
			}
			hinted[*e.Zone]++
			e.Hints = &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: *e.Zone}}}
		}
	}
	giving, receiving := donations(allot, hinted)
	for z, d := range redistribute(writable, giving, receiving) {
		hinted[z] += d
	}
	if len(hinted) == 0 {
		t.forget(key, at)
		ss.clearHints()
		return
	}
	t.remember(key, at, hinted)
}

// keepValidHints counts the hints of the unchanged slices by zone and
// moves to the updates (as copies) those whose hints are no longer valid
// (upstream getAllocatedHintsByZone and getHintsByZone): a ready endpoint
// without zone hints, a hint for a zone without allotment, or hints that,
// with those counted before, exceed a zone's maximum.
func (ss *sliceSet) keepValidHints(allot map[string]allotment) map[string]int {
	hinted := map[string]int{}
	kept := ss.unchanged[:0:0]
	for _, s := range ss.unchanged {
		perZone := sliceHints(s, hinted, allot)
		if perZone == nil {
			ss.update = append(ss.update, s.DeepCopy())
			continue
		}
		kept = append(kept, s)
		for z, n := range perZone {
			hinted[z] += n
		}
	}
	ss.unchanged = kept
	return hinted
}

func sliceHints(s *discovery.EndpointSlice, hinted map[string]int, allot map[string]allotment) map[string]int {
	perZone := map[string]int{}
	for i := range s.Endpoints {
		e := &s.Endpoints[i]
		if !ready(e) {
			continue
		}
		if e.Hints == nil || len(e.Hints.ForZones) == 0 {
			return nil
		}
		for _, fz := range e.Hints.ForZones {
			if _, ok := allot[fz.Name]; !ok {
				return nil
			}
			perZone[fz.Name]++
		}
	}
	for z, n := range perZone {
		if n+hinted[z] > allot[z].maximum {
			return nil
		}
	}
	return perZone
}

// donations turns the gaps between the zones' desired shares and their
// hinted counts into whole endpoints to give and to receive (upstream
// getGivingAndReceivingZones): one at a time from the zone with the most
// excess to the zone with the most need, while both have at least half an
// endpoint and one of them a whole one.
func donations(allot map[string]allotment, hinted map[string]int) (giving, receiving map[string]int) {
	give, need := map[string]float64{}, map[string]float64{}
	for z, a := range allot {
		h := float64(hinted[z])
		switch {
		case h > a.desired:
			give[z] = h - a.desired
		case h < a.desired:
			need[z] = a.desired - h
		}
	}
	giving, receiving = map[string]int{}, map[string]int{}
	for {
		g, ng := most(give)
		r, nr := most(need)
		if g == "" || r == "" || (ng < 1 && nr < 1) || ng < 0.5 || nr < 0.5 {
			return giving, receiving
		}
		giving[g]++
		give[g]--
		receiving[r]++
		need[r]--
	}
}

// most is the zone with the largest positive value, the first by name on a
// tie; "" when none is positive.
func most(m map[string]float64) (string, float64) {
	zone, n := "", 0.0
	for _, z := range sortedKeys(m) {
		if m[z] > n {
			zone, n = z, m[z]
		}
	}
	return zone, n
}

// redistribute re-hints endpoints of giving zones for receiving zones, in
// slice and endpoint order, receiving zones by name (upstream
// redistributeHints), and returns the change of each zone's count.
func redistribute(slices []*discovery.EndpointSlice, giving, receiving map[string]int) map[string]int {
	moved := map[string]int{}
	for _, s := range slices {
		for i := range s.Endpoints {
			e := &s.Endpoints[i]
			if !ready(e) {
				continue
			}
			if len(giving) == 0 || len(receiving) == 0 {
				return moved
			}
			if e.Zone == nil || *e.Zone == "" || giving[*e.Zone] == 0 {
				continue
			}
			g := *e.Zone
			for _, r := range sortedKeys(receiving) {
				e.Hints = &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: r}}}
				if giving[g]--; giving[g] == 0 {
					delete(giving, g)
				}
				if receiving[r]--; receiving[r] == 0 {
					delete(receiving, r)
				}
				moved[r]++
				moved[g]--
				break
			}
		}
	}
	return moved
}
