package endpointslice

import (
	"errors"
	"fmt"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ControllerName is the managed-by label value of the slices this
// controller writes.
const ControllerName = "endpointslice-controller.k8s.io"

// DefaultMaxEndpointsPerSlice is --max-endpoints-per-slice's default.
const DefaultMaxEndpointsPerSlice = 100

// Writer is the API the reconciler writes slices through. Create returns
// the name the API server gave a slice created by generateName.
type Writer interface {
	Create(s *discovery.EndpointSlice) (string, error)
	Update(s *discovery.EndpointSlice) error
	Delete(namespace, name string) error
}

// Reconciler turns a Service, its pods and its existing slices into slice
// writes, following k8s.io/endpointslice's Reconciler (reconciler.go) step
// by step but in a fixed order where upstream ranges over maps: address
// types IPv4 then IPv6, port groups by key, slices by name, new endpoints
// in pod order (FACTS §1.12). It aims, like upstream, at few writes, never
// at balance.
type Reconciler struct {
	MaxEndpointsPerSlice int
	// Node looks a node up in the controller's cache.
	Node   func(name string) (*v1.Node, bool)
	Writer Writer
	// Wrote, if set, is told of every successful write (for the tracker).
	Wrote func(op string, s *discovery.EndpointSlice)
	// Topology, if set, gives hints to Services annotated
	// service.kubernetes.io/topology-mode: Auto (nil: such Services get
	// none, as upstream's reconciler without a topology cache).
	Topology *TopologyCache
	// PreferSameTrafficDistribution honours trafficDistribution
	// PreferSameZone and PreferSameNode (upstream's
	// WithPreferSameTrafficDistributionEnabled; the feature gate is GA and
	// locked on since v1.35). PreferClose is honoured either way.
	PreferSameTrafficDistribution bool
}

// Plan is what one reconcile of one address type decided, before the
// writes: for tests and the side-by-side comparison.
type Plan struct {
	Create, Update, Delete []*discovery.EndpointSlice
}

// Reconcile brings svc's slices in line with pods. It writes what it can and
// returns every problem: pods on unknown nodes (skipped unless the Service
// publishes not-ready addresses) and the first failed write.
func (r *Reconciler) Reconcile(svc *v1.Service, pods []*v1.Pod, existing []*discovery.EndpointSlice, trigger time.Time) error {
	types := addressTypes(svc)
	byType := map[discovery.AddressType][]*discovery.EndpointSlice{}
	var stale []*discovery.EndpointSlice
	for _, s := range sortedByName(existing) {
		if !hasType(types, s.AddressType) {
			if r.Topology != nil {
				r.Topology.forget(svc.Namespace+"/"+svc.Name, s.AddressType)
			}
			stale = append(stale, s)
			continue
		}
		byType[s.AddressType] = append(byType[s.AddressType], s)
	}
	var errs []error
	for _, at := range types {
		plan, perr := r.Plan(svc, pods, byType[at], at)
		errs = append(errs, perr...)
		if err := r.finalize(svc, plan, trigger); err != nil {
			errs = append(errs, err)
		}
	}
	for _, s := range stale {
		if err := r.Writer.Delete(s.Namespace, s.Name); err != nil {
			errs = append(errs, fmt.Errorf("deleting EndpointSlice %s of Service %s/%s: %w", s.Name, svc.Namespace, svc.Name, err))
			continue
		}
		r.wrote("delete", s)
	}
	return errors.Join(errs...)
}

func hasType(ts []discovery.AddressType, t discovery.AddressType) bool {
	for _, x := range ts {
		if x == t {
			return true
		}
	}
	return false
}

func sortedByName(in []*discovery.EndpointSlice) []*discovery.EndpointSlice {
	out := append([]*discovery.EndpointSlice(nil), in...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// desiredGroup is the endpoints one port set wants, in pod order.
type desiredGroup struct {
	ports []discovery.EndpointPort
	order []string // endpoint IDs, in insertion order
	eps   map[string]*discovery.Endpoint
}

func (g *desiredGroup) insert(ep *discovery.Endpoint) {
	id := endpointID(ep)
	if _, ok := g.eps[id]; !ok {
		g.order = append(g.order, id)
	}
	g.eps[id] = ep
}

// pop takes the first endpoint still wanted (upstream: any).
func (g *desiredGroup) pop() *discovery.Endpoint {
	for len(g.order) > 0 {
		id := g.order[0]
		g.order = g.order[1:]
		if ep, ok := g.eps[id]; ok {
			delete(g.eps, id)
			return ep
		}
	}
	return nil
}

// Plan decides the writes for one address type (upstream
// reconcileByAddressType and reconcileByPortMapping), hints included,
// without making them.
func (r *Reconciler) Plan(svc *v1.Service, pods []*v1.Pod, existing []*discovery.EndpointSlice, at discovery.AddressType) (*Plan, []error) {
	plan := &Plan{}
	var errs []error
	existing = sortedByName(existing)
	existingByKey := map[string][]*discovery.EndpointSlice{}
	for _, s := range existing {
		if OwnedBy(s, svc) {
			k := portKey(s.Ports)
			existingByKey[k] = append(existingByKey[k], s)
		} else {
			plan.Delete = append(plan.Delete, s)
		}
	}
	desired := map[string]*desiredGroup{}
	for _, p := range pods {
		if !IncludePod(p, true) {
			continue
		}
		ports := endpointPorts(svc, p)
		k := portKey(ports)
		g := desired[k]
		if g == nil {
			g = &desiredGroup{ports: ports, eps: map[string]*discovery.Endpoint{}}
			desired[k] = g
		}
		node, ok := r.Node(p.Spec.NodeName)
		if !ok {
			node = nil
			if !svc.Spec.PublishNotReadyAddresses {
				errs = append(errs, fmt.Errorf("skipping Pod %s for Service %s/%s: Node %s not found", p.Name, svc.Namespace, svc.Name, p.Spec.NodeName))
				continue
			}
		}
		ep := podEndpoint(p, node, svc, at)
		if len(ep.Addresses) > 0 {
			g.insert(&ep)
		}
	}
	for _, k := range sortedKeys(desired) {
		c, u, d := r.byPorts(svc, existingByKey[k], desired[k], at)
		plan.Create = append(plan.Create, c...)
		plan.Update = append(plan.Update, u...)
		plan.Delete = append(plan.Delete, d...)
	}
	for _, k := range sortedKeys(existingByKey) {
		if _, ok := desired[k]; !ok {
			plan.Delete = append(plan.Delete, existingByKey[k]...)
		}
	}
	// Every slice going and none coming: keep one empty placeholder, or
	// leave an existing one alone.
	if len(existing) == len(plan.Delete) && len(plan.Create) == 0 {
		ph := newSlice(svc, []discovery.EndpointPort{}, at)
		if len(plan.Delete) == 1 && samePlaceholder(plan.Delete[0], ph) {
			plan.Delete = nil
		} else {
			plan.Create = append(plan.Create, ph)
		}
	}
	r.hint(svc, at, existing, plan)
	return plan, errs
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// byPorts packs one port group (upstream reconcileByPortMapping).
func (r *Reconciler) byPorts(svc *v1.Service, existing []*discovery.EndpointSlice, want *desiredGroup, at discovery.AddressType) (create, update, del []*discovery.EndpointSlice) {
	max := r.MaxEndpointsPerSlice
	if max <= 0 {
		max = DefaultMaxEndpointsPerSlice
	}
	byName := map[string]*discovery.EndpointSlice{}
	var unchanged, toUpdate, toDelete []string // names, in slice-name order
	// 1. Keep the endpoints still wanted, in their new version.
	for _, s := range existing {
		byName[s.Name] = s
		kept := []discovery.Endpoint{}
		rewritten := false
		for i := range s.Endpoints {
			id := endpointID(&s.Endpoints[i])
			if got, ok := want.eps[id]; ok {
				kept = append(kept, *got)
				if !sameBeyondID(got, &s.Endpoints[i]) {
					rewritten = true
				}
				delete(want.eps, id)
			}
		}
		labels, labelsChanged := sliceLabels(s, svc)
		switch {
		case rewritten || len(kept) != len(s.Endpoints):
			if len(kept) == 0 {
				toDelete = append(toDelete, s.Name)
			} else {
				cp := s.DeepCopy()
				cp.Endpoints, cp.Labels = kept, labels
				byName[s.Name] = cp
				toUpdate = append(toUpdate, s.Name)
			}
		case labelsChanged:
			cp := s.DeepCopy()
			cp.Labels = labels
			byName[s.Name] = cp
			toUpdate = append(toUpdate, s.Name)
		default:
			unchanged = append(unchanged, s.Name)
		}
	}
	// 2. Fill the slices being rewritten anyway, fullest first.
	if len(want.eps) > 0 && len(toUpdate) > 0 {
		fill := make([]*discovery.EndpointSlice, len(toUpdate))
		for i, n := range toUpdate {
			fill[i] = byName[n]
		}
		sort.SliceStable(fill, func(i, j int) bool { return len(fill[i].Endpoints) > len(fill[j].Endpoints) })
		for _, s := range fill {
			for len(want.eps) > 0 && len(s.Endpoints) < max {
				s.Endpoints = append(s.Endpoints, *want.pop())
			}
		}
	}
	// 3. The rest: into the unchanged slice that ends closest to full if
	// fewer than a slice's worth remain, else into new slices.
	for len(want.eps) > 0 {
		var s *discovery.EndpointSlice
		if len(want.eps) < max && len(unchanged) > 0 {
			if n := closestFit(unchanged, byName, len(want.eps), max); n != "" {
				s = byName[n].DeepCopy()
				byName[n] = s
			}
		}
		if s == nil {
			s = newSlice(svc, want.ports, at)
		}
		for len(want.eps) > 0 && len(s.Endpoints) < max {
			s.Endpoints = append(s.Endpoints, *want.pop())
		}
		if s.Name != "" {
			toUpdate = append(toUpdate, s.Name)
			unchanged = remove(unchanged, s.Name)
		} else {
			create = append(create, s)
		}
	}
	sort.Strings(toUpdate)
	for _, n := range toUpdate {
		update = append(update, byName[n])
	}
	for _, n := range toDelete {
		del = append(del, byName[n])
	}
	return create, update, del
}

// closestFit is upstream's getSliceToFill: the slice left with the least
// room after taking n endpoints, without overflowing; an exact fit at once.
func closestFit(names []string, byName map[string]*discovery.EndpointSlice, n, max int) string {
	best, bestDiff := "", max
	for _, name := range names {
		diff := max - (n + len(byName[name].Endpoints))
		if diff >= 0 && diff < bestDiff {
			best, bestDiff = name, diff
			if diff == 0 {
				break
			}
		}
	}
	return best
}

func remove(names []string, n string) []string {
	out := names[:0]
	for _, x := range names {
		if x != n {
			out = append(out, x)
		}
	}
	return out
}

// finalize makes the writes (upstream finalize): a create paired with a
// delete of the same address type becomes an update of that slice (its
// name recycled); then creates (none for a Service being deleted),
// updates, deletes, each create and update stamped with the trigger time.
// The first failed write ends it.
func (r *Reconciler) finalize(svc *v1.Service, p *Plan, trigger time.Time) error {
	for i := 0; i < len(p.Delete) && len(p.Create) > 0; {
		d := p.Delete[i]
		c := p.Create[len(p.Create)-1]
		if d.AddressType == c.AddressType && OwnedBy(d, svc) {
			c.Name = d.Name
			p.Create = p.Create[:len(p.Create)-1]
			p.Update = append(p.Update, c)
			p.Delete = append(p.Delete[:i:i], p.Delete[i+1:]...)
		} else {
			i++
		}
	}
	if svc.DeletionTimestamp == nil {
		for _, s := range p.Create {
			stampTrigger(s, trigger)
			name, err := r.Writer.Create(s)
			if err != nil {
				return fmt.Errorf("creating an EndpointSlice for Service %s/%s: %w", svc.Namespace, svc.Name, err)
			}
			s.Name = name
			r.wrote("create", s)
		}
	}
	for _, s := range p.Update {
		stampTrigger(s, trigger)
		if err := r.Writer.Update(s); err != nil {
			return fmt.Errorf("updating EndpointSlice %s of Service %s/%s: %w", s.Name, svc.Namespace, svc.Name, err)
		}
		r.wrote("update", s)
	}
	for _, s := range p.Delete {
		if err := r.Writer.Delete(s.Namespace, s.Name); err != nil {
			return fmt.Errorf("deleting EndpointSlice %s of Service %s/%s: %w", s.Name, svc.Namespace, svc.Name, err)
		}
		r.wrote("delete", s)
	}
	return nil
}

func (r *Reconciler) wrote(op string, s *discovery.EndpointSlice) {
	if r.Wrote != nil {
		r.Wrote(op, s)
	}
}

// stampTrigger sets the trigger-time annotation, or removes it when there
// is no trigger time (upstream addTriggerTimeAnnotation).
func stampTrigger(s *discovery.EndpointSlice, t time.Time) {
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	if t.IsZero() {
		delete(s.Annotations, v1.EndpointsLastChangeTriggerTime)
		return
	}
	s.Annotations[v1.EndpointsLastChangeTriggerTime] = t.UTC().Format(time.RFC3339Nano)
}

// OwnedBy reports whether the slice's owner references name svc (by UID,
// kind Service, apiVersion v1).
func OwnedBy(s *discovery.EndpointSlice, svc *v1.Service) bool {
	for _, o := range s.OwnerReferences {
		if o.UID == svc.UID && o.Kind == "Service" && o.APIVersion == "v1" {
			return true
		}
	}
	return false
}

// newSlice is an empty slice for svc, named by generateName (upstream
// newEndpointSlice), owned by the Service.
func newSlice(svc *v1.Service, ports []discovery.EndpointPort, at discovery.AddressType) *discovery.EndpointSlice {
	ref := metav1.NewControllerRef(svc, schema.GroupVersionKind{Version: "v1", Kind: "Service"})
	s := &discovery.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    slicePrefix(svc.Name),
			Namespace:       svc.Namespace,
			OwnerReferences: []metav1.OwnerReference{*ref},
		},
		Ports:       ports,
		AddressType: at,
		Endpoints:   []discovery.Endpoint{},
	}
	s.Labels, _ = sliceLabels(s, svc)
	return s
}

func slicePrefix(svcName string) string {
	p := svcName + "-"
	if len(apimachineryvalidation.NameIsDNSSubdomain(p, true)) != 0 {
		return svcName
	}
	return p
}

// reserved labels are the controller's own on a slice, never copied from
// the Service.
func reserved(k string) bool {
	return k == discovery.LabelServiceName || k == discovery.LabelManagedBy || k == v1.IsHeadlessService
}

// sliceLabels are the labels a slice of svc should have, and whether the
// slice's own (reserved ones aside) differ from the Service's (upstream
// setEndpointSliceLabels: the headless label alone never counts).
func sliceLabels(s *discovery.EndpointSlice, svc *v1.Service) (map[string]string, bool) {
	own, want := map[string]string{}, map[string]string{}
	for k, v := range s.Labels {
		if !reserved(k) {
			own[k] = v
		}
	}
	for k, v := range svc.Labels {
		if !reserved(k) {
			want[k] = v
		}
	}
	changed := len(own) != len(want)
	for k, v := range want {
		if w, ok := own[k]; !ok || w != v {
			changed = true
		}
	}
	if svc.Spec.ClusterIP == v1.ClusterIPNone || svc.Spec.ClusterIP == "" {
		want[v1.IsHeadlessService] = ""
	}
	want[discovery.LabelServiceName] = svc.Name
	want[discovery.LabelManagedBy] = ControllerName
	return want, changed
}

// samePlaceholder compares a slice with the placeholder the reconciler
// would create, as upstream does (placeholderSliceCompare): generated
// names and metadata it does not set aside.
func samePlaceholder(s, ph *discovery.EndpointSlice) bool {
	if s.AddressType != ph.AddressType || len(s.Endpoints) != 0 || len(s.Ports) != 0 || s.Namespace != ph.Namespace {
		return false
	}
	// Labels compare by lookup, as upstream's do: a label with an empty
	// value equals no label (so an old placeholder without the headless
	// label still matches).
	for k, v := range ph.Labels {
		if s.Labels[k] != v {
			return false
		}
	}
	for k, v := range s.Labels {
		if ph.Labels[k] != v {
			return false
		}
	}
	if len(s.OwnerReferences) != len(ph.OwnerReferences) {
		return false
	}
	for i := range ph.OwnerReferences {
		a, b := s.OwnerReferences[i], ph.OwnerReferences[i]
		if a.APIVersion != b.APIVersion || a.Kind != b.Kind || a.Name != b.Name || a.UID != b.UID ||
			!boolPtrEq(a.Controller, b.Controller) || !boolPtrEq(a.BlockOwnerDeletion, b.BlockOwnerDeletion) {
			return false
		}
	}
	return true
}
