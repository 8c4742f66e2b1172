package sim

import (
	"k8s.io/client-go/tools/cache"
)

// objectNames gives each object its trace name (see objectKey), built once
// per object: every delivered event and every write needs it (trace,
// latency maps), and a replay touches the same objects over and over. Only
// the world's goroutine uses it.
type objectNames map[objectID]string

type objectID struct{ kind, namespace, name string }

// of names the object of an event.
func (n *objectNames) of(ev informerEvent) string {
	if t, ok := ev.obj.(cache.DeletedFinalStateUnknown); ok {
		return ev.kind.name + " " + t.Key // rare: not worth keeping
	}
	m, ok := ev.obj.(Object)
	if !ok {
		return ev.kind.name + " ?"
	}
	return n.key(ev.kind.name, m.GetNamespace(), m.GetName())
}

// key is objectKey, remembered.
func (n *objectNames) key(kind, namespace, name string) string {
	id := objectID{kind, namespace, name}
	if s, ok := (*n)[id]; ok {
		return s
	}
	if *n == nil {
		*n = objectNames{}
	}
	s := objectKey(kind, namespace, name)
	(*n)[id] = s
	return s
}
