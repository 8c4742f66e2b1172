package scenarios

import (
	"encoding/json"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	serjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/client-go/kubernetes/scheme"
)

// Object is a decoded manifest and where it came from.
type Object struct {
	Obj  runtime.Object
	Kind string
	Key  string // "Kind namespace/name"
	Pos  Pos
	File string
}

// KeyOf names an object the way scenarios and traces do.
func KeyOf(kind, namespace, name string) string {
	if namespace == "" {
		namespace = "default"
	}
	return kind + " " + namespace + "/" + name
}

var strictDecoder = serjson.NewSerializerWithOptions(serjson.DefaultMetaFactory, scheme.Scheme, scheme.Scheme,
	serjson.SerializerOptions{Strict: true})

var unknownFieldRE = regexp.MustCompile(`unknown field "([^"]+)"`)

// decodeManifest turns one manifest node into a typed object, reporting
// problems at the offending field.
func (d *decoder) decodeManifest(file string, n *yaml.Node, path string) (Object, bool) {
	fail := func(at *yaml.Node, p, format string, args ...any) (Object, bool) {
		saved := d.file
		d.file = file
		d.add(at, p, format, args...)
		d.file = saved
		return Object{}, false
	}
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	if n.Kind != yaml.MappingNode {
		return fail(n, path, "want a Kubernetes manifest (a mapping with apiVersion and kind), got a %s", kindName(n))
	}
	var raw any
	if err := n.Decode(&raw); err != nil {
		return fail(n, path, "%v", err)
	}
	data, err := json.Marshal(raw)
	if err != nil {
		return fail(n, path, "%v", err)
	}
	obj, gvk, err := strictDecoder.Decode(data, nil, nil)
	if err != nil {
		msg := err.Error()
		if m := unknownFieldRE.FindStringSubmatch(msg); m != nil {
			at := findPath(n, m[1])
			return fail(at, join(path, m[1]), "unknown field %q in %s", lastSegment(m[1]), kindOf(n))
		}
		if strings.Contains(msg, "Object 'Kind' is missing") {
			return fail(n, join(path, "kind"), "required: kind")
		}
		if strings.Contains(msg, "no kind") {
			return fail(findPath(n, "kind"), join(path, "kind"), "unknown kind %q for apiVersion %q", kindOf(n), valueOf(n, "apiVersion"))
		}
		return fail(n, path, "%s", msg)
	}
	o := Object{Obj: obj, Kind: gvk.Kind, Pos: Pos{Line: n.Line, Column: n.Column, Path: path}, File: file}
	ok := true
	bad := func(field, format string, args ...any) {
		fail(findPath(n, field), join(path, field), format, args...)
		ok = false
	}
	switch t := obj.(type) {
	case *v1.Service:
		if t.Namespace == "" {
			t.Namespace = "default"
		}
		o.Key = KeyOf("Service", t.Namespace, t.Name)
		validateService(t, bad)
	case *discovery.EndpointSlice:
		if t.Namespace == "" {
			t.Namespace = "default"
		}
		o.Key = KeyOf("EndpointSlice", t.Namespace, t.Name)
		validateSlice(t, bad)
	default:
		return fail(findPath(n, "kind"), join(path, "kind"), "kind %s is not supported here (Service, EndpointSlice)", gvk.Kind)
	}
	return o, ok
}

