package sim

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/cache"
)

// objectNames gives each object its trace name, "Kind namespace/name", built
// once per object: every delivered event needs it (trace, latency maps), and
// a replay delivers the same objects over and over.
type objectNames map[objectID]string

type objectID struct{ kind, namespace, name string }

func (n *objectNames) of(ev informerEvent) string {
	o := ev.obj
	if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
		return ev.kind + " " + t.Key
	}
	m, err := meta.Accessor(o)
	if err != nil {
		return ev.kind + " ?"
	}
	return n.key(ev.kind, m.GetNamespace(), m.GetName())
}

// key is the name of an object of a kind.
func (n *objectNames) key(kind, namespace, name string) string {
	id := objectID{kind, namespace, name}
	if s, ok := (*n)[id]; ok {
		return s
	}
	if *n == nil {
		*n = objectNames{}
	}
	s := kind + " " + namespace + "/" + name
	(*n)[id] = s
	return s
}
