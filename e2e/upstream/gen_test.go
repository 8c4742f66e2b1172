package upstream

import (
	"fmt"
	"math/rand"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// gen produces random but API-valid changes: what an API server could send.
// Inputs on which kube-proxy itself is nondeterministic are avoided: two
// non-terminating copies of one endpoint in different slices (kube-proxy
// keeps whichever it meets last while ranging over a map). Non-terminating
// endpoints therefore use addresses private to their slice; terminating ones
// use shared addresses but are a pure function of the address, so all their
// copies are identical.
type gen struct {
	// iptables adds what only the iptables comparison needs and would
	// change the trackers' random stream: loadBalancerSourceRanges, and
	// (with big) slices of hundreds of endpoints, for large-cluster mode.
	iptables, big bool

	r        *rand.Rand
	rv       int
	services map[string]*v1.Service
	slices   map[string]*discovery.EndpointSlice
}

var (
	namespaces   = []string{"default", "other"}
	serviceNames = []string{"a", "b", "c"}
	sliceSuffix  = []string{"-1", "-2", "-3"}
	portNames    = []string{"", "http", "dns", "metrics"}
	protocols    = []v1.Protocol{v1.ProtocolTCP, v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP}
)

func (g *gen) pick(n int) int { return g.r.Intn(n) }

func (g *gen) chance(pct int) bool { return g.r.Intn(100) < pct }

func (g *gen) nextRV() string {
	g.rv++
	return fmt.Sprint(g.rv)
}

func (g *gen) meta(ns, name string) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: g.nextRV()}
	if g.chance(30) {
		m.Labels = map[string]string{"team": []string{"x", "y"}[g.pick(2)]}
	}
	if g.chance(20) {
		m.Annotations = map[string]string{"note": fmt.Sprint(g.pick(3))}
	}
	return m
}

// serviceChange returns an informer event: (nil, new), (old, new) or (old, nil).
func (g *gen) serviceChange() (*v1.Service, *v1.Service) {
	key := namespaces[g.pick(2)] + "/" + serviceNames[g.pick(3)]
	old := g.services[key]
	if old == nil {
		s := g.service(key)
		g.services[key] = s
		return nil, s
	}
	switch {
	case g.chance(15):
		delete(g.services, key)
		return old, nil
	case g.chance(15):
		return old, old // resync
	case g.chance(15):
		s := old.DeepCopy()
		s.ObjectMeta = g.meta(s.Namespace, s.Name) // metadata only
		g.services[key] = s
		return old, s
	}
	s := g.service(key)
	g.services[key] = s
	return old, s
}

// v4 and v6 make address b of block a.
func (g *gen) v4(a, b int) string { return fmt.Sprintf("10.%d.%d.%d", a, b/250, 1+b%250) }
func (g *gen) v6(a, b int) string { return fmt.Sprintf("fd00:%x::%x", a, 1+b) }

