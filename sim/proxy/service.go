// Package proxy holds the cluster state a service proxy works from: services
// and endpoints keyed by ServicePortName, the change trackers that batch
// informer events between syncs, and endpoint selection.
//
// It is backend-neutral: it knows nothing of IPVS, iptables or nftables, and
// nothing of clocks or informers.
package proxy

import (
	"fmt"
	"net"
	"reflect"
	"sort"
	"strconv"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ServicePortName identifies one port of one service.
type ServicePortName struct {
	types.NamespacedName
	Port     string
	Protocol v1.Protocol
}

func (n ServicePortName) String() string {
	if n.Port == "" {
		return n.NamespacedName.String()
	}
	return n.NamespacedName.String() + ":" + n.Port
}

// DefaultAffinityTimeout is the ClientIP affinity timeout when none is set
// (three hours, as in the API's default).
const DefaultAffinityTimeout = 10800

// ServicePort is what a proxy needs to know about one service port.
type ServicePort struct {
	ClusterIP               net.IP
	Port                    int32
	Protocol                v1.Protocol
	NodePort                int32
	ExternalIPs             []string
	LoadBalancerIPs         []string
	SessionAffinityClientIP bool
	StickyMaxAgeSeconds     int32
	ExternalPolicyLocal     bool
	InternalPolicyLocal     bool
	HealthCheckNodePort     int32
	// UsesTopology is true when the service opts in to topology-aware routing
	// (the topology-mode annotation or trafficDistribution).
	UsesTopology bool
}

// ExternallyAccessible reports whether the port has any external entry point.
func (p *ServicePort) ExternallyAccessible() bool {
	return p.NodePort != 0 || len(p.ExternalIPs) > 0 || len(p.LoadBalancerIPs) > 0
}

// ServicePortMap holds every port of a set of services.
type ServicePortMap map[ServicePortName]*ServicePort

// Family is the IP family a proxier serves.
type Family = v1.IPFamily

// ShouldSkipService reports whether a proxy of family ignores the service:
// headless, ExternalName, or without a cluster IP of that family.
func ShouldSkipService(svc *v1.Service, family Family) bool {
	if svc.Spec.Type == v1.ServiceTypeExternalName {
		return true
	}
	if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == v1.ClusterIPNone {
		return true
	}
	return clusterIPOf(svc, family) == nil
}

func isFamily(ip net.IP, family Family) bool {
	if ip == nil {
		return false
	}
	if family == v1.IPv6Protocol {
		return ip.To4() == nil
	}
	return ip.To4() != nil
}

func clusterIPOf(svc *v1.Service, family Family) net.IP {
	ips := svc.Spec.ClusterIPs
	if len(ips) == 0 {
		ips = []string{svc.Spec.ClusterIP}
	}
	for _, s := range ips {
		if ip := net.ParseIP(s); isFamily(ip, family) {
			return ip
		}
	}
	return nil
}

func filterFamily(addrs []string, family Family) []string {
	var out []string
	for _, a := range addrs {
		if isFamily(net.ParseIP(a), family) {
			out = append(out, a)
		}
	}
	return out
}

// topologyAnnotation and its deprecated predecessor opt a service in to
// topology-aware routing.
const (
	topologyModeAnnotation  = "service.kubernetes.io/topology-mode"
	topologyHintsAnnotation = "service.kubernetes.io/topology-aware-hints"
)

// ServicePorts converts a Service into its ports for one IP family; nil when
// the service is skipped.
func ServicePorts(svc *v1.Service, family Family) ServicePortMap {
	if svc == nil || ShouldSkipService(svc, family) {
		return nil
	}
	m := make(ServicePortMap, len(svc.Spec.Ports))
	name := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	for i := range svc.Spec.Ports {
		sp := &svc.Spec.Ports[i]
		proto := sp.Protocol
		if proto == "" {
			proto = v1.ProtocolTCP
		}
		p := &ServicePort{
			ClusterIP:   clusterIPOf(svc, family),
			Port:        sp.Port,
			Protocol:    proto,
			NodePort:    sp.NodePort,
			ExternalIPs: filterFamily(svc.Spec.ExternalIPs, family),
		}
		if svc.Spec.Type == v1.ServiceTypeLoadBalancer {
			var ing []string
			for _, in := range svc.Status.LoadBalancer.Ingress {
				if in.IP != "" {
					ing = append(ing, in.IP)
				}
			}
			p.LoadBalancerIPs = filterFamily(ing, family)
		}
		if svc.Spec.SessionAffinity == v1.ServiceAffinityClientIP {
			p.SessionAffinityClientIP = true
			p.StickyMaxAgeSeconds = DefaultAffinityTimeout
			if c := svc.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
				p.StickyMaxAgeSeconds = *c.ClientIP.TimeoutSeconds
			}
		}
		external := svc.Spec.Type == v1.ServiceTypeNodePort || svc.Spec.Type == v1.ServiceTypeLoadBalancer || len(svc.Spec.ExternalIPs) > 0
		p.ExternalPolicyLocal = external && svc.Spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal
		p.InternalPolicyLocal = svc.Spec.InternalTrafficPolicy != nil && *svc.Spec.InternalTrafficPolicy == v1.ServiceInternalTrafficPolicyLocal
		if p.ExternalPolicyLocal {
			p.HealthCheckNodePort = svc.Spec.HealthCheckNodePort
		}
		mode := svc.Annotations[topologyModeAnnotation]
		if mode == "" {
			mode = svc.Annotations[topologyHintsAnnotation]
		}
		p.UsesTopology = (mode != "" && mode != "disabled" && mode != "Disabled") || svc.Spec.TrafficDistribution != nil
		m[ServicePortName{NamespacedName: name, Port: sp.Name, Protocol: proto}] = p
	}
	return m
}

