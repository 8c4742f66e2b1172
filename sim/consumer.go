package sim

import "k8s.io/apimachinery/pkg/runtime"

// Consumer is anything in the world that watches objects: the node's service
// proxy, or a controller. Each consumer has its own shared informers (as
// each component of a cluster does), one per kind it names, and the world
// calls its handlers one at a time on the world's goroutine, in virtual time.
//
// A handler may write objects through the world (Create, Update, ...). Such a
// write reaches the API server at once; the events it causes are queued and
// delivered after the current one, so one write can set off a chain of
// writes, all delivered before the clock moves on.
//
// A handler's error is recorded in the trace as a note; it stops nothing.
//
// The objects a handler gets are its informers' cache, as in client-go: copy
// before changing one. A consumer's informers have copies of their own, so
// a careless handler spoils only its own cache, never the API server's
// objects or another consumer's; only the proxy, which never modifies them,
// is sent the API server's objects themselves.
type Consumer interface {
	// Name identifies the consumer in the trace.
	Name() string
	// Kinds lists the kinds to watch, by name; see the package function
	// Kinds for those the world carries.
	Kinds() []string
	OnAdd(kind string, obj runtime.Object) error
	// OnUpdate gets identical old and obj on a resync or a relist that found
	// nothing new.
	OnUpdate(kind string, old, obj runtime.Object) error
	OnDelete(kind string, obj runtime.Object) error
	// OnSynced is called once per kind, after the initial lists. Kinds, here
	// and in initial lists, resyncs and relists, come in the world's order
	// (the package-level Kinds), whatever the order of the method's.
	OnSynced(kind string) error
}

// Lifecycle is implemented by consumers with timers or goroutines of their
// own: Start runs just before the consumer's informers start, Stop when the
// world closes or the consumer is replaced.
type Lifecycle interface {
	Start() error
	Stop()
}
