package proxy

// Selection is the endpoints a service port sends traffic to.
type Selection struct {
	// Cluster serves traffic with a Cluster policy; Local with a Local one.
	Cluster []*Endpoint
	Local   []*Endpoint
	// HasLocalReady is true when the node has a ready local endpoint (what
	// the health-check node port reports).
	HasLocalReady bool
}

// SelectEndpoints picks a service port's cluster and local endpoint sets.
//
// Cluster: the ready endpoints, narrowed by topology hints when the service
// uses them (same node if every ready endpoint has node hints and one names
// this node, else same zone under the same rule for zone hints); if there
// are none, the serving and terminating ones. Local: the local ready
// endpoints, else the local serving and terminating ones.
func SelectEndpoints(svc *ServicePort, eps []*Endpoint, nodeName, zone string) Selection {
	var sel Selection
	var ready, readyLocal, termServing, termServingLocal []*Endpoint
	for _, e := range eps {
		switch {
		case e.Ready:
			ready = append(ready, e)
			if e.IsLocal {
				readyLocal = append(readyLocal, e)
			}
		case e.Serving && e.Terminating:
			termServing = append(termServing, e)
			if e.IsLocal {
				termServingLocal = append(termServingLocal, e)
			}
		}
	}
	sel.HasLocalReady = len(readyLocal) > 0
	sel.Cluster = ready
	if svc.UsesTopology {
		sel.Cluster = byHints(ready, nodeName, zone)
	}
	if len(sel.Cluster) == 0 {
		sel.Cluster = termServing
	}
	sel.Local = readyLocal
	if len(sel.Local) == 0 {
		sel.Local = termServingLocal
	}
	return sel
}

func byHints(ready []*Endpoint, nodeName, zone string) []*Endpoint {
	if len(ready) == 0 {
		return ready
	}
	if out, ok := filterHints(ready, nodeName, func(e *Endpoint) []string { return e.NodeHints }); ok {
		return out
	}
	if zone != "" {
		if out, ok := filterHints(ready, zone, func(e *Endpoint) []string { return e.ZoneHints }); ok {
			return out
		}
	}
	return ready
}

// filterHints keeps the endpoints whose hints name want; it applies only if
// every endpoint carries hints of that kind and at least one matches.
func filterHints(eps []*Endpoint, want string, hints func(*Endpoint) []string) ([]*Endpoint, bool) {
	var out []*Endpoint
	for _, e := range eps {
		h := hints(e)
		if len(h) == 0 {
			return nil, false
		}
		for _, x := range h {
			if x == want {
				out = append(out, e)
				break
			}
		}
	}
	return out, len(out) > 0
}
