package scenarios

import (
	"fmt"
	"net"
	"strconv"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The API server's rules for the objects a scenario holds, where a real
// cluster would refuse the object (docs/scenario-format.md lists them). They
// follow kubernetes pkg/apis/core/validation (ValidateService and its
// helpers) and pkg/apis/discovery/validation (ValidateEndpointSlice), built
// from apimachinery's validation helpers. A few rules are proxysim's own and
// say so: it has no IP allocator, so a Service must name its cluster IP.

// Limits of pkg/apis/discovery/validation.
const (
	maxSliceEndpoints     = 1000
	maxSliceAddresses     = 100
	maxSlicePorts         = 20000
	maxSliceZoneHints     = 8
	sessionAffinityMaxSec = 86400
)

// defaultService fills what the API server would default.
func defaultService(s *v1.Service) {
	if s.Namespace == "" {
		s.Namespace = "default"
	}
	if s.Spec.Type == "" {
		s.Spec.Type = v1.ServiceTypeClusterIP
	}
	if len(s.Spec.ClusterIPs) == 0 && s.Spec.ClusterIP != "" && s.Spec.Type != v1.ServiceTypeExternalName {
		s.Spec.ClusterIPs = []string{s.Spec.ClusterIP}
	}
	for i := range s.Spec.Ports {
		if s.Spec.Ports[i].Protocol == "" {
			s.Spec.Ports[i].Protocol = v1.ProtocolTCP
		}
		// The API server defaults targetPort to the port (pkg/apis/core/v1
		// defaults.go, SetDefaults_Service); the endpoint controllers read it.
		if tp := &s.Spec.Ports[i].TargetPort; tp.Type == intstr.Int && tp.IntVal == 0 {
			*tp = intstr.FromInt32(s.Spec.Ports[i].Port)
		}
	}
}

func validateService(s *v1.Service) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, apivalidation.ValidateObjectMeta(&s.ObjectMeta, true, apivalidation.NameIsDNS1035Label, field.NewPath("metadata"))...)
	spec := field.NewPath("spec")
	switch s.Spec.Type {
	case v1.ServiceTypeClusterIP, v1.ServiceTypeNodePort, v1.ServiceTypeLoadBalancer:
	case v1.ServiceTypeExternalName:
		if len(validation.IsDNS1123Subdomain(s.Spec.ExternalName)) > 0 {
			errs = append(errs, field.Invalid(spec.Child("externalName"), s.Spec.ExternalName, "must be a DNS subdomain"))
		}
	default:
		errs = append(errs, field.NotSupported(spec.Child("type"), s.Spec.Type, []string{"ClusterIP", "NodePort", "LoadBalancer", "ExternalName"}))
	}
	headless := s.Spec.ClusterIP == v1.ClusterIPNone
	if s.Spec.Type != v1.ServiceTypeExternalName {
		switch ip := s.Spec.ClusterIP; {
		case ip == "":
			errs = append(errs, field.Required(spec.Child("clusterIP"), "proxysim has no IP allocator: give the cluster IP"))
		case !headless:
			errs = append(errs, validation.IsValidIP(spec.Child("clusterIP"), ip)...)
		}
		if len(s.Spec.ClusterIPs) > 0 && s.Spec.ClusterIPs[0] != s.Spec.ClusterIP {
			errs = append(errs, field.Invalid(spec.Child("clusterIPs").Index(0), s.Spec.ClusterIPs[0], "must match spec.clusterIP"))
		}
		for i, ip := range s.Spec.ClusterIPs {
			if i > 0 && ip != v1.ClusterIPNone {
				errs = append(errs, validation.IsValidIP(spec.Child("clusterIPs").Index(i), ip)...)
			}
		}
		if len(s.Spec.Ports) == 0 && !headless {
			errs = append(errs, field.Required(spec.Child("ports"), "at least one port"))
		}
	}
	type portKey struct {
		port     int32
		protocol v1.Protocol
	}
	names := map[string]bool{}
	ports := map[portKey]bool{}
	nodePorts := map[portKey]bool{}
	for i, p := range s.Spec.Ports {
		f := spec.Child("ports").Index(i)
		for _, msg := range validation.IsValidPortNum(int(p.Port)) {
			errs = append(errs, field.Invalid(f.Child("port"), p.Port, msg))
		}
		if len(s.Spec.Ports) > 1 && p.Name == "" {
			errs = append(errs, field.Required(f.Child("name"), "every port of a multi-port service needs a name"))
		} else if p.Name != "" {
			errs = append(errs, namedPort(f.Child("name"), p.Name, names)...)
		}
		errs = append(errs, protocol(f.Child("protocol"), p.Protocol)...)
		k := portKey{p.Port, p.Protocol}
		if ports[k] {
			errs = append(errs, field.Duplicate(f, fmt.Sprintf("%d/%s", p.Port, p.Protocol)))
		}
		ports[k] = true
		errs = append(errs, validateTargetPort(f.Child("targetPort"), p.TargetPort)...)
		if p.NodePort != 0 {
			if s.Spec.Type != v1.ServiceTypeNodePort && s.Spec.Type != v1.ServiceTypeLoadBalancer {
				errs = append(errs, field.Forbidden(f.Child("nodePort"), "may be used only when type is NodePort or LoadBalancer"))
			}
			for _, msg := range validation.IsValidPortNum(int(p.NodePort)) {
				errs = append(errs, field.Invalid(f.Child("nodePort"), p.NodePort, msg))
			}
			nk := portKey{p.NodePort, p.Protocol}
			if nodePorts[nk] {
				errs = append(errs, field.Duplicate(f.Child("nodePort"), p.NodePort))
			}
			nodePorts[nk] = true
		}
	}
	for i, ip := range s.Spec.ExternalIPs {
		errs = append(errs, validation.IsValidIP(spec.Child("externalIPs").Index(i), ip)...)
	}
	for i, in := range s.Status.LoadBalancer.Ingress {
		if in.IP != "" {
			errs = append(errs, validation.IsValidIP(field.NewPath("status", "loadBalancer", "ingress").Index(i).Child("ip"), in.IP)...)
		}
	}
	external := s.Spec.Type == v1.ServiceTypeNodePort || s.Spec.Type == v1.ServiceTypeLoadBalancer
	switch p := s.Spec.ExternalTrafficPolicy; p {
	case "":
	case v1.ServiceExternalTrafficPolicyCluster, v1.ServiceExternalTrafficPolicyLocal:
		if !external && len(s.Spec.ExternalIPs) == 0 {
			errs = append(errs, field.Forbidden(spec.Child("externalTrafficPolicy"), "may only be set for NodePort and LoadBalancer services, or with externalIPs"))
		}
	default:
		errs = append(errs, field.NotSupported(spec.Child("externalTrafficPolicy"), p, []string{"Cluster", "Local"}))
	}
	if p := s.Spec.InternalTrafficPolicy; p != nil && *p != v1.ServiceInternalTrafficPolicyCluster && *p != v1.ServiceInternalTrafficPolicyLocal {
		errs = append(errs, field.NotSupported(spec.Child("internalTrafficPolicy"), *p, []string{"Cluster", "Local"}))
	}
	if s.Spec.HealthCheckNodePort != 0 && (s.Spec.Type != v1.ServiceTypeLoadBalancer || s.Spec.ExternalTrafficPolicy != v1.ServiceExternalTrafficPolicyLocal) {
		errs = append(errs, field.Forbidden(spec.Child("healthCheckNodePort"), "may be set only for LoadBalancer services with externalTrafficPolicy Local"))
	}
	switch s.Spec.SessionAffinity {
	case "", v1.ServiceAffinityNone:
		if s.Spec.SessionAffinityConfig != nil {
			errs = append(errs, field.Forbidden(spec.Child("sessionAffinityConfig"), "must not be set when sessionAffinity is None"))
		}
	case v1.ServiceAffinityClientIP:
		if c := s.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
			if t := *c.ClientIP.TimeoutSeconds; t <= 0 || t > sessionAffinityMaxSec {
				errs = append(errs, field.Invalid(spec.Child("sessionAffinityConfig", "clientIP", "timeoutSeconds"), t, fmt.Sprintf("must be in the range 1 to %d", sessionAffinityMaxSec)))
			}
		}
	default:
		errs = append(errs, field.NotSupported(spec.Child("sessionAffinity"), s.Spec.SessionAffinity, []string{"None", "ClientIP"}))
	}
	return errs
}

