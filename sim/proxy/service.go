// Package proxy holds the cluster state a service proxy works from: services
// and endpoints keyed by ServicePortName, the change trackers that batch
// informer events between syncs, and endpoint selection.
//
// It is backend-neutral: it knows nothing of IPVS, iptables or nftables, and
// nothing of clocks or informers.
package proxy

import (
	"bytes"
	"fmt"
	"net"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	netutils "k8s.io/utils/net"
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

// DefaultAffinityTimeout is the ClientIP affinity timeout the API server
// defaults (three hours), used when a service gives none.
const DefaultAffinityTimeout = 10800

// ServicePort is what a proxy needs to know about one service port.
// Addresses are in canonical text form.
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

	// LoadBalancerSourceRanges are the CIDRs of this family allowed to
	// reach the LoadBalancer IPs, canonical; none when the field is empty or
	// holds a zero-length prefix ("allow all").
	LoadBalancerSourceRanges []string
}

// ExternallyAccessible reports whether the port has any external entry point.
func (p *ServicePort) ExternallyAccessible() bool {
	return p.NodePort != 0 || len(p.ExternalIPs) > 0 || len(p.LoadBalancerIPs) > 0
}

// UsesClusterEndpoints reports whether any traffic to the port may go to
// endpoints anywhere: internal traffic with a Cluster policy, or external
// traffic at all (a Local external policy still short-circuits traffic from
// inside the cluster to every endpoint).
func (p *ServicePort) UsesClusterEndpoints() bool {
	return !p.InternalPolicyLocal || p.ExternallyAccessible()
}

// UsesLocalEndpoints reports whether any traffic to the port is restricted
// to endpoints on this node.
func (p *ServicePort) UsesLocalEndpoints() bool {
	return p.InternalPolicyLocal || (p.ExternalPolicyLocal && p.ExternallyAccessible())
}

// ServicePortMap holds every port of a set of services.
type ServicePortMap map[ServicePortName]*ServicePort

// Family is the IP family a proxier serves.
type Family = v1.IPFamily

// ShouldSkipService reports whether every proxy ignores the service: no
// cluster IP (headless or unset), or ExternalName.
func ShouldSkipService(svc *v1.Service) bool {
	if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == v1.ClusterIPNone {
		return true
	}
	return svc.Spec.Type == v1.ServiceTypeExternalName
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

// ClusterIPOf is the service's cluster IP of one family: from clusterIPs,
// matched by position with ipFamilies when those are set, else the single
// clusterIP if it is of that family. Empty when there is none.
func ClusterIPOf(svc *v1.Service, family Family) string {
	if len(svc.Spec.IPFamilies) == 0 {
		ip := svc.Spec.ClusterIP
		if ip == "" || ip == v1.ClusterIPNone {
			return ""
		}
		if isFamily(netutils.ParseIPSloppy(ip), family) || (family == v1.IPv4Protocol && netutils.ParseIPSloppy(ip) == nil) {
			return ip
		}
		return ""
	}
	for i, f := range svc.Spec.IPFamilies {
		if f == family && i < len(svc.Spec.ClusterIPs) {
			return svc.Spec.ClusterIPs[i]
		}
	}
	return ""
}

// filterFamily keeps the parseable addresses of one family, canonicalized.
func filterFamily(addrs []string, family Family) []string {
	var out []string
	for _, a := range addrs {
		if ip := netutils.ParseIPSloppy(a); isFamily(ip, family) {
			out = append(out, ip.String())
		}
	}
	return out
}

// sourceRangesOf keeps the parseable CIDRs of one family (the API lets
// padding spaces through), each as its network's canonical text; a zero
// prefix among them means "from anywhere", the same as none
// (pkg/proxy/serviceport.go newBaseServiceInfo).
func sourceRangesOf(ranges []string, family Family) []string {
	var out []string
	for _, r := range ranges {
		_, n, err := netutils.ParseCIDRSloppy(strings.TrimSpace(r))
		if err != nil || !isFamily(n.IP, family) {
			continue
		}
		if ones, _ := n.Mask.Size(); ones == 0 {
			return nil
		}
		out = append(out, n.String())
	}
	return out
}

// externallyAccessible is the API's notion: a NodePort or LoadBalancer
// service, or a ClusterIP service with external IPs.
func externallyAccessible(svc *v1.Service) bool {
	switch svc.Spec.Type {
	case v1.ServiceTypeLoadBalancer, v1.ServiceTypeNodePort:
		return true
	case v1.ServiceTypeClusterIP:
		return len(svc.Spec.ExternalIPs) > 0
	}
	return false
}

// ServicePorts converts a Service into its ports for one IP family; nil when
// the service is skipped or has no cluster IP of that family.
func ServicePorts(svc *v1.Service, family Family) ServicePortMap {
	if svc == nil || ShouldSkipService(svc) {
		return nil
	}
	clusterIP := ClusterIPOf(svc, family)
	if clusterIP == "" {
		return nil
	}
	externalLocal := externallyAccessible(svc) && svc.Spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal
	internalLocal := svc.Spec.InternalTrafficPolicy != nil && *svc.Spec.InternalTrafficPolicy == v1.ServiceInternalTrafficPolicyLocal
	var lbIPs []string
	for _, in := range svc.Status.LoadBalancer.Ingress {
		// An ingress in Proxy mode is a load balancer that proxies: the
		// proxy programs nothing for its address.
		if in.IP == "" || (in.IPMode != nil && *in.IPMode != v1.LoadBalancerIPModeVIP) {
			continue
		}
		lbIPs = append(lbIPs, in.IP)
	}
	lbIPs = filterFamily(lbIPs, family)
	externalIPs := filterFamily(svc.Spec.ExternalIPs, family)
	sourceRanges := sourceRangesOf(svc.Spec.LoadBalancerSourceRanges, family)
	m := make(ServicePortMap, len(svc.Spec.Ports))
	name := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	for i := range svc.Spec.Ports {
		sp := &svc.Spec.Ports[i]
		proto := sp.Protocol
		if proto == "" {
			proto = v1.ProtocolTCP // the API server's default
		}
		p := &ServicePort{
			ClusterIP:           netutils.ParseIPSloppy(clusterIP),
			Port:                sp.Port,
			Protocol:            proto,
			NodePort:            sp.NodePort,
			ExternalIPs:         externalIPs,
			LoadBalancerIPs:     lbIPs,
			ExternalPolicyLocal: externalLocal,
			InternalPolicyLocal: internalLocal,
		}
		p.LoadBalancerSourceRanges = sourceRanges
		if svc.Spec.SessionAffinity == v1.ServiceAffinityClientIP {
			p.SessionAffinityClientIP = true
			p.StickyMaxAgeSeconds = DefaultAffinityTimeout
			if c := svc.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
				p.StickyMaxAgeSeconds = *c.ClientIP.TimeoutSeconds
			}
		}
		// Only a LoadBalancer with a Local external policy has a health
		// check node port.
		if svc.Spec.Type == v1.ServiceTypeLoadBalancer && externalLocal {
			p.HealthCheckNodePort = svc.Spec.HealthCheckNodePort
		}
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
	return t.UpdatePorts(name, ServicePorts(previous, t.family), ServicePorts(current, t.family))
}

// UpdatePorts is Update with both states already converted (by
// ServicePorts, for this tracker's family): a cluster of proxies converts
// each change once and hands the same maps, never modified, to every
// node's tracker.
func (t *ServiceChangeTracker) UpdatePorts(name types.NamespacedName, previous, current ServicePortMap) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	ch, ok := t.items[name]
	if !ok {
		ch = &serviceChange{previous: previous}
		t.items[name] = ch
	}
	ch.current = current
	if reflect.DeepEqual(ch.previous, ch.current) {
		delete(t.items, name)
	}
	return len(t.items) > 0
}

