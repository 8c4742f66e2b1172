package sim

import (
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/cache"
)

// informerEvent is one handler call, carried from an informer goroutine to
// the world's goroutine.
type informerEvent struct {
	kind     string
	op       string
	old, obj any
	resync   bool
}

func (e informerEvent) name() string {
	o := e.obj
	if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
		return t.Key
	}
	m, err := meta.Accessor(o)
	if err != nil {
		return "?"
	}
	return m.GetNamespace() + "/" + m.GetName()
}

// key orders events canonically: services before slices, then by name.
func (e informerEvent) key() string {
	k := "1"
	if e.kind == "Service" {
		k = "0"
	}
	return k + e.name()
}

// eventQueue is an unbounded FIFO, so that an informer goroutine never
// blocks on the world.
type eventQueue struct {
	mu    sync.Mutex
	cond  *sync.Cond
	items []informerEvent
}

func newEventQueue() *eventQueue {
	q := &eventQueue{}
	q.cond = sync.NewCond(&q.mu)
	return q
}

func (q *eventQueue) push(e informerEvent) {
	q.mu.Lock()
	q.items = append(q.items, e)
	q.mu.Unlock()
	q.cond.Broadcast()
}

// pop waits for the next event; it gives up when stop is closed.
func (q *eventQueue) pop(stop <-chan struct{}) (informerEvent, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.items) == 0 {
		select {
		case <-stop:
			return informerEvent{}, false
		default:
		}
		q.cond.Wait()
	}
	e := q.items[0]
	q.items[0] = informerEvent{}
	q.items = q.items[1:]
	return e, true
}

func (q *eventQueue) drain() []informerEvent {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.items
	q.items = nil
	return out
}

// wake releases a pop blocked on a closed world.
func (q *eventQueue) wake() { q.cond.Broadcast() }

func isNotFound(err error) bool { return apierrors.IsNotFound(err) }