func validateTargetPort(f *field.Path, tp intstr.IntOrString) field.ErrorList {
	var errs field.ErrorList
	switch {
	case tp.Type == intstr.String:
		for _, msg := range validation.IsValidPortName(tp.StrVal) {
			errs = append(errs, field.Invalid(f, tp.StrVal, msg))
		}
	case tp.IntVal != 0:
		for _, msg := range validation.IsValidPortNum(int(tp.IntVal)) {
			errs = append(errs, field.Invalid(f, tp.IntVal, msg))
		}
	}
	return errs
}

func defaultSlice(s *discovery.EndpointSlice) {
	if s.Namespace == "" {
		s.Namespace = "default"
	}
	// A port's name defaults to "" and its protocol to TCP, as the API
	// server's SetDefaults_EndpointPort (pkg/apis/discovery/v1) does.
	for i := range s.Ports {
		if s.Ports[i].Name == nil {
			name := ""
			s.Ports[i].Name = &name
		}
		if s.Ports[i].Protocol == nil {
			tcp := v1.ProtocolTCP
			s.Ports[i].Protocol = &tcp
		}
	}
}

func validateSlice(s *discovery.EndpointSlice) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, apivalidation.ValidateObjectMeta(&s.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))...)
	if s.Labels[discovery.LabelServiceName] == "" {
		// Not an API server rule, but kube-proxy ignores such a slice.
		errs = append(errs, field.Required(field.NewPath("metadata", "labels"), "the "+discovery.LabelServiceName+" label naming the service (kube-proxy ignores a slice without it)"))
	}
	check := func(f *field.Path, a string) field.ErrorList { return nil }
	switch s.AddressType {
	case discovery.AddressTypeIPv4:
		check = func(f *field.Path, a string) field.ErrorList {
			if ip := net.ParseIP(a); ip == nil || ip.To4() == nil {
				return field.ErrorList{field.Invalid(f, a, "must be a valid IPv4 address (addressType is IPv4)")}
			}
			return nil
		}
	case discovery.AddressTypeIPv6:
		check = func(f *field.Path, a string) field.ErrorList {
			if ip := net.ParseIP(a); ip == nil || ip.To4() != nil {
				return field.ErrorList{field.Invalid(f, a, "must be a valid IPv6 address (addressType is IPv6)")}
			}
			return nil
		}
	case discovery.AddressTypeFQDN:
		check = validation.IsFullyQualifiedDomainName
	case "":
		errs = append(errs, field.Required(field.NewPath("addressType"), "IPv4, IPv6 or FQDN"))
	default:
		errs = append(errs, field.NotSupported(field.NewPath("addressType"), s.AddressType, []string{"IPv4", "IPv6", "FQDN"}))
	}
	if len(s.Endpoints) > maxSliceEndpoints {
		errs = append(errs, field.TooMany(field.NewPath("endpoints"), len(s.Endpoints), maxSliceEndpoints))
	}
	for i, e := range s.Endpoints {
		f := field.NewPath("endpoints").Index(i)
		switch n := len(e.Addresses); {
		case n == 0:
			errs = append(errs, field.Required(f.Child("addresses"), "at least one address"))
		case n > maxSliceAddresses:
			errs = append(errs, field.TooMany(f.Child("addresses"), n, maxSliceAddresses))
		}
		for j, a := range e.Addresses {
			errs = append(errs, check(f.Child("addresses").Index(j), a)...)
		}
		if e.Hostname != nil {
			for _, msg := range validation.IsDNS1123Label(*e.Hostname) {
				errs = append(errs, field.Invalid(f.Child("hostname"), *e.Hostname, msg))
			}
		}
		if e.NodeName != nil {
			for _, msg := range validation.IsDNS1123Subdomain(*e.NodeName) {
				errs = append(errs, field.Invalid(f.Child("nodeName"), *e.NodeName, msg))
			}
		}
		if h := e.Hints; h != nil && len(h.ForZones) > maxSliceZoneHints {
			errs = append(errs, field.TooMany(f.Child("hints", "forZones"), len(h.ForZones), maxSliceZoneHints))
		}
	}
	names := map[string]bool{}
	for i, p := range s.Ports {
		f := field.NewPath("ports").Index(i)
		name := ""
		if p.Name != nil {
			name = *p.Name
		}
		switch {
		case name != "":
			errs = append(errs, namedPort(f.Child("name"), name, names)...)
		case names[""]:
			// One unnamed port at most: names, the empty one too, are unique.
			errs = append(errs, field.Duplicate(f.Child("name"), name))
		}
		names[name] = true
		if p.Port != nil {
			for _, msg := range validation.IsValidPortNum(int(*p.Port)) {
				errs = append(errs, field.Invalid(f.Child("port"), *p.Port, msg))
			}
		}
		if p.Protocol != nil {
			errs = append(errs, protocol(f.Child("protocol"), *p.Protocol)...)
		}
	}
	if len(s.Ports) > maxSlicePorts {
		errs = append(errs, field.TooMany(field.NewPath("ports"), len(s.Ports), maxSlicePorts))
	}
	return errs
}

