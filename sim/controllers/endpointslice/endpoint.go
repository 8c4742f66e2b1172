package endpointslice

import (
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	netutils "k8s.io/utils/net"

	"github.com/proxysim/proxysim/sim/controllers/podindex"
)

// IncludePod is the endpoint controllers' predicate (k8s.io/endpointslice
// util.ShouldPodBeInEndpoints): terminal pods (Succeeded, Failed) never,
// pods without an IP never, pods being deleted only with
// includeTerminating.
func IncludePod(p *v1.Pod, includeTerminating bool) bool {
	if p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
		return false
	}
	if p.Status.PodIP == "" && len(p.Status.PodIPs) == 0 {
		return false
	}
	return includeTerminating || p.DeletionTimestamp == nil
}

// SetsHostname is the rule both controllers share (util.ShouldSetHostname):
// the pod's hostname is published only when its subdomain names the
// Service, in the Service's namespace.
func SetsHostname(p *v1.Pod, svc *v1.Service) bool {
	return p.Spec.Hostname != "" && p.Spec.Subdomain == svc.Name && p.Namespace == svc.Namespace
}

// FindPort resolves a Service port's targetPort on a pod (k8s.io/endpointslice
// FindPort): a number as is; a name as the first container port of that
// name and protocol, then among restartable (sidecar) init containers.
func FindPort(p *v1.Pod, sp *v1.ServicePort) (int32, bool) {
	tp := sp.TargetPort
	if tp.Type == intstr.Int {
		return tp.IntVal, true
	}
	for _, c := range p.Spec.Containers {
		for _, cp := range c.Ports {
			if cp.Name == tp.StrVal && cp.Protocol == sp.Protocol {
				return cp.ContainerPort, true
			}
		}
	}
	for _, c := range p.Spec.InitContainers {
		if c.RestartPolicy == nil || *c.RestartPolicy != v1.ContainerRestartPolicyAlways {
			continue
		}
		for _, cp := range c.Ports {
			if cp.Name == tp.StrVal && cp.Protocol == sp.Protocol {
				return cp.ContainerPort, true
			}
		}
	}
	return 0, false
}

// endpointPorts are the slice ports a pod gives a Service (upstream
// getEndpointPorts): one per Service port whose targetPort resolves; none
// for a headless Service without ports. They come sorted (see portKey).
func endpointPorts(svc *v1.Service, p *v1.Pod) []discovery.EndpointPort {
	out := []discovery.EndpointPort{}
	if len(svc.Spec.Ports) == 0 && svc.Spec.ClusterIP == v1.ClusterIPNone {
		return out
	}
	for i := range svc.Spec.Ports {
		sp := &svc.Spec.Ports[i]
		n, ok := FindPort(p, sp)
		if !ok {
			continue
		}
		name, proto := sp.Name, sp.Protocol
		out = append(out, discovery.EndpointPort{Name: &name, Port: &n, Protocol: &proto, AppProtocol: sp.AppProtocol})
	}
	sortPorts(out)
	return out
}

// sortPorts orders ports by name, protocol, number. Upstream orders them by
// a hash of each port (NewPortMapKey sorts in place); the order means
// nothing to a reader of the slice, and this one is readable.
func sortPorts(ps []discovery.EndpointPort) {
	sort.SliceStable(ps, func(i, j int) bool { return portString(ps[i]) < portString(ps[j]) })
}

func portString(p discovery.EndpointPort) string {
	var b strings.Builder
	if p.Name != nil {
		b.WriteString(*p.Name)
	}
	b.WriteByte('/')
	if p.Protocol != nil {
		b.WriteString(string(*p.Protocol))
	}
	b.WriteByte('/')
	if p.Port != nil {
		fmt.Fprintf(&b, "%010d", *p.Port)
	}
	b.WriteByte('/')
	if p.AppProtocol != nil {
		b.WriteString(*p.AppProtocol)
	}
	return b.String()
}

// portKey identifies a set of ports, as upstream's PortMapKey does (there a
// hash of the sorted ports): endpoints with the same ports share slices.
func portKey(ps []discovery.EndpointPort) string {
	cp := append([]discovery.EndpointPort(nil), ps...)
	sortPorts(cp)
	parts := make([]string, len(cp))
	for i, p := range cp {
		parts[i] = portString(p)
	}
	return strings.Join(parts, ",")
}

