package sim

import (
	"context"
	"fmt"
	"reflect"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	networking "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// kinds is every object kind the world carries: adding a kind is one entry.
// The order is the delivery order of initial lists, resyncs and relists.
// Services come before EndpointSlices so that the proxy's second synced
// notification is the EndpointSlice one, which syncs directly.
var kinds = []*kind{
	newKind[v1.Service]("Service", "services",
		func(c clientset, ns string) typedClient[*v1.Service] { return c.CoreV1().Services(ns) },
		func(f factory) informer { return f.Core().V1().Services().Informer() }),
	newKind[discovery.EndpointSlice]("EndpointSlice", "endpointslices",
		func(c clientset, ns string) typedClient[*discovery.EndpointSlice] {
			return c.DiscoveryV1().EndpointSlices(ns)
		},
		func(f factory) informer { return f.Discovery().V1().EndpointSlices().Informer() }),
	newKind[v1.Pod]("Pod", "pods",
		func(c clientset, ns string) typedClient[*v1.Pod] { return c.CoreV1().Pods(ns) },
		func(f factory) informer { return f.Core().V1().Pods().Informer() }),
	newKind[v1.Node]("Node", "nodes",
		func(c clientset, _ string) typedClient[*v1.Node] { return c.CoreV1().Nodes() },
		func(f factory) informer { return f.Core().V1().Nodes().Informer() }),
	newKind[v1.Endpoints]("Endpoints", "endpoints",
		func(c clientset, ns string) typedClient[*v1.Endpoints] { return c.CoreV1().Endpoints(ns) },
		func(f factory) informer { return f.Core().V1().Endpoints().Informer() }),
	newKind[networking.Ingress]("Ingress", "ingresses",
		func(c clientset, ns string) typedClient[*networking.Ingress] { return c.NetworkingV1().Ingresses(ns) },
		func(f factory) informer { return f.Networking().V1().Ingresses().Informer() }),
	newKind[networking.IngressClass]("IngressClass", "ingressclasses",
		func(c clientset, _ string) typedClient[*networking.IngressClass] {
			return c.NetworkingV1().IngressClasses()
		},
		func(f factory) informer { return f.Networking().V1().IngressClasses().Informer() }),
	newKind[v1.ConfigMap]("ConfigMap", "configmaps",
		func(c clientset, ns string) typedClient[*v1.ConfigMap] { return c.CoreV1().ConfigMaps(ns) },
		func(f factory) informer { return f.Core().V1().ConfigMaps().Informer() }),
	newKind[v1.Secret]("Secret", "secrets",
		func(c clientset, ns string) typedClient[*v1.Secret] { return c.CoreV1().Secrets(ns) },
		func(f factory) informer { return f.Core().V1().Secrets().Informer() }),
}

// Short names for the table's signatures.
type (
	clientset = kubernetes.Interface
	factory   = informers.SharedInformerFactory
	informer  = cache.SharedIndexInformer
)

// Object is what the world stores and delivers: a typed API object
// (*v1.Service, *v1.Pod, ...).
type Object interface {
	metav1.Object
	runtime.Object
}

// kind is one entry of the table: a name, the API resource its informer
// watches, and the typed operations behind it.
type kind struct {
	name     string
	resource string
	index    int // position in kinds: the canonical delivery order
	typ      reflect.Type
	ops      kindOps
}

// kindOps are a kind's typed client and informer, behind untyped calls.
type kindOps interface {
	informer(factory) informer
	// create and update send a shallow copy of obj stamped with rv: the
	// caller's object is left alone, and the fake API server deep-copies
	// what it stores.
	create(c clientset, obj runtime.Object, rv string) error
	update(c clientset, obj runtime.Object, rv string) error
	delete(c clientset, namespace, name string) error
	get(c clientset, namespace, name string) (runtime.Object, error)
	// sameButVersion reports whether a and b differ only in their
	// resourceVersion; shallow copies, since this runs on every update.
	sameButVersion(a, b runtime.Object) bool
}

// typedClient is what the world needs of a client-go typed client.
type typedClient[PT any] interface {
	Create(context.Context, PT, metav1.CreateOptions) (PT, error)
	Update(context.Context, PT, metav1.UpdateOptions) (PT, error)
	Delete(context.Context, string, metav1.DeleteOptions) error
	Get(context.Context, string, metav1.GetOptions) (PT, error)
}

type typedKind[T any, PT interface {
	*T
	Object
}] struct {
	client      func(c clientset, namespace string) typedClient[PT]
	newInformer func(factory) informer
}

func newKind[T any, PT interface {
	*T
	Object
}](name, resource string, client func(clientset, string) typedClient[PT], inf func(factory) informer) *kind {
	return &kind{
		name:     name,
		resource: resource,
		typ:      reflect.TypeFor[PT](),
		ops:      typedKind[T, PT]{client: client, newInformer: inf},
	}
}

func (k typedKind[T, PT]) informer(f factory) informer { return k.newInformer(f) }

func (k typedKind[T, PT]) stamped(obj runtime.Object, rv string) PT {
	cp := *obj.(PT)
	PT(&cp).SetResourceVersion(rv)
	return &cp
}

func (k typedKind[T, PT]) create(c clientset, obj runtime.Object, rv string) error {
	o := k.stamped(obj, rv)
	_, err := k.client(c, o.GetNamespace()).Create(context.Background(), o, metav1.CreateOptions{})
	return err
}

func (k typedKind[T, PT]) update(c clientset, obj runtime.Object, rv string) error {
	o := k.stamped(obj, rv)
	_, err := k.client(c, o.GetNamespace()).Update(context.Background(), o, metav1.UpdateOptions{})
	return err
}

func (k typedKind[T, PT]) delete(c clientset, namespace, name string) error {
	return k.client(c, namespace).Delete(context.Background(), name, metav1.DeleteOptions{})
}

func (k typedKind[T, PT]) get(c clientset, namespace, name string) (runtime.Object, error) {
	o, err := k.client(c, namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return o, nil
}

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