// fieldMessage is an API-server error without its path, which the problem
// carries already.
func fieldMessage(e *field.Error) string {
	switch e.Type {
	case field.ErrorTypeRequired, field.ErrorTypeForbidden:
		return e.Type.String() + ": " + e.Detail
	case field.ErrorTypeDuplicate:
		return "duplicate value " + strconv.Quote(fmt.Sprint(e.BadValue))
	}
	return e.ErrorBody()
}

// defaultPod fills what the API server would default for the fields
// proxysim reads.
func defaultPod(p *v1.Pod) {
	if p.Namespace == "" {
		p.Namespace = "default"
	}
	for _, cs := range [][]v1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range cs {
			for j := range cs[i].Ports {
				if cs[i].Ports[j].Protocol == "" {
					cs[i].Ports[j].Protocol = v1.ProtocolTCP
				}
			}
		}
	}
	if len(p.Status.PodIPs) == 0 && p.Status.PodIP != "" {
		p.Status.PodIPs = []v1.PodIP{{IP: p.Status.PodIP}}
	}
}

// validatePod checks a Pod by kubernetes pkg/apis/core/validation's
// ValidatePodCreate where a cluster would refuse it: metadata, containers
// (at least one, names DNS labels unique across init and app containers, an
// image), ports, hostname and subdomain, nodeName, restart policy, grace
// period, and the status IPs a controller turns into endpoints.
func validatePod(p *v1.Pod) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, apivalidation.ValidateObjectMeta(&p.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))...)
	spec := field.NewPath("spec")
	if len(p.Spec.Containers) == 0 {
		errs = append(errs, field.Required(spec.Child("containers"), "at least one container"))
	}
	names := map[string]bool{}
	portNames := map[string]bool{}
	for _, group := range []struct {
		key string
		cs  []v1.Container
	}{{"initContainers", p.Spec.InitContainers}, {"containers", p.Spec.Containers}} {
		for i, c := range group.cs {
			f := spec.Child(group.key).Index(i)
			switch {
			case c.Name == "":
				errs = append(errs, field.Required(f.Child("name"), "a container name"))
			case names[c.Name]:
				errs = append(errs, field.Duplicate(f.Child("name"), c.Name))
			default:
				for _, msg := range validation.IsDNS1123Label(c.Name) {
					errs = append(errs, field.Invalid(f.Child("name"), c.Name, msg))
				}
			}
			names[c.Name] = true
			if c.Image == "" {
				errs = append(errs, field.Required(f.Child("image"), "a container image"))
			}
			for j, port := range c.Ports {
				pf := f.Child("ports").Index(j)
				for _, msg := range validation.IsValidPortNum(int(port.ContainerPort)) {
					errs = append(errs, field.Invalid(pf.Child("containerPort"), port.ContainerPort, msg))
				}
				if port.HostPort != 0 {
					for _, msg := range validation.IsValidPortNum(int(port.HostPort)) {
						errs = append(errs, field.Invalid(pf.Child("hostPort"), port.HostPort, msg))
					}
				}
				if port.Name != "" {
					errs = append(errs, namedPort(pf.Child("name"), port.Name, portNames)...)
				}
				errs = append(errs, protocol(pf.Child("protocol"), port.Protocol)...)
			}
		}
	}
	for _, label := range []struct{ key, value string }{{"hostname", p.Spec.Hostname}, {"subdomain", p.Spec.Subdomain}} {
		if label.value != "" {
			for _, msg := range validation.IsDNS1123Label(label.value) {
				errs = append(errs, field.Invalid(spec.Child(label.key), label.value, msg))
			}
		}
	}
	if p.Spec.NodeName != "" {
		for _, msg := range validation.IsDNS1123Subdomain(p.Spec.NodeName) {
			errs = append(errs, field.Invalid(spec.Child("nodeName"), p.Spec.NodeName, msg))
		}
	}
	switch p.Spec.RestartPolicy {
	case "", v1.RestartPolicyAlways, v1.RestartPolicyOnFailure, v1.RestartPolicyNever:
	default:
		errs = append(errs, field.NotSupported(spec.Child("restartPolicy"), p.Spec.RestartPolicy, []string{"Always", "OnFailure", "Never"}))
	}
	if g := p.Spec.TerminationGracePeriodSeconds; g != nil && *g < 0 {
		errs = append(errs, field.Invalid(spec.Child("terminationGracePeriodSeconds"), *g, "must be greater than or equal to 0"))
	}
	status := field.NewPath("status")
	if p.Status.PodIP != "" {
		errs = append(errs, validation.IsValidIP(status.Child("podIP"), p.Status.PodIP)...)
	}
	// podIPs[0] is podIP (checked below), so only the others need checking.
	for i, ip := range p.Status.PodIPs {
		if i > 0 {
			errs = append(errs, validation.IsValidIP(status.Child("podIPs").Index(i).Child("ip"), ip.IP)...)
		}
	}
	if len(p.Status.PodIPs) > 0 && p.Status.PodIPs[0].IP != p.Status.PodIP {
		errs = append(errs, field.Invalid(status.Child("podIPs").Index(0).Child("ip"), p.Status.PodIPs[0].IP, "must match status.podIP"))
	}
	return errs
}

