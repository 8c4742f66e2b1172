package sim

import (
	"fmt"
	"reflect"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	networking "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// kinds is every object kind the world carries: adding a kind is one entry.
// The order is the delivery order of initial lists, resyncs and relists.
// Services come before EndpointSlices so that the proxy's second synced
// notification is the EndpointSlice one, which syncs directly.
var kinds = []*kind{
	newKind[v1.Service]("Service", v1.SchemeGroupVersion.WithResource("services"),
		func(f factory) informer { return f.Core().V1().Services().Informer() }),
	newKind[discovery.EndpointSlice]("EndpointSlice", discovery.SchemeGroupVersion.WithResource("endpointslices"),
		func(f factory) informer { return f.Discovery().V1().EndpointSlices().Informer() }),
	newKind[v1.Pod]("Pod", v1.SchemeGroupVersion.WithResource("pods"),
		func(f factory) informer { return f.Core().V1().Pods().Informer() }),
	newKind[v1.Node]("Node", v1.SchemeGroupVersion.WithResource("nodes"),
		func(f factory) informer { return f.Core().V1().Nodes().Informer() }),
	newKind[v1.Endpoints]("Endpoints", v1.SchemeGroupVersion.WithResource("endpoints"),
		func(f factory) informer { return f.Core().V1().Endpoints().Informer() }),
	newKind[networking.Ingress]("Ingress", networking.SchemeGroupVersion.WithResource("ingresses"),
		func(f factory) informer { return f.Networking().V1().Ingresses().Informer() }),
	newKind[networking.IngressClass]("IngressClass", networking.SchemeGroupVersion.WithResource("ingressclasses"),
		func(f factory) informer { return f.Networking().V1().IngressClasses().Informer() }),
	newKind[v1.ConfigMap]("ConfigMap", v1.SchemeGroupVersion.WithResource("configmaps"),
		func(f factory) informer { return f.Core().V1().ConfigMaps().Informer() }),
	newKind[v1.Secret]("Secret", v1.SchemeGroupVersion.WithResource("secrets"),
		func(f factory) informer { return f.Core().V1().Secrets().Informer() }),
}

// Short names for the table's signatures.
type (
	factory  = informers.SharedInformerFactory
	informer = cache.SharedIndexInformer
)

// Object is what the world stores and delivers: a typed API object
// (*v1.Service, *v1.Pod, ...).
type Object interface {
	metav1.Object
	runtime.Object
}

// kind is one entry of the table: a name, the API resource the world's
// object store keeps its objects under and its informers watch, and the
// typed operations behind it.
type kind struct {
	name  string
	gvr   schema.GroupVersionResource
	index int // position in kinds: the canonical delivery order
	typ   reflect.Type
	ops   kindOps
}

// kindOps are a kind's typed operations, behind untyped calls.
type kindOps interface {
	informer(factory) informer
	// sameButVersion reports whether a and b differ only in their
	// resourceVersion; shallow copies, since this runs on every update.
	sameButVersion(a, b runtime.Object) bool
}

type typedKind[T any, PT interface {
	*T
	Object
}] struct {
	newInformer func(factory) informer
}

func newKind[T any, PT interface {
	*T
	Object
}](name string, gvr schema.GroupVersionResource, inf func(factory) informer) *kind {
	return &kind{
		name: name,
		gvr:  gvr,
		typ:  reflect.TypeFor[PT](),
		ops:  typedKind[T, PT]{newInformer: inf},
	}
}

func (k typedKind[T, PT]) informer(f factory) informer { return k.newInformer(f) }

func (k typedKind[T, PT]) sameButVersion(a, b runtime.Object) bool {
	x, y := *a.(PT), *b.(PT)
	PT(&x).SetResourceVersion("")
	PT(&y).SetResourceVersion("")
	return reflect.DeepEqual(&x, &y)
}

var (
	kindByName = map[string]*kind{}
	kindByType = map[reflect.Type]*kind{}
)

func init() {
	for i, k := range kinds {
		k.index = i
		kindByName[k.name] = k
		kindByType[k.typ] = k
	}
}

// Kinds lists the object kinds the world carries, in delivery order.
func Kinds() []string {
	out := make([]string, len(kinds))
	for i, k := range kinds {
		out[i] = k.name
	}
	return out
}

func lookupKind(name string) (*kind, error) {
	if k, ok := kindByName[name]; ok {
		return k, nil
	}
	return nil, fmt.Errorf("unsupported kind %q", name)
}

func kindOfObject(obj runtime.Object) (*kind, error) {
	if k, ok := kindByType[reflect.TypeOf(obj)]; ok {
		return k, nil
	}
	return nil, fmt.Errorf("unsupported object type %T", obj)
}