func validateService(s *v1.Service, bad func(field, format string, args ...any)) {
	if s.Name == "" {
		bad("metadata.name", "required: a service name")
	}
	switch s.Spec.Type {
	case "", v1.ServiceTypeClusterIP, v1.ServiceTypeNodePort, v1.ServiceTypeLoadBalancer, v1.ServiceTypeExternalName:
	default:
		bad("spec.type", "unknown service type %q", s.Spec.Type)
	}
	if s.Spec.Type == "" {
		s.Spec.Type = v1.ServiceTypeClusterIP
	}
	if s.Spec.Type != v1.ServiceTypeExternalName {
		if ip := s.Spec.ClusterIP; ip != "" && ip != v1.ClusterIPNone && net.ParseIP(ip) == nil {
			bad("spec.clusterIP", "%q is not an IP address", ip)
		}
		if s.Spec.ClusterIP == "" {
			bad("spec.clusterIP", "required: proxysim has no IP allocator, give the cluster IP")
		}
		if len(s.Spec.ClusterIPs) == 0 && s.Spec.ClusterIP != "" {
			s.Spec.ClusterIPs = []string{s.Spec.ClusterIP}
		}
		if len(s.Spec.Ports) == 0 && s.Spec.ClusterIP != v1.ClusterIPNone {
			bad("spec.ports", "required: at least one port")
		}
	}
	for i, p := range s.Spec.Ports {
		f := fmt.Sprintf("spec.ports[%d]", i)
		if p.Port < 1 || p.Port > 65535 {
			bad(f+".port", "port %d out of range 1-65535", p.Port)
		}
		if p.NodePort < 0 || p.NodePort > 65535 {
			bad(f+".nodePort", "nodePort %d out of range", p.NodePort)
		}
		if p.Protocol == "" {
			s.Spec.Ports[i].Protocol = v1.ProtocolTCP
		} else if p.Protocol != v1.ProtocolTCP && p.Protocol != v1.ProtocolUDP && p.Protocol != v1.ProtocolSCTP {
			bad(f+".protocol", "protocol %q: want TCP, UDP or SCTP", p.Protocol)
		}
		if len(s.Spec.Ports) > 1 && p.Name == "" {
			bad(f+".name", "required: every port of a multi-port service needs a name")
		}
	}
	for i, ip := range s.Spec.ExternalIPs {
		if net.ParseIP(ip) == nil {
			bad(fmt.Sprintf("spec.externalIPs[%d]", i), "%q is not an IP address", ip)
		}
	}
	for i, in := range s.Status.LoadBalancer.Ingress {
		if in.IP != "" && net.ParseIP(in.IP) == nil {
			bad(fmt.Sprintf("status.loadBalancer.ingress[%d].ip", i), "%q is not an IP address", in.IP)
		}
	}
	switch s.Spec.ExternalTrafficPolicy {
	case "", v1.ServiceExternalTrafficPolicyCluster, v1.ServiceExternalTrafficPolicyLocal:
	default:
		bad("spec.externalTrafficPolicy", "want Cluster or Local, got %q", s.Spec.ExternalTrafficPolicy)
	}
	if p := s.Spec.InternalTrafficPolicy; p != nil && *p != v1.ServiceInternalTrafficPolicyCluster && *p != v1.ServiceInternalTrafficPolicyLocal {
		bad("spec.internalTrafficPolicy", "want Cluster or Local, got %q", *p)
	}
	switch s.Spec.SessionAffinity {
	case "", v1.ServiceAffinityNone, v1.ServiceAffinityClientIP:
	default:
		bad("spec.sessionAffinity", "want None or ClientIP, got %q", s.Spec.SessionAffinity)
	}
}

func validateSlice(s *discovery.EndpointSlice, bad func(field, format string, args ...any)) {
	if s.Name == "" {
		bad("metadata.name", "required: a slice name")
	}
	if s.Labels[discovery.LabelServiceName] == "" {
		bad("metadata.labels", "required: the %s label naming the service", discovery.LabelServiceName)
	}
	switch s.AddressType {
	case discovery.AddressTypeIPv4, discovery.AddressTypeIPv6, discovery.AddressTypeFQDN:
	case "":
		bad("addressType", "required: IPv4, IPv6 or FQDN")
	default:
		bad("addressType", "want IPv4, IPv6 or FQDN, got %q", s.AddressType)
	}
	for i, p := range s.Ports {
		if p.Port != nil && (*p.Port < 1 || *p.Port > 65535) {
			bad(fmt.Sprintf("ports[%d].port", i), "port %d out of range 1-65535", *p.Port)
		}
	}
	for i, e := range s.Endpoints {
		if len(e.Addresses) == 0 {
			bad(fmt.Sprintf("endpoints[%d].addresses", i), "required: at least one address")
		}
		for j, a := range e.Addresses {
			if s.AddressType != discovery.AddressTypeFQDN && net.ParseIP(a) == nil {
				bad(fmt.Sprintf("endpoints[%d].addresses[%d]", i, j), "%q is not an IP address", a)
			}
		}
	}
}

func kindOf(n *yaml.Node) string { return valueOf(n, "kind") }

func valueOf(n *yaml.Node, key string) string {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1].Value
		}
	}
	return ""
}

func lastSegment(p string) string {
	if i := strings.LastIndexAny(p, "."); i >= 0 {
		return p[i+1:]
	}
	return p
}

// findPath locates "spec.ports[0].name" in a manifest node: the key node of
// the last segment when it is a plain field (so that an unknown field is
// reported where its name is), else the value; or the deepest node reached.
func findPath(n *yaml.Node, path string) *yaml.Node {
	cur := n
	segs := strings.Split(path, ".")
	for si, seg := range segs {
		name, idx := seg, -1
		if i := strings.Index(seg, "["); i >= 0 && strings.HasSuffix(seg, "]") {
			name = seg[:i]
			idx, _ = strconv.Atoi(seg[i+1 : len(seg)-1])
		}
		if cur.Kind != yaml.MappingNode {
			return cur
		}
		var key, val *yaml.Node
		for i := 0; i+1 < len(cur.Content); i += 2 {
			if cur.Content[i].Value == name {
				key, val = cur.Content[i], cur.Content[i+1]
				break
			}
		}
		if val == nil {
			return cur
		}
		if idx < 0 && si == len(segs)-1 {
			return key
		}
		cur = val
		if idx >= 0 {
			if cur.Kind != yaml.SequenceNode || idx >= len(cur.Content) {
				return cur
			}
			cur = cur.Content[idx]
		}
	}
	return cur
}