func (g *gen) service(key string) *v1.Service {
	var ns, name string
	for i := range key {
		if key[i] == '/' {
			ns, name = key[:i], key[i+1:]
		}
	}
	s := &v1.Service{ObjectMeta: g.meta(ns, name)}
	switch g.pick(20) {
	case 0:
		s.Spec.Type = v1.ServiceTypeExternalName
		s.Spec.ExternalName = "example.com"
	case 1, 2, 3, 4:
		s.Spec.Type = v1.ServiceTypeNodePort
	case 5, 6, 7, 8:
		s.Spec.Type = v1.ServiceTypeLoadBalancer
	case 9:
		s.Spec.Type = ""
	default:
		s.Spec.Type = v1.ServiceTypeClusterIP
	}
	v4, v6 := g.v4(96, g.pick(5)), g.v6(96, g.pick(5))
	switch g.pick(12) {
	case 0:
		s.Spec.ClusterIP = v1.ClusterIPNone
	case 1:
		s.Spec.ClusterIP = ""
	case 2, 3:
		s.Spec.ClusterIP, s.Spec.ClusterIPs = v6, []string{v6}
		s.Spec.IPFamilies = []v1.IPFamily{v1.IPv6Protocol}
	case 4, 5:
		s.Spec.ClusterIP, s.Spec.ClusterIPs = v4, []string{v4, v6}
		s.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	case 6:
		s.Spec.ClusterIP, s.Spec.ClusterIPs = v6, []string{v6, v4}
		s.Spec.IPFamilies = []v1.IPFamily{v1.IPv6Protocol, v1.IPv4Protocol}
	case 7:
		s.Spec.ClusterIP = v4 // an old object: no clusterIPs, no families
	case 8:
		s.Spec.ClusterIP = v6
	case 9:
		s.Spec.ClusterIP = fmt.Sprintf("010.096.000.%03d", 1+g.pick(5)) // leading zeros, as old clusters allowed
	default:
		s.Spec.ClusterIP, s.Spec.ClusterIPs = v4, []string{v4}
		s.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol}
	}
	n := 1 + g.pick(3)
	names := append([]string(nil), portNames...)
	g.r.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	for i := 0; i < n; i++ {
		pn := names[i]
		if n > 1 && pn == "" {
			pn = "extra"
		}
		p := v1.ServicePort{Name: pn, Port: int32(80 + g.pick(3)), Protocol: protocols[g.pick(len(protocols))]}
		if s.Spec.Type == v1.ServiceTypeNodePort || (s.Spec.Type == v1.ServiceTypeLoadBalancer && !g.chance(20)) {
			p.NodePort = int32(30000 + g.pick(4))
		}
		s.Spec.Ports = append(s.Spec.Ports, p)
	}
	for i := g.pick(3); i > 0; i-- {
		ips := []string{g.v4(100, g.pick(4)), g.v6(100, g.pick(4)), "bogus", " 10.100.0.1", "010.100.000.002"}
		s.Spec.ExternalIPs = append(s.Spec.ExternalIPs, ips[g.pick(len(ips))])
	}
	if s.Spec.Type == v1.ServiceTypeLoadBalancer {
		for i := g.pick(3); i > 0; i-- {
			in := v1.LoadBalancerIngress{}
			switch g.pick(4) {
			case 0:
				in.Hostname = "lb.example.com"
			case 1:
				in.IP = g.v6(101, g.pick(3))
			default:
				in.IP = g.v4(101, g.pick(3))
			}
			switch g.pick(4) {
			case 0:
				in.IPMode = ptr.To(v1.LoadBalancerIPModeProxy)
			case 1:
				in.IPMode = ptr.To(v1.LoadBalancerIPModeVIP)
			}
			s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, in)
		}
	}
	s.Spec.ExternalTrafficPolicy = []v1.ServiceExternalTrafficPolicy{"", v1.ServiceExternalTrafficPolicyCluster, v1.ServiceExternalTrafficPolicyLocal, v1.ServiceExternalTrafficPolicyLocal}[g.pick(4)]
	switch g.pick(4) {
	case 0:
		s.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal)
	case 1:
		s.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyCluster)
	}
	if g.chance(30) {
		s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
		s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To(int32(60 * (1 + g.pick(3))))}}
	} else if g.chance(80) {
		s.Spec.SessionAffinity = v1.ServiceAffinityNone
	}
	if g.chance(50) {
		s.Spec.HealthCheckNodePort = int32(32000 + g.pick(3))
	}
	if g.iptables && s.Spec.Type == v1.ServiceTypeLoadBalancer && g.chance(80) {
		// An ingress of each family, so that the ranges have a VIP to guard.
		s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress,
			v1.LoadBalancerIngress{IP: g.v4(101, g.pick(3))}, v1.LoadBalancerIngress{IP: g.v6(101, g.pick(3))})
		ranges := []string{"10.101.0.0/16", " 192.168.0.0/24 ", "203.0.113.7/32", "0.0.0.0/0", "fd00:101::/64", "fd00:102::/48", "bogus", "010.101.000.000/16"}
		for i := 1 + g.pick(3); i > 0; i-- {
			s.Spec.LoadBalancerSourceRanges = append(s.Spec.LoadBalancerSourceRanges, ranges[g.pick(len(ranges))])
		}
	}
	return s
}

// sliceChange returns a slice event: the slice and whether it is removed.
func (g *gen) sliceChange() (*discovery.EndpointSlice, bool) {
	ns := namespaces[g.pick(2)]
	svc := serviceNames[g.pick(3)]
	name := svc + sliceSuffix[g.pick(3)]
	key := ns + "/" + name
	old := g.slices[key]
	if old == nil {
		if g.chance(5) {
			return g.slice(ns, name, svc), true // delete a slice never seen
		}
		s := g.slice(ns, name, svc)
		g.slices[key] = s
		return s, false
	}
	switch {
	case g.chance(15):
		delete(g.slices, key)
		return old, true
	case g.chance(15):
		return old, false // resync: the same object again
	case g.chance(10):
		s := old.DeepCopy()
		s.ObjectMeta = g.meta(ns, name)
		s.Labels = old.Labels // keep the service label; only the version moves
		g.slices[key] = s
		return s, false
	}
	s := g.slice(ns, name, svc)
	g.slices[key] = s
	return s, false
}

// pool returns the index of a slice's private address block.
func poolOf(ns, name string) int {
	h := 0
	for _, c := range ns + "/" + name {
		h = h*31 + int(c)
	}
	if h < 0 {
		h = -h
	}
	return 1 + h%90
}