// ServiceChangeTracker batches service changes between syncs. For each
// service it keeps the state before the first change of the batch and the
// latest state; a service that returns to where it started drops out.
type ServiceChangeTracker struct {
	family Family
	mu     sync.Mutex
	items  map[types.NamespacedName]*serviceChange
}

type serviceChange struct {
	previous, current ServicePortMap
}

// NewServiceChangeTracker returns a tracker for one IP family.
func NewServiceChangeTracker(family Family) *ServiceChangeTracker {
	return &ServiceChangeTracker{family: family, items: map[types.NamespacedName]*serviceChange{}}
}

// Update records a change from previous to current (either may be nil) and
// reports whether any change is pending.
func (t *ServiceChangeTracker) Update(previous, current *v1.Service) bool {
	svc := current
	if svc == nil {
		svc = previous
	}
	if svc == nil {
		return false
	}
	name := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	t.mu.Lock()
	defer t.mu.Unlock()
	ch, ok := t.items[name]
	if !ok {
		ch = &serviceChange{previous: ServicePorts(previous, t.family)}
		t.items[name] = ch
	}
	ch.current = ServicePorts(current, t.family)
	if reflect.DeepEqual(ch.previous, ch.current) {
		delete(t.items, name)
	}
	return len(t.items) > 0
}

// Pending reports how many services have a change waiting.
func (t *ServiceChangeTracker) Pending() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.items)
}

func (t *ServiceChangeTracker) checkout() map[types.NamespacedName]*serviceChange {
	t.mu.Lock()
	defer t.mu.Unlock()
	items := t.items
	t.items = map[types.NamespacedName]*serviceChange{}
	return items
}

// ServiceMapResult says what an Update of a ServiceMap changed.
type ServiceMapResult struct {
	// Updated lists the services whose ports changed, sorted.
	Updated []types.NamespacedName
	// DeletedUDP lists cluster IPs of UDP ports that went away (for conntrack
	// cleanup).
	DeletedUDP []string
}

// ServiceMap is the applied service state of a proxier.
type ServiceMap ServicePortMap

// Update applies the tracker's pending changes.
func (m ServiceMap) Update(t *ServiceChangeTracker) ServiceMapResult {
	var res ServiceMapResult
	for name, ch := range t.checkout() {
		res.Updated = append(res.Updated, name)
		for spn, p := range ch.previous {
			if _, still := ch.current[spn]; !still {
				if p.Protocol == v1.ProtocolUDP {
					res.DeletedUDP = append(res.DeletedUDP, p.ClusterIP.String())
				}
			}
			delete(m, spn)
		}
		for spn, p := range ch.current {
			m[spn] = p
		}
	}
	sort.Slice(res.Updated, func(i, j int) bool { return res.Updated[i].String() < res.Updated[j].String() })
	sort.Strings(res.DeletedUDP)
	return res
}

// SortedNames returns the map's keys in a stable order.
func (m ServiceMap) SortedNames() []ServicePortName {
	out := make([]ServicePortName, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return lessSPN(out[i], out[j]) })
	return out
}

func lessSPN(a, b ServicePortName) bool {
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	if a.Name != b.Name {
		return a.Name < b.Name
	}
	if a.Port != b.Port {
		return a.Port < b.Port
	}
	return a.Protocol < b.Protocol
}

// HostPort joins an address and port for display and keys.
func HostPort(ip string, port int32) string { return net.JoinHostPort(ip, strconv.Itoa(int(port))) }

// ErrNoServiceName is returned for an EndpointSlice without the
// kubernetes.io/service-name label.
var ErrNoServiceName = fmt.Errorf("endpointslice has no %s label", "kubernetes.io/service-name")