// DropPending forgets every pending change, as a sync's checkout does, for
// a tracker whose changes nothing applies (a node that keeps no service
// map of its own).
func (t *ServiceChangeTracker) DropPending() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.items) > 0 {
		t.items = map[types.NamespacedName]*serviceChange{}
	}
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
	// Ports holds, for each updated service, its ports now (sorted; none
	// when it was deleted or is skipped).
	Ports map[types.NamespacedName][]ServicePortName
}

// ServiceMap is the applied service state of a proxier.
type ServiceMap ServicePortMap

// Update applies the tracker's pending changes.
func (m ServiceMap) Update(t *ServiceChangeTracker) ServiceMapResult {
	res := ServiceMapResult{Ports: map[types.NamespacedName][]ServicePortName{}}
	for name, ch := range t.checkout() {
		res.Updated = append(res.Updated, name)
		ports := make([]ServicePortName, 0, len(ch.current))
		for spn := range ch.current {
			ports = append(ports, spn)
		}
		sort.Slice(ports, func(i, j int) bool { return ports[i].Less(ports[j]) })
		res.Ports[name] = ports
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
	slices.SortFunc(res.Updated, CompareNames)
	sort.Strings(res.DeletedUDP)
	return res
}

// Less orders service port names by namespace, name, port name and
// protocol: the order every proxier here walks them in (kube-proxy walks a
// Go map; a deterministic simulation sorts).
func (a ServicePortName) Less(b ServicePortName) bool {
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

// SortedNames lists a ServiceMap's port names in Less order.
func (sm ServiceMap) SortedNames() []ServicePortName {
	out := make([]ServicePortName, 0, len(sm))
	for n := range sm {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Less(out[j]) })
	return out
}

// CompareNames orders services by their "namespace/name" text, as a sort
// of their String() would, without building it.
func CompareNames(a, b types.NamespacedName) int {
	var x, y [128]byte
	return bytes.Compare(appendName(x[:0], a), appendName(y[:0], b))
}

func appendName(b []byte, n types.NamespacedName) []byte {
	b = append(b, n.Namespace...)
	b = append(b, '/')
	return append(b, n.Name...)
}

// HostPort joins an address and port for display and keys.
func HostPort(ip string, port int32) string { return net.JoinHostPort(ip, strconv.Itoa(int(port))) }

// ErrNoServiceName is returned for an EndpointSlice without the
// kubernetes.io/service-name label.
var ErrNoServiceName = fmt.Errorf("endpointslice has no %s label", "kubernetes.io/service-name")
