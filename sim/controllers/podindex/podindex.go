// Package podindex keeps the Services and Pods that an endpoints-writing
// controller watches, and answers the questions both the EndpointSlice
// and the Endpoints controller ask of them: which Services select a pod,
// which pods a Service selects, and which Services a pod update must sync.
// Upstream the two controllers share these rules too (k8s.io/endpointslice
// util/controller_utils.go: GetPodUpdateProjectionKey, GetServicesToUpdate
// with getServicesForPod and determineNeededServiceUpdates, and
// podEndpointsChanged), so proxysim keeps them once.
package podindex

import (
	"reflect"
	"sort"

	v1 "k8s.io/api/core/v1"
)

// Index holds Services by "namespace/name" and Pods by namespace, then
// name. It is not safe for concurrent use; a world consumer's handlers
// run one at a time.
//
// A selector matches a pod when every one of its pairs is among the pod's
// labels (labels.SelectorFromSet's rule), so each question starts from the
// candidates that share one pair and checks the rest: pods are indexed by
// each label pair, Services by their selector's first pair (by key).
type Index struct {
	services map[string]*v1.Service
	pods     map[string]map[string]*v1.Pod
	// podsBy[ns][pair] are the pods of ns with that label pair, by name.
	podsBy map[string]map[labelPair]map[string]*v1.Pod
	// svcsBy[ns][pair] are the keys of the Services of ns whose
	// selector's first pair it is; pair{} for an empty selector (which
	// selects every pod).
	svcsBy map[string]map[labelPair]map[string]bool
}

type labelPair struct{ key, value string }

// New is an empty index.
func New() *Index {
	return &Index{services: map[string]*v1.Service{}, pods: map[string]map[string]*v1.Pod{},
		podsBy: map[string]map[labelPair]map[string]*v1.Pod{}, svcsBy: map[string]map[labelPair]map[string]bool{}}
}

// firstPair is the selector's pair with the smallest key (pair{} when it
// has none).
func firstPair(sel map[string]string) labelPair {
	var first labelPair
	found := false
	for k, v := range sel {
		if !found || k < first.key {
			first, found = labelPair{k, v}, true
		}
	}
	return first
}

// selects is labels.SelectorFromSet(sel).Matches(lbls): every pair of sel
// is among lbls.
func selects(sel, lbls map[string]string) bool {
	for k, v := range sel {
		if got, ok := lbls[k]; !ok || got != v {
			return false
		}
	}
	return true
}

func (x *Index) indexService(k string, s *v1.Service, add bool) {
	if s == nil || s.Spec.Selector == nil {
		return
	}
	p := firstPair(s.Spec.Selector)
	byPair := x.svcsBy[s.Namespace]
	if byPair == nil {
		byPair = map[labelPair]map[string]bool{}
		x.svcsBy[s.Namespace] = byPair
	}
	if add {
		if byPair[p] == nil {
			byPair[p] = map[string]bool{}
		}
		byPair[p][k] = true
		return
	}
	delete(byPair[p], k)
	if len(byPair[p]) == 0 {
		delete(byPair, p)
	}
}

func (x *Index) indexPod(p *v1.Pod, add bool) {
	byPair := x.podsBy[p.Namespace]
	if byPair == nil {
		byPair = map[labelPair]map[string]*v1.Pod{}
		x.podsBy[p.Namespace] = byPair
	}
	for k, v := range p.Labels {
		lp := labelPair{k, v}
		if add {
			if byPair[lp] == nil {
				byPair[lp] = map[string]*v1.Pod{}
			}
			byPair[lp][p.Name] = p
			continue
		}
		delete(byPair[lp], p.Name)
		if len(byPair[lp]) == 0 {
			delete(byPair, lp)
		}
	}
}

// Key is an object's "namespace/name".
func Key(ns, name string) string { return ns + "/" + name }

// SetService records s (added or updated) and returns its key.
func (x *Index) SetService(s *v1.Service) string {
	k := Key(s.Namespace, s.Name)
	x.indexService(k, x.services[k], false)
	x.services[k] = s
	x.indexService(k, s, true)
	return k
}

// DeleteService forgets s and returns its key.
func (x *Index) DeleteService(s *v1.Service) string {
	k := Key(s.Namespace, s.Name)
	x.indexService(k, x.services[k], false)
	delete(x.services, k)
	return k
}

// Service is the Service with key k, if known.
func (x *Index) Service(k string) (*v1.Service, bool) {
	s, ok := x.services[k]
	return s, ok
}

