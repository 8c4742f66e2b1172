package proxy

// Selection is a service port's usable endpoints.
type Selection struct {
	// Cluster is for traffic under a Cluster policy; nil when the port never
	// uses Cluster endpoints.
	Cluster []*Endpoint
	// Local is for traffic under a Local policy; nil when the port never
	// uses Local endpoints, or has none.
	Local []*Endpoint
	// HasAnyEndpoints is true when some endpoint anywhere can take traffic.
	HasAnyEndpoints bool
}

// Topology modes chosen from hints.
const (
	topologyNone     = ""
	topologySameNode = "PreferSameNode"
	topologySameZone = "PreferSameZone"
)

// SelectEndpoints splits a service port's endpoints into the cluster and
// local sets.
//
// Usable means ready; with no ready endpoint, serving and terminating (for
// the cluster and local sets independently). The cluster set is also
// narrowed by topology hints: to this node's when every ready endpoint has
// node hints and one names this node, else to this zone's under the same
// rule for zone hints, else not at all.
func SelectEndpoints(svc *ServicePort, eps []*Endpoint, nodeName, zone string) Selection {
	var sel Selection
	if len(eps) == 0 {
		return sel
	}
	if svc.UsesClusterEndpoints() {
		mode := topologyMode(eps, nodeName, zone)
		sel.Cluster = filterEndpoints(eps, func(e *Endpoint) bool { return e.Ready && forTopology(e, mode, nodeName, zone) })
		if len(sel.Cluster) == 0 {
			sel.Cluster = filterEndpoints(eps, func(e *Endpoint) bool { return e.Serving && e.Terminating })
		}
		sel.HasAnyEndpoints = len(sel.Cluster) > 0
	}
	if !svc.UsesLocalEndpoints() {
		return sel
	}
	var localReady, localTerminating bool
	for _, e := range eps {
		switch {
		case e.Ready:
			sel.HasAnyEndpoints = true
			localReady = localReady || e.IsLocal
		case e.Serving && e.Terminating:
			sel.HasAnyEndpoints = true
			localTerminating = localTerminating || e.IsLocal
		}
	}
	for _, e := range eps {
		switch {
		case localReady && e.IsLocal && e.Ready:
			sel.Local = append(sel.Local, e)
		case !localReady && localTerminating && e.IsLocal && e.Serving && e.Terminating:
			sel.Local = append(sel.Local, e)
		}
	}
	return sel
}

// filterEndpoints returns the endpoints keep accepts, in order, never nil:
// eps itself, capped so that an append cannot reach its array, when it
// accepts them all (selection runs for every changed service at every sync).
func filterEndpoints(eps []*Endpoint, keep func(*Endpoint) bool) []*Endpoint {
	n := 0
	for _, e := range eps {
		if keep(e) {
			n++
		}
	}
	if n == len(eps) {
		return eps[:n:n]
	}
	out := make([]*Endpoint, 0, n)
	for _, e := range eps {
		if keep(e) {
			out = append(out, e)
		}
	}
	return out
}

func topologyMode(eps []*Endpoint, nodeName, zone string) string {
	anyReady := false
	allNode, forNode := true, false
	allZone, forZone := true, false
	for _, e := range eps {
		if !e.Ready {
			continue
		}
		anyReady = true
		if len(e.NodeHints) == 0 {
			allNode = false
		} else if contains(e.NodeHints, nodeName) {
			forNode = true
		}
		if len(e.ZoneHints) == 0 {
			allZone = false
		} else if contains(e.ZoneHints, zone) {
			forZone = true
		}
	}
	switch {
	case !anyReady:
		return topologyNone
	case allNode && forNode:
		return topologySameNode
	case allZone && forZone:
		return topologySameZone
	}
	return topologyNone
}

func forTopology(e *Endpoint, mode, nodeName, zone string) bool {
	switch mode {
	case topologySameNode:
		return contains(e.NodeHints, nodeName)
	case topologySameZone:
		return contains(e.ZoneHints, zone)
	}
	return true
}

func contains(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}