// validateNode checks a Node by ValidateNode's rules for what proxysim
// reads: its name, its addresses (a known type, and an IP where the type is
// one) and its pod CIDRs.
func validateNode(n *v1.Node) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, apivalidation.ValidateObjectMeta(&n.ObjectMeta, false, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))...)
	for i, cidr := range append([]string{n.Spec.PodCIDR}, n.Spec.PodCIDRs...) {
		f := field.NewPath("spec", "podCIDR")
		if i > 0 {
			f = field.NewPath("spec", "podCIDRs").Index(i - 1)
		}
		if cidr != "" {
			errs = append(errs, validation.IsValidCIDR(f, cidr)...)
		}
	}
	for i, a := range n.Status.Addresses {
		f := field.NewPath("status", "addresses").Index(i)
		switch a.Type {
		case v1.NodeInternalIP, v1.NodeExternalIP:
			errs = append(errs, validation.IsValidIP(f.Child("address"), a.Address)...)
		case v1.NodeHostName, v1.NodeInternalDNS, v1.NodeExternalDNS:
			if a.Address == "" {
				errs = append(errs, field.Required(f.Child("address"), "an address"))
			}
		default:
			errs = append(errs, field.NotSupported(f.Child("type"), a.Type, []string{"InternalIP", "ExternalIP", "Hostname", "InternalDNS", "ExternalDNS"}))
		}
	}
	return errs
}

