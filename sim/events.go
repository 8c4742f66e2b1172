package sim

import (
	"fmt"
	"reflect"
	"runtime"
	"sort"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// informerEvent is one handler call, carried from an informer goroutine to
// the world's goroutine.
type informerEvent struct {
	kind     *kind
	op       string
	old, obj any
	resync   bool
}

// name is the object's "namespace/name" ("name" when cluster-scoped), as
// client-go keys it, tombstones included.
func (e informerEvent) name() string {
	k, _ := cache.DeletionHandlingMetaNamespaceKeyFunc(e.obj)
	return k
}

// identical is reflect.DeepEqual of an event's old and new objects,
// answered without walking them in the usual cases: one object (a resync,
// or a relist that found nothing new, delivers the cached object as both),
// or two versions of one (every write gets a new resourceVersion).
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

// key orders events canonically: by kind (the table's order), then by
// namespace and name.
func (e informerEvent) key() string {
	return string(rune('0'+e.kind.index)) + e.name()
}

// eventQueue is an unbounded FIFO, so that an informer goroutine never
// blocks on the world.
type eventQueue struct {
	mu    sync.Mutex
	cond  *sync.Cond
	items []informerEvent
	head  int // items[head:] are queued; the array is reused once emptied
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
		// Emptied: start again at the front rather than grow a new array,
		// as the barrier empties the queue at every write.
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

// instance is one consumer's informers: a shared informer factory over a
// clientset of its own served by the world's object store, with an informer
// for each kind the consumer watches, whose handlers only queue events.
type instance struct {
	factory informers.SharedInformerFactory
	infs    []cache.SharedIndexInformer // by kind index; nil for kinds not watched
	events  *eventQueue
	stop    chan struct{}
}

// watchCounter counts the watches opened per resource, so that the world can
// wait until a new instance's watches are established: a write made before
// that would be missed by the informer.
type watchCounter struct {
	mu sync.Mutex
	n  map[string]int
}

// opened counts a watch of resource, once the store sends it every write.
func (c *watchCounter) opened(resource string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[resource]++
}

func (c *watchCounter) count(resource string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[resource]
}

// startInstance starts informers for ks over the store and waits until each
// handler has seen its initial list and each watch is open. Instances start
// one at a time, so a new watch of a resource is this instance's. With
// shared, the informers' watches are sent the stored objects themselves:
// only for a consumer whose handlers never modify what they get.
func startInstance(store *objectStore, shared bool, watches *watchCounter, ks []*kind, worldStop <-chan struct{}) (*instance, error) {
	inst := &instance{events: newEventQueue(), stop: make(chan struct{}), infs: make([]cache.SharedIndexInformer, len(kinds))}
	inst.factory = informers.NewSharedInformerFactory(store.clientset(shared, watches), 0)
	before := make([]int, len(ks))
	var regs []cache.ResourceEventHandlerRegistration
	for i, k := range ks {
		before[i] = watches.count(k.gvr.Resource)
		inf := k.ops.informer(inst.factory)
		inst.infs[k.index] = inf
		q := inst.events
		reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { q.push(informerEvent{kind: k, op: "add", obj: obj}) },
			UpdateFunc: func(old, obj any) { q.push(informerEvent{kind: k, op: "update", old: old, obj: obj}) },
			DeleteFunc: func(obj any) { q.push(informerEvent{kind: k, op: "delete", obj: obj}) },
		})
		if err != nil {
			return nil, err
		}
		regs = append(regs, reg)
	}
	inst.factory.Start(inst.stop)
	ready := func() bool {
		for i, k := range ks {
			if !regs[i].HasSynced() || watches.count(k.gvr.Resource) <= before[i] {
				return false
			}
		}
		return true
	}
	for !ready() {
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

// watches reports whether the instance has an informer for k.
func (inst *instance) watches(k *kind) bool { return inst.infs[k.index] != nil }

// get reads obj's kind from the instance's informer cache.
func (inst *instance) get(k *kind, namespace, name string) (any, bool) {
	key := name
	if namespace != "" {
		key = namespace + "/" + name
	}
	o, ok, err := inst.infs[k.index].GetStore().GetByKey(key)
	return o, ok && err == nil
}

// snapshot lists every cached object as a no-op update, in canonical order.
func (inst *instance) snapshot(resync bool) []informerEvent {
	var evs []informerEvent
	for i, inf := range inst.infs {
		if inf == nil {
			continue
		}
		for _, o := range inf.GetStore().List() {
			evs = append(evs, informerEvent{kind: kinds[i], op: "update", old: o, obj: o, resync: resync})
		}
	}
	sortEvents(evs)
	return evs
}

// sortEvents puts events in canonical order (see key), computing each key
// once.
func sortEvents(evs []informerEvent) {
	keys := make([]string, len(evs))
	for i := range evs {
		keys[i] = evs[i].key()
	}
	sort.Stable(byKey{evs, keys})
}

type byKey struct {
	evs  []informerEvent
	keys []string
}

func (b byKey) Len() int           { return len(b.evs) }
func (b byKey) Less(i, j int) bool { return b.keys[i] < b.keys[j] }
func (b byKey) Swap(i, j int) {
	b.evs[i], b.evs[j] = b.evs[j], b.evs[i]
	b.keys[i], b.keys[j] = b.keys[j], b.keys[i]
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
	for k, ev := range h.first {
		if seen[k] || ev.op == "add" {
			continue // still there, or created and deleted during the break
		}
		out = append(out, informerEvent{kind: ev.kind, op: "delete", obj: before(ev)})
	}
	sortEvents(out) // one event per object: this order is total
	return out
}

// before is the object as the proxy last saw it, ahead of ev.
func before(ev informerEvent) any {
	if ev.op == "update" {
		return ev.old
	}
	return ev.obj
}

// asObject unwraps a tombstone: consumers always get the typed object.
func asObject(o any) kruntime.Object {
	if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = t.Obj
	}
	r, _ := o.(kruntime.Object)
	return r
}
