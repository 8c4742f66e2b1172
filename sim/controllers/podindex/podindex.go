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
// name, with each kept under its labels too: a Service under one pair of
// its selector, a Pod under every label it has. A selector is a set of
// equalities a matching pod must all carry, so looking up by one pair
// finds every candidate, and the two questions cost what they select, not
// the whole cluster (at 20,000 Services and 40,000 Pods the scan was
// quadratic, minutes per replay). It is not safe for concurrent use; a
// world consumer's handlers run one at a time.
type Index struct {
	services map[string]*v1.Service
	pods     map[string]map[string]*v1.Pod
	// svcByPair: namespace, then "key=value" (the selector's smallest key),
	// then the Services' keys; "" holds those with an empty selector, which
	// select every pod of their namespace.
	svcByPair map[string]map[string]map[string]bool
	// podByPair: namespace, then "key=value", then pod names.
	podByPair map[string]map[string]map[string]bool
}

// New is an empty index.
func New() *Index {
	return &Index{services: map[string]*v1.Service{}, pods: map[string]map[string]*v1.Pod{},
		svcByPair: map[string]map[string]map[string]bool{}, podByPair: map[string]map[string]map[string]bool{}}
}

// Key is an object's "namespace/name".
func Key(ns, name string) string { return ns + "/" + name }

// selectorPair is the pair a Service is indexed under: its selector's
// smallest key and that key's value ("" for an empty selector).
func selectorPair(sel map[string]string) string {
	first := ""
	for k := range sel {
		if first == "" || k < first {
			first = k
		}
	}
	if first == "" {
		return ""
	}
	return first + "=" + sel[first]
}

func add(m map[string]map[string]map[string]bool, ns, pair, name string) {
	byPair := m[ns]
	if byPair == nil {
		byPair = map[string]map[string]bool{}
		m[ns] = byPair
	}
	set := byPair[pair]
	if set == nil {
		set = map[string]bool{}
		byPair[pair] = set
	}
	set[name] = true
}

func remove(m map[string]map[string]map[string]bool, ns, pair, name string) {
	if set := m[ns][pair]; set != nil {
		delete(set, name)
		if len(set) == 0 {
			delete(m[ns], pair)
		}
	}
}

// selects reports whether sel (equalities, all required) matches lbls, as
// labels.SelectorFromSet(sel).Matches does.
func selects(sel, lbls map[string]string) bool {
	for k, v := range sel {
		if got, ok := lbls[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// SetService records s (added or updated) and returns its key.
func (x *Index) SetService(s *v1.Service) string {
	k := x.DeleteService(s)
	x.services[k] = s
	if s.Spec.Selector != nil {
		add(x.svcByPair, s.Namespace, selectorPair(s.Spec.Selector), k)
	}
	return k
}

// DeleteService forgets s and returns its key.
func (x *Index) DeleteService(s *v1.Service) string {
	k := Key(s.Namespace, s.Name)
	if old, ok := x.services[k]; ok && old.Spec.Selector != nil {
		remove(x.svcByPair, old.Namespace, selectorPair(old.Spec.Selector), k)
	}
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
	x.DeletePod(p)
	m := x.pods[p.Namespace]
	if m == nil {
		m = map[string]*v1.Pod{}
		x.pods[p.Namespace] = m
	}
	m[p.Name] = p
	for k, v := range p.Labels {
		add(x.podByPair, p.Namespace, k+"="+v, p.Name)
	}
}

// DeletePod forgets p.
func (x *Index) DeletePod(p *v1.Pod) {
	m := x.pods[p.Namespace]
	if m == nil {
		return
	}
	if old, ok := m[p.Name]; ok {
		for k, v := range old.Labels {
			remove(x.podByPair, p.Namespace, k+"="+v, p.Name)
		}
	}
	delete(m, p.Name)
}

// ServicesFor lists, sorted, the keys of the Services in ns whose selector
// matches lbls; a Service without a selector matches nothing.
func (x *Index) ServicesFor(ns string, lbls map[string]string) []string {
	byPair := x.svcByPair[ns]
	if byPair == nil {
		return nil
	}
	var out []string
	check := func(pair string) {
		for k := range byPair[pair] {
			if selects(x.services[k].Spec.Selector, lbls) {
				out = append(out, k)
			}
		}
	}
	check("")
	for k, v := range lbls {
		check(k + "=" + v)
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
	all := x.pods[svc.Namespace]
	var pods []*v1.Pod
	if len(sel) == 0 {
		for _, p := range all {
			pods = append(pods, p)
		}
	} else {
		// The pods carrying the rarest of the selector's pairs are the
		// fewest to check.
		var cands map[string]bool
		for k, v := range sel {
			set := x.podByPair[svc.Namespace][k+"="+v]
			if cands == nil || len(set) < len(cands) {
				cands = set
			}
			if len(set) == 0 {
				return nil
			}
		}
		for name := range cands {
			if p := all[name]; selects(sel, p.Labels) {
				pods = append(pods, p)
			}
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