// SetPod records p (added or updated).
func (x *Index) SetPod(p *v1.Pod) {
	m := x.pods[p.Namespace]
	if m == nil {
		m = map[string]*v1.Pod{}
		x.pods[p.Namespace] = m
	}
	if old := m[p.Name]; old != nil {
		x.indexPod(old, false)
	}
	m[p.Name] = p
	x.indexPod(p, true)
}

// DeletePod forgets p.
func (x *Index) DeletePod(p *v1.Pod) {
	if m := x.pods[p.Namespace]; m != nil {
		if old := m[p.Name]; old != nil {
			x.indexPod(old, false)
		}
		delete(m, p.Name)
	}
}

// ServicesFor lists, sorted, the keys of the Services in ns whose selector
// matches lbls; a Service without a selector matches nothing.
func (x *Index) ServicesFor(ns string, lbls map[string]string) []string {
	byPair := x.svcsBy[ns]
	if len(byPair) == 0 {
		return nil
	}
	var out []string
	check := func(keys map[string]bool) {
		for k := range keys {
			if selects(x.services[k].Spec.Selector, lbls) {
				out = append(out, k)
			}
		}
	}
	check(byPair[labelPair{}])
	for k, v := range lbls {
		if lp := (labelPair{k, v}); lp != (labelPair{}) {
			check(byPair[lp])
		}
	}
	sort.Strings(out)
	return out
}

// SelectedPods lists the pods of svc's namespace that its selector
// matches, sorted by name (nil for a Service without a selector).
func (x *Index) SelectedPods(svc *v1.Service) []*v1.Pod {
	sel := svc.Spec.Selector
	if sel == nil {
		return nil
	}
	candidates := x.pods[svc.Namespace]
	if first := firstPair(sel); first != (labelPair{}) {
		candidates = x.podsBy[svc.Namespace][first]
	}
	var pods []*v1.Pod
	for _, p := range candidates {
		if selects(sel, p.Labels) {
			pods = append(pods, p)
		}
	}
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	return pods
}

// ServicesToSync lists, sorted, the Services a pod update from old to p
// must sync. A resync (same resourceVersion) or an update that changes
// nothing an endpoint shows syncs none; a change of labels, hostname or
// subdomain syncs the Services that gained or lost the pod, or every old
// and new one when what the endpoint shows changed too; any other change
// syncs the Services that select the pod now.
func (x *Index) ServicesToSync(old, p *v1.Pod) []string {
	if old.ResourceVersion == p.ResourceVersion {
		return nil
	}
	labelsChanged := !reflect.DeepEqual(old.Labels, p.Labels) || old.Spec.Hostname != p.Spec.Hostname || old.Spec.Subdomain != p.Spec.Subdomain
	podChanged := !sameDeletion(old, p) || Ready(old) != Ready(p) || !samePodIPs(old, p)
	now := x.ServicesFor(p.Namespace, p.Labels)
	switch {
	case !podChanged && !labelsChanged:
		return nil
	case !labelsChanged:
		return now
	}
	before := x.ServicesFor(p.Namespace, old.Labels)
	// 1: selects the pod now, 2: selected it before, 3: both.
	in := map[string]int{}
	for _, s := range now {
		in[s] |= 1
	}
	for _, s := range before {
		in[s] |= 2
	}
	var out []string
	for s, where := range in {
		if podChanged || where != 3 { // every one, or only those that changed
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

// sameDeletion follows upstream's comparison of deletionTimestamp by
// pointer: two informer copies never share one, so any update of a pod
// being deleted counts as a change (FACTS §1.4).
func sameDeletion(a, b *v1.Pod) bool {
	return a.DeletionTimestamp == nil && b.DeletionTimestamp == nil
}

func samePodIPs(a, b *v1.Pod) bool {
	if len(a.Status.PodIPs) != len(b.Status.PodIPs) {
		return false
	}
	for i := range a.Status.PodIPs {
		if a.Status.PodIPs[i].IP != b.Status.PodIPs[i].IP {
			return false
		}
	}
	return true
}

// Ready is the pod's Ready condition being True.
func Ready(p *v1.Pod) bool {
	c := ReadyCondition(p)
	return c != nil && c.Status == v1.ConditionTrue
}

// ReadyCondition is the pod's Ready condition, or nil.
func ReadyCondition(p *v1.Pod) *v1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == v1.PodReady {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}
