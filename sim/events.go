package sim

import (
	"fmt"
	"reflect"
	"runtime"
	"sort"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
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

// sortEvents puts events in canonical order, stably, building each key once.
func sortEvents(evs []informerEvent) {
	keys := make([]string, len(evs))
	idx := make([]int, len(evs))
	for i := range evs {
		keys[i], idx[i] = evs[i].key(), i
	}
	sort.SliceStable(idx, func(a, b int) bool { return keys[idx[a]] < keys[idx[b]] })
	sorted := make([]informerEvent, len(evs))
	for i, j := range idx {
		sorted[i] = evs[j]
	}
	copy(evs, sorted)
}

// noop reports an update that changes nothing (resync, relist).
func (e informerEvent) noop() bool {
	return e.op == "update" && identical(e.old, e.obj)
}

// identical is reflect.DeepEqual, answered at once for the usual cases: the
// same object, or two versions of one (resourceVersions differ).
func identical(a, b any) bool {
	ma, okA := a.(metav1.Object)
	mb, okB := b.(metav1.Object)
	if okA && okB {
		if ma == mb {
			return true
		}
		if ma.GetResourceVersion() != mb.GetResourceVersion() {
			return false
		}
	}
	return reflect.DeepEqual(a, b)
}

// eventQueue is an unbounded FIFO, so that an informer goroutine never
// blocks on the world.
type eventQueue struct {
	mu    sync.Mutex
	cond  *sync.Cond
	items []informerEvent
	head  int // items[head:] are queued; the array is reused once drained
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
	for q.head == len(q.items) {
		select {
		case <-stop:
			return informerEvent{}, false
		default:
		}
		q.cond.Wait()
	}
	e := q.items[q.head]
	q.items[q.head] = informerEvent{}
	q.head++
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	}
	return e, true
}

func (q *eventQueue) drain() []informerEvent {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.items[q.head:]
	q.items, q.head = nil, 0
	return out
}

// wake releases a pop blocked on a closed world.
func (q *eventQueue) wake() { q.cond.Broadcast() }

func isNotFound(err error) bool { return apierrors.IsNotFound(err) }

// instance is one proxy's informers: a shared informer factory over the
// world's fake API server, whose handlers only queue events.
type instance struct {
	factory  informers.SharedInformerFactory
	svcInf   cache.SharedIndexInformer
	sliceInf cache.SharedIndexInformer
	events   *eventQueue
	stop     chan struct{}
}

// watchSignal lets the world wait until both watches are established: a
// write made before that would be missed by the informer.
type watchSignal struct {
	mu       sync.Mutex
	watching map[string]bool
}

func (s *watchSignal) set(r string) {
	s.mu.Lock()
	s.watching[r] = true
	s.mu.Unlock()
}

func (s *watchSignal) has(r string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.watching[r]
}

func startInstance(client *fake.Clientset, store *objectStore, worldStop <-chan struct{}) (*instance, error) {
	inst := &instance{events: newEventQueue(), stop: make(chan struct{})}
	sig := &watchSignal{watching: map[string]bool{}}
	client.PrependWatchReactor("*", func(action k8stesting.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if wa, ok := action.(k8stesting.WatchActionImpl); ok {
			opts = wa.ListOptions
		}
		wi, err := store.watch(action.GetResource(), action.GetNamespace(), []metav1.ListOptions{opts}, true)
		if err != nil {
			return false, nil, err
		}
		sig.set(action.GetResource().Resource)
		return true, wi, nil
	})
	inst.factory = informers.NewSharedInformerFactory(client, 0)
	inst.svcInf = inst.factory.Core().V1().Services().Informer()
	inst.sliceInf = inst.factory.Discovery().V1().EndpointSlices().Informer()
	var regs []cache.ResourceEventHandlerRegistration
	for _, inf := range []struct {
		i    cache.SharedIndexInformer
		kind string
	}{{inst.svcInf, "Service"}, {inst.sliceInf, "EndpointSlice"}} {
		kind, q := inf.kind, inst.events
		reg, err := inf.i.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { q.push(informerEvent{kind: kind, op: "add", obj: obj}) },
			UpdateFunc: func(old, obj any) { q.push(informerEvent{kind: kind, op: "update", old: old, obj: obj}) },
			DeleteFunc: func(obj any) { q.push(informerEvent{kind: kind, op: "delete", obj: obj}) },
		})
		if err != nil {
			return nil, err
		}
		regs = append(regs, reg)
	}
	inst.factory.Start(inst.stop)
	// A registration has synced once its handler has seen the initial list.
	for !regs[0].HasSynced() || !regs[1].HasSynced() || !sig.has("services") || !sig.has("endpointslices") {
		select {
		case <-worldStop:
			inst.close()
			return nil, fmt.Errorf("world closed while informers were syncing")
		default:
		}
		runtime.Gosched()
	}
	return inst, nil
}

func (inst *instance) close() {
	close(inst.stop)
	inst.events.wake()
	inst.factory.Shutdown()
}

// snapshot lists every cached object as a no-op update, in canonical order.
func (inst *instance) snapshot(resync bool) []informerEvent {
	var evs []informerEvent
	for _, inf := range []struct {
		i    cache.SharedIndexInformer
		kind string
	}{{inst.svcInf, "Service"}, {inst.sliceInf, "EndpointSlice"}} {
		for _, o := range inf.i.GetStore().List() {
			evs = append(evs, informerEvent{kind: inf.kind, op: "update", old: o, obj: o, resync: resync})
		}
	}
	sortEvents(evs)
	return evs
}

// heldEvents collects events while the watch is broken, keeping per object
// the state before the break and the latest one.
type heldEvents struct {
	first map[string]informerEvent
	last  map[string]informerEvent
}

func newHeldEvents() *heldEvents {
	return &heldEvents{first: map[string]informerEvent{}, last: map[string]informerEvent{}}
}

func (h *heldEvents) add(ev informerEvent) {
	k := ev.key()
	if _, ok := h.first[k]; !ok {
		h.first[k] = ev
	}
	h.last[k] = ev
}

// relist turns the held events and the current cache into what a relisting
// informer delivers: deletes for objects that went away, adds for new ones,
// updates (from the state before the break) for changed ones, and no-op
// updates for the rest, in canonical order.
func (h *heldEvents) relist(current []informerEvent) []informerEvent {
	var out []informerEvent
	seen := map[string]bool{}
	for _, ev := range current {
		k := ev.key()
		seen[k] = true
		first, changed := h.first[k]
		switch {
		case !changed:
			out = append(out, ev)
		case first.op == "add":
			out = append(out, informerEvent{kind: ev.kind, op: "add", obj: ev.obj})
		default:
			out = append(out, informerEvent{kind: ev.kind, op: "update", old: before(first), obj: ev.obj})
		}
	}
	keys := make([]string, 0, len(h.first))
	for k := range h.first {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if seen[k] || h.first[k].op == "add" {
			continue // still there, or created and deleted during the break
		}
		ev := h.first[k]
		out = append(out, informerEvent{kind: ev.kind, op: "delete", obj: before(ev)})
	}
	sortEvents(out)
	return out
}

// before is the object as the proxy last saw it, ahead of ev.
func before(ev informerEvent) any {
	if ev.op == "update" {
		return ev.old
	}
	return ev.obj
}

func asService(o any) *v1.Service {
	if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = t.Obj
	}
	s, _ := o.(*v1.Service)
	return s
}

func asSlice(o any) *discovery.EndpointSlice {
	if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = t.Obj
	}
	s, _ := o.(*discovery.EndpointSlice)
	return s
}