// namedPort checks a port name (an IANA service name) and that it is the
// only one of that name among seen.
func namedPort(f *field.Path, name string, seen map[string]bool) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsValidPortName(name) {
		errs = append(errs, field.Invalid(f, name, msg))
	}
	if seen[name] {
		errs = append(errs, field.Duplicate(f, name))
	}
	seen[name] = true
	return errs
}

// protocol checks a port's protocol.
func protocol(f *field.Path, p v1.Protocol) field.ErrorList {
	switch p {
	case v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP:
		return nil
	}
	return field.ErrorList{field.NotSupported(f, p, []string{"TCP", "UDP", "SCTP"})}
}

// validateEndpoints checks what a legacy Endpoints object needs for the
// controllers that read it (pkg/apis/core/validation ValidateEndpoints,
// in part): its metadata, and every address an IP.
func validateEndpoints(e *v1.Endpoints) field.ErrorList {
	errs := apivalidation.ValidateObjectMeta(&e.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	for i, s := range e.Subsets {
		f := field.NewPath("subsets").Index(i)
		for j, a := range s.Addresses {
			errs = append(errs, validation.IsValidIP(f.Child("addresses").Index(j).Child("ip"), a.IP)...)
		}
		for j, a := range s.NotReadyAddresses {
			errs = append(errs, validation.IsValidIP(f.Child("notReadyAddresses").Index(j).Child("ip"), a.IP)...)
		}
		for j, p := range s.Ports {
			for _, msg := range validation.IsValidPortNum(int(p.Port)) {
				errs = append(errs, field.Invalid(f.Child("ports").Index(j).Child("port"), p.Port, msg))
			}
		}
	}
	return errs
}