// podEndpoint converts a pod for a slice of one address type (upstream
// podToEndpoint): serving = Ready, terminating = being deleted, ready =
// publishNotReadyAddresses or (serving and not terminating); addresses are
// the pod's podIPs of that family, normalised; zone from the node's label.
func podEndpoint(p *v1.Pod, node *v1.Node, svc *v1.Service, at discovery.AddressType) discovery.Endpoint {
	serving := podindex.Ready(p)
	terminating := p.DeletionTimestamp != nil
	ready := svc.Spec.PublishNotReadyAddresses || (serving && !terminating)
	ep := discovery.Endpoint{
		Addresses:  addressesOf(p, at),
		Conditions: discovery.EndpointConditions{Ready: &ready, Serving: &serving, Terminating: &terminating},
		TargetRef:  &v1.ObjectReference{Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.UID},
	}
	if p.Spec.NodeName != "" {
		n := p.Spec.NodeName
		ep.NodeName = &n
	}
	if node != nil {
		if z := node.Labels[v1.LabelTopologyZone]; z != "" {
			ep.Zone = &z
		}
	}
	if SetsHostname(p, svc) {
		h := p.Spec.Hostname
		ep.Hostname = &h
	}
	return ep
}

func addressesOf(p *v1.Pod, at discovery.AddressType) []string {
	out := []string{}
	for _, pip := range p.Status.PodIPs {
		ip := netutils.ParseIPSloppy(pip.IP)
		if ip == nil {
			continue
		}
		if netutils.IsIPv6(ip) == (at == discovery.AddressTypeIPv6) {
			out = append(out, ip.String())
		}
	}
	return out
}

// endpointID is an endpoint's identity inside the reconciler (upstream
// hashEndpoint): sorted addresses, hostname, and the target's namespace
// and name. A pod whose IP changes is a different endpoint.
func endpointID(ep *discovery.Endpoint) string {
	addrs := append([]string(nil), ep.Addresses...)
	sort.Strings(addrs)
	var b strings.Builder
	b.WriteString(strings.Join(addrs, ","))
	b.WriteByte('|')
	if ep.Hostname != nil {
		b.WriteString(*ep.Hostname)
	}
	b.WriteByte('|')
	if ep.TargetRef != nil {
		b.WriteString(ep.TargetRef.Namespace + "/" + ep.TargetRef.Name)
	}
	return b.String()
}

// sameBeyondID reports whether two endpoints of one identity need no
// rewrite (upstream EndpointsEqualBeyondHash): node, zone, the three
// conditions and the target reference (its resourceVersion aside).
func sameBeyondID(a, b *discovery.Endpoint) bool {
	if !strPtrEq(a.NodeName, b.NodeName) || !strPtrEq(a.Zone, b.Zone) {
		return false
	}
	c, d := a.Conditions, b.Conditions
	if !boolPtrEq(c.Ready, d.Ready) || !boolPtrEq(c.Serving, d.Serving) || !boolPtrEq(c.Terminating, d.Terminating) {
		return false
	}
	if (a.TargetRef == nil) != (b.TargetRef == nil) {
		return false
	}
	if a.TargetRef != nil {
		x, y := *a.TargetRef, *b.TargetRef
		x.ResourceVersion, y.ResourceVersion = "", ""
		return x == y
	}
	return true
}

func strPtrEq(a, b *string) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

func boolPtrEq(a, b *bool) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

// addressTypes are the slice address types a Service gets (upstream
// getAddressTypesForService), IPv4 first: from ipFamilies; failing that the
// cluster IP's family; failing that (headless) both.
func addressTypes(svc *v1.Service) []discovery.AddressType {
	var v4, v6 bool
	for _, f := range svc.Spec.IPFamilies {
		v4 = v4 || f == v1.IPv4Protocol
		v6 = v6 || f == v1.IPv6Protocol
	}
	if !v4 && !v6 {
		if ip := svc.Spec.ClusterIP; ip != "" && ip != v1.ClusterIPNone {
			if netutils.IsIPv6String(ip) {
				v6 = true
			} else {
				v4 = true
			}
		} else {
			v4, v6 = true, true
		}
	}
	var out []discovery.AddressType
	if v4 {
		out = append(out, discovery.AddressTypeIPv4)
	}
	if v6 {
		out = append(out, discovery.AddressTypeIPv6)
	}
	return out
}
