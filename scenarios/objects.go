package scenarios

import (
	"bytes"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	networking "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"
	serjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
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

// KeyOf names an object the way scenarios and traces do: "Kind ns/name",
// or "Kind name" for a cluster-scoped kind.
func KeyOf(kind, namespace, name string) string {
	if clusterScoped[kind] {
		return kind + " " + name
	}
	return kind + " " + NamespaceOf(kind, namespace) + "/" + name
}

// clusterScoped are the kinds without a namespace.
var clusterScoped = map[string]bool{"Node": true, "IngressClass": true}

// NamespaceOf is the namespace an object of kind named with namespace lives
// in: "default" when none is given, none for a cluster-scoped kind.
func NamespaceOf(kind, namespace string) string {
	switch {
	case clusterScoped[kind]:
		return ""
	case namespace == "":
		return "default"
	}
	return namespace
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
	var buf bytes.Buffer
	count := 0
	if err := nodeJSON(&buf, n, &count); err != nil {
		return fail(n, path, "%v", err)
	}
	obj, gvk, err := strictDecoder.Decode(buf.Bytes(), nil, nil)
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
	key, errs, supported := DefaultAndValidate(obj)
	if !supported {
		return fail(findPath(n, "kind"), join(path, "kind"), "kind %s is not supported here (%s)", gvk.Kind, strings.Join(slices.Sorted(maps.Keys(supportedKinds)), ", "))
	}
	o.Key = key
	for _, e := range errs {
		fail(findPath(n, e.Field), join(path, e.Field), "%s", fieldMessage(e))
	}
	return o, len(errs) == 0
}

// DefaultAndValidate applies the API server's defaults to a decoded object
// and checks it by its rules; it returns the object's scenario key.
func DefaultAndValidate(obj runtime.Object) (key string, errs field.ErrorList, supported bool) {
	switch t := obj.(type) {
	case *v1.Service:
		defaultService(t)
		return KeyOf("Service", t.Namespace, t.Name), validateService(t), true
	case *discovery.EndpointSlice:
		defaultSlice(t)
		return KeyOf("EndpointSlice", t.Namespace, t.Name), validateSlice(t), true
	case *v1.Pod:
		defaultPod(t)
		return KeyOf("Pod", t.Namespace, t.Name), validatePod(t), true
	case *v1.Node:
		return KeyOf("Node", "", t.Name), validateNode(t), true
	case *v1.Endpoints:
		if t.Namespace == "" {
			t.Namespace = "default"
		}
		return KeyOf("Endpoints", t.Namespace, t.Name), validateEndpoints(t), true
	case *networking.Ingress:
		defaultIngress(t)
		return KeyOf("Ingress", t.Namespace, t.Name), validateIngress(t), true
	case *networking.IngressClass:
		return KeyOf("IngressClass", "", t.Name), validateIngressClass(t), true
	case *v1.ConfigMap:
		defaultConfigMap(t)
		return KeyOf("ConfigMap", t.Namespace, t.Name), validateConfigMap(t), true
	case *v1.Secret:
		defaultSecret(t)
		return KeyOf("Secret", t.Namespace, t.Name), validateSecret(t), true
	}
	return "", nil, false
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
