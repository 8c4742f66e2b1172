package endpointslice

import (
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
)

// Topology hints: which zone (forZones) or node (forNodes) each ready
// endpoint is meant for, written by the reconciler after it has packed the
// slices (k8s.io/endpointslice v0.36 reconciler.go reconcileByAddressType).
// Two sources, the annotation first:
//
//   - service.kubernetes.io/topology-mode: Auto (or the deprecated
//     service.kubernetes.io/topology-aware-hints, which wins when both are
//     set), "Auto" or "auto": zone hints allotted in proportion to the
//     zones' CPU (TopologyCache, topology.go);
//   - spec.trafficDistribution PreferClose, PreferSameZone (each ready
//     endpoint hinted for its own zone) or PreferSameNode (its own zone and
//     node); the last two only with the PreferSameTrafficDistribution gate
//     (GA and locked on in v1.36).
//
// Neither: every hint is removed. Like upstream, this may turn slices the
// packing left alone into updates, never into creates or deletes.

// topologyAuto is upstream's hintsEnabled (utils.go).
func topologyAuto(ann map[string]string) bool {
	v, ok := ann[v1.DeprecatedAnnotationTopologyAwareHints]
	if !ok {
		if v, ok = ann[v1.AnnotationTopologyMode]; !ok {
			return false
		}
	}
	return v == "Auto" || v == "auto"
}

// trafficDistribution is the Service's trafficDistribution when this
// reconciler acts on it (upstream validTrafficDistribution): PreferClose
// always, PreferSameZone and PreferSameNode only with
// PreferSameTrafficDistribution; "" otherwise.
func (r *Reconciler) trafficDistribution(svc *v1.Service) string {
	td := svc.Spec.TrafficDistribution
	switch {
	case td == nil:
		return ""
	case *td == v1.ServiceTrafficDistributionPreferClose:
		return *td
	case r.PreferSameTrafficDistribution &&
		(*td == v1.ServiceTrafficDistributionPreferSameZone || *td == v1.ServiceTrafficDistributionPreferSameNode):
		return *td
	}
	return ""
}

// sliceSet is one address type's planned slices as the hint steps see
// them (upstream topologycache.SliceInfo): the steps move slices from
// unchanged to update, never the other way.
type sliceSet struct {
	create, update, unchanged []*discovery.EndpointSlice
}

// unchangedOf is upstream's unchangedSlices: the existing slices, in their
// order, that the plan neither updates nor deletes.
func unchangedOf(existing, update, del []*discovery.EndpointSlice) []*discovery.EndpointSlice {
	changed := map[string]bool{}
	for _, s := range update {
		changed[s.Name] = true
	}
	for _, s := range del {
		changed[s.Name] = true
	}
	out := []*discovery.EndpointSlice{}
	for _, s := range existing {
		if !changed[s.Name] {
			out = append(out, s)
		}
	}
	return out
}

// hint writes the hints into one address type's plan (the tail of
// upstream reconcileByAddressType). existing are the slices of that
// address type the plan started from, in the order it saw them.
func (r *Reconciler) hint(svc *v1.Service, at discovery.AddressType, existing []*discovery.EndpointSlice, p *Plan) {
	key := svc.Namespace + "/" + svc.Name
	auto := topologyAuto(svc.Annotations)
	td := ""
	if !auto {
		td = r.trafficDistribution(svc)
	}
	ss := &sliceSet{create: p.Create, update: p.Update, unchanged: unchangedOf(existing, p.Update, p.Delete)}
	if r.Topology != nil && auto {
		r.Topology.addHints(key, at, ss)
	} else {
		if r.Topology != nil {
			r.Topology.forget(key, at)
		}
		if td == "" {
			ss.clearHints()
		}
	}
	if td != "" {
		ss.unchanged = unchangedOf(existing, ss.update, p.Delete)
		ss.preferClose(td == v1.ServiceTrafficDistributionPreferSameNode)
	}
	p.Create, p.Update = ss.create, ss.update
}

func ready(e *discovery.Endpoint) bool {
	return e.Conditions.Ready != nil && *e.Conditions.Ready
}

// clearHints removes every hint (upstream RemoveHintsFromSlices): from the
// slices being written anyway, and from unchanged slices that had any,
// which become updates.
func (ss *sliceSet) clearHints() {
	for _, group := range [][]*discovery.EndpointSlice{ss.create, ss.update} {
		for _, s := range group {
			for i := range s.Endpoints {
				s.Endpoints[i].Hints = nil
			}
		}
	}
	kept := ss.unchanged[:0:0]
	for _, s := range ss.unchanged {
		had := false
		for i := range s.Endpoints {
			if s.Endpoints[i].Hints != nil {
				had = true
			}
		}
		if !had {
			kept = append(kept, s)
			continue
		}
		cp := s.DeepCopy()
		for i := range cp.Endpoints {
			cp.Endpoints[i].Hints = nil
		}
		ss.update = append(ss.update, cp)
	}
	ss.unchanged = kept
}

// closeHints are the hints trafficDistribution wants on a ready endpoint
// (upstream trafficdist preferCloseHeuristic): its zone, and with
// PreferSameNode its node; nil when it has neither.
func closeHints(e *discovery.Endpoint, sameNode bool) *discovery.EndpointHints {
	var h discovery.EndpointHints
	if e.Zone != nil {
		h.ForZones = []discovery.ForZone{{Name: *e.Zone}}
	}
	if sameNode && e.NodeName != nil {
		h.ForNodes = []discovery.ForNode{{Name: *e.NodeName}}
	}
	if h.ForZones == nil && h.ForNodes == nil {
		return nil
	}
	return &h
}

// closeHintsWrong is upstream's preferCloseHeuristic.needsUpdate for one
// endpoint: a zone hint missing, not exactly its own zone, or present
// without a zone; the same for the node hint under PreferSameNode, and any
// node hint otherwise.
func closeHintsWrong(e *discovery.Endpoint, sameNode bool) bool {
	h := e.Hints
	if e.Zone != nil {
		if h == nil || len(h.ForZones) != 1 || h.ForZones[0].Name != *e.Zone {
			return true
		}
	} else if h != nil && len(h.ForZones) > 0 {
		return true
	}
	if sameNode && e.NodeName != nil {
		return h == nil || len(h.ForNodes) != 1 || h.ForNodes[0].Name != *e.NodeName
	}
	return h != nil && len(h.ForNodes) > 0
}

// preferClose writes trafficDistribution's hints (upstream
// trafficdist.ReconcileHints): unchanged slices with a wrong hint on a
// ready endpoint become updates; then every ready endpoint of the slices
// written gets its own hints. Endpoints that are not ready keep whatever
// they had.
func (ss *sliceSet) preferClose(sameNode bool) {
	kept := ss.unchanged[:0:0]
	for _, s := range ss.unchanged {
		wrong := false
		for i := range s.Endpoints {
			if ready(&s.Endpoints[i]) && closeHintsWrong(&s.Endpoints[i], sameNode) {
				wrong = true
				break
			}
		}
		if wrong {
			ss.update = append(ss.update, s.DeepCopy())
		} else {
			kept = append(kept, s)
		}
	}
	ss.unchanged = kept
	for _, group := range [][]*discovery.EndpointSlice{ss.create, ss.update} {
		for _, s := range group {
			for i := range s.Endpoints {
				if ready(&s.Endpoints[i]) {
					s.Endpoints[i].Hints = closeHints(&s.Endpoints[i], sameNode)
				}
			}
		}
	}
}