func (g *gen) slice(ns, name, svc string) *discovery.EndpointSlice {
	s := &discovery.EndpointSlice{ObjectMeta: g.meta(ns, name)}
	if !g.chance(4) {
		if s.Labels == nil {
			s.Labels = map[string]string{}
		}
		label := svc
		if g.chance(3) {
			label = serviceNames[g.pick(3)] // a slice that moves to another service
		}
		s.Labels[discovery.LabelServiceName] = label
	}
	switch g.pick(10) {
	case 0:
		s.AddressType = discovery.AddressTypeFQDN
	case 1, 2:
		s.AddressType = discovery.AddressTypeIPv6
	default:
		s.AddressType = discovery.AddressTypeIPv4
	}
	v6 := s.AddressType == discovery.AddressTypeIPv6
	for i := g.pick(4); i > 0; i-- {
		p := discovery.EndpointPort{Protocol: ptr.To(protocols[g.pick(len(protocols))])}
		switch g.pick(12) {
		case 0:
			// no name: kube-proxy ignores the port
		default:
			p.Name = ptr.To(portNames[g.pick(len(portNames))])
		}
		switch g.pick(12) {
		case 0:
		case 1:
			p.Port = ptr.To(int32(0))
		default:
			p.Port = ptr.To(int32(8080 + g.pick(3)))
		}
		s.Ports = append(s.Ports, p)
	}
	pool := poolOf(ns, name)
	n := g.pick(6)
	if g.big && g.chance(40) {
		// A big slice: distinct addresses of its own block, none
		// terminating, so that a few of them pass 1,000 endpoints.
		for i := 200 + g.pick(400); i > 0; i-- {
			addr := g.v4(pool, i)
			if v6 {
				addr = g.v6(pool, i)
			}
			e := discovery.Endpoint{Addresses: []string{addr}, Conditions: discovery.EndpointConditions{Ready: g.boolPtr()}}
			if g.chance(30) {
				e.NodeName = ptr.To(nodeName)
			}
			s.Endpoints = append(s.Endpoints, e)
		}
		n = 0
	}
	for i := n; i > 0; i-- {
		if g.chance(30) {
			s.Endpoints = append(s.Endpoints, g.terminating(v6))
			continue
		}
		addr := g.v4(pool, g.pick(5))
		if v6 {
			addr = g.v6(pool, g.pick(5))
		} else if g.chance(5) {
			addr = fmt.Sprintf("10.%03d.000.%03d", pool, 1+g.pick(5)) // leading zeros
		}
		e := discovery.Endpoint{Addresses: []string{addr}}
		if g.chance(3) {
			e.Addresses = nil
		}
		e.Conditions.Ready = g.boolPtr()
		e.Conditions.Serving = g.boolPtr()
		if g.chance(50) {
			e.Conditions.Terminating = ptr.To(false)
		}
		switch g.pick(4) {
		case 0:
			e.NodeName = ptr.To(nodeName)
		case 1:
			e.NodeName = ptr.To("node-b")
		case 2:
			e.NodeName = ptr.To("")
		}
		if g.chance(50) {
			e.Zone = ptr.To([]string{"zone-a", "zone-b"}[g.pick(2)])
		}
		e.Hints = g.hints()
		s.Endpoints = append(s.Endpoints, e)
	}
	return s
}

func (g *gen) boolPtr() *bool {
	switch g.pick(3) {
	case 0:
		return nil
	case 1:
		return ptr.To(true)
	}
	return ptr.To(false)
}

func (g *gen) hints() *discovery.EndpointHints {
	switch g.pick(6) {
	case 0:
		return &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: "zone-a"}}}
	case 1:
		return &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: "zone-b"}}}
	case 2:
		return &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: "zone-a"}, {Name: "zone-b"}}, ForNodes: []discovery.ForNode{{Name: nodeName}}}
	case 3:
		return &discovery.EndpointHints{ForNodes: []discovery.ForNode{{Name: "node-b"}}}
	}
	return nil
}

// terminating returns an endpoint from the shared block, fully determined by
// its address.
func (g *gen) terminating(v6 bool) discovery.Endpoint {
	n := g.pick(6)
	addr := g.v4(250, n)
	if v6 {
		addr = g.v6(250, n)
	}
	e := discovery.Endpoint{Addresses: []string{addr}}
	e.Conditions.Ready = ptr.To(false)
	e.Conditions.Serving = ptr.To(n%2 == 0)
	e.Conditions.Terminating = ptr.To(true)
	if n%3 == 0 {
		e.NodeName = ptr.To(nodeName)
	}
	if n%3 == 1 {
		e.Zone = ptr.To("zone-a")
		e.Hints = &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: "zone-a"}}}
	}
	return e
}
