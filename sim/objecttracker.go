package sim

import (
	"fmt"
	"sort"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	k8stesting "k8s.io/client-go/testing"
)

// objectStore is the world's API server: a k8stesting.ObjectTracker that
// every consumer's fake clientset (see clientset) serves its List and Watch
// (and any Get, Create, Update, Patch, Delete) from, and that the world
// reads and writes directly. It keeps every kind of the kinds table.
//
// It keeps client-go's tracker semantics — callers never alias a stored
// object (it is copied in and out), every write reaches the watchers of its
// resource and namespace, List and Watch follow the tracker's per-resource
// versions so that a reflector's List+Watch misses nothing — but it is cheap:
// no action log, one copy in and one per watcher out (none for read-only
// consumers' informers, see watch), with a copier that allocates a handful
// of blocks per EndpointSlice instead of one per field. A stored object is
// never modified, only replaced: that is what makes sharing it safe.
//
// It does not apply server-side apply patches: the world has no field
// manager.
type objectStore struct {
	mu  sync.Mutex
	res map[schema.GroupVersionResource]*resourceStore
}

type resourceStore struct {
	// rv counts writes, as client-go's tracker does per resource: 1 when
	// empty, bumped before each create or update. It is not the objects'
	// resourceVersion, which the world stamps.
	rv       int64
	objs     map[types.NamespacedName]storedObject
	watchers []*storeWatcher
}

type storedObject struct {
	rv  int64
	obj runtime.Object
}

var _ k8stesting.ObjectTracker = (*objectStore)(nil)

func newObjectStore() *objectStore {
	return &objectStore{res: map[schema.GroupVersionResource]*resourceStore{}}
}

// clientset returns a fake clientset served by the store, in place of the
// tracker it was built with (which its Tracker() still returns). Each
// consumer's informers get their own, so that whether a watch is shared is
// the consumer's: with shared, watches are sent the stored objects
// themselves. watches, if not nil, counts every watch opened, once it is
// registered with the store.
func (s *objectStore) clientset(shared bool, watches *watchCounter) *fake.Clientset {
	c := fake.NewSimpleClientset()
	c.ReactionChain = []k8stesting.Reactor{&k8stesting.SimpleReactor{Verb: "*", Resource: "*", Reaction: k8stesting.ObjectReaction(s)}}
	c.WatchReactionChain = []k8stesting.WatchReactor{&k8stesting.SimpleWatchReactor{Resource: "*", Reaction: func(a k8stesting.Action) (bool, watch.Interface, error) {
		var opts []metav1.ListOptions
		if wa, ok := a.(k8stesting.WatchActionImpl); ok {
			opts = []metav1.ListOptions{wa.ListOptions}
		}
		w, err := s.watch(a.GetResource(), a.GetNamespace(), opts, shared)
		if err != nil {
			return false, nil, err
		}
		if watches != nil {
			watches.opened(a.GetResource().Resource)
		}
		return true, w, nil
	}}}
	return c
}

func (s *objectStore) resource(gvr schema.GroupVersionResource) *resourceStore {
	r := s.res[gvr]
	if r == nil {
		r = &resourceStore{rv: 1, objs: map[types.NamespacedName]storedObject{}}
		s.res[gvr] = r
	}
	return r
}

// IsWatchListSemanticsUnSupported tells a reflector to list, then watch.
func (s *objectStore) IsWatchListSemanticsUnSupported() bool { return true }

func (s *objectStore) Add(obj runtime.Object) error {
	if meta.IsListType(obj) {
		items, err := meta.ExtractList(obj)
		if err != nil {
			return err
		}
		for _, it := range items {
			if err := s.Add(it); err != nil {
				return err
			}
		}
		return nil
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	k, err := kindOfObject(obj)
	if err != nil {
		return err
	}
	return s.Create(k.gvr, obj, m.GetNamespace())
}

func (s *objectStore) Get(gvr schema.GroupVersionResource, ns, name string, _ ...metav1.GetOptions) (runtime.Object, error) {
	if o, ok := s.stored(gvr, ns, name); ok {
		return copyObject(o), nil
	}
	return nil, apierrors.NewNotFound(gvr.GroupResource(), name)
}

// stored is the stored object itself, not a copy: for the world, to compare
// an update with, and never to be modified or handed out.
func (s *objectStore) stored(gvr schema.GroupVersionResource, ns, name string) (runtime.Object, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.res[gvr]; r != nil {
		if o, ok := r.objs[types.NamespacedName{Namespace: ns, Name: name}]; ok {
			return o.obj, true
		}
	}
	return nil, false
}

func (s *objectStore) Create(gvr schema.GroupVersionResource, obj runtime.Object, ns string, _ ...metav1.CreateOptions) error {
	return s.put(gvr, obj, ns, false, nil)
}

func (s *objectStore) Update(gvr schema.GroupVersionResource, obj runtime.Object, ns string, _ ...metav1.UpdateOptions) error {
	return s.put(gvr, obj, ns, true, nil)
}

func (s *objectStore) Patch(gvr schema.GroupVersionResource, obj runtime.Object, ns string, _ ...metav1.PatchOptions) error {
	return s.put(gvr, obj, ns, true, nil)
}

func (s *objectStore) Apply(gvr schema.GroupVersionResource, _ runtime.Object, _ string, _ ...metav1.PatchOptions) error {
	return apierrors.NewMethodNotSupported(gvr.GroupResource(), "apply")
}

// versioner stamps the world's writes: the store asks for a version only
// once a write is certain to happen, so that refused writes use none.
type versioner interface{ nextVersion() string }

// put stores a copy of obj and sends it to the resource's watchers. With
// stamp set (the world's writes) the copy gets stamp's next version; without,
// it keeps obj's. The world skips no-op updates itself (see World.write),
// before put, since it must refuse a write only if it changes something.
func (s *objectStore) put(gvr schema.GroupVersionResource, obj runtime.Object, ns string, update bool, stamp versioner) error {
	in, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	name, fillNS := in.GetName(), in.GetNamespace() == ""
	if !fillNS && in.GetNamespace() != ns {
		return apierrors.NewBadRequest(fmt.Sprintf("request namespace does not match object namespace, request: %q object: %q", ns, in.GetNamespace()))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.resource(gvr)
	key := types.NamespacedName{Namespace: ns, Name: name}
	_, exists := r.objs[key]
	switch {
	case update && !exists:
		return apierrors.NewNotFound(gvr.GroupResource(), name)
	case !update && exists:
		return apierrors.NewAlreadyExists(gvr.GroupResource(), name)
	}
	cp := copyObject(obj)
	m, _ := meta.Accessor(cp)
	if fillNS {
		m.SetNamespace(ns)
	}
	if stamp != nil {
		m.SetResourceVersion(stamp.nextVersion())
	}
	r.rv++
	r.objs[key] = storedObject{rv: r.rv, obj: cp}
	typ := watch.Added
	if exists {
		typ = watch.Modified
	}
	r.notify(ns, typ, cp)
	return nil
}

func (s *objectStore) Delete(gvr schema.GroupVersionResource, ns, name string, _ ...metav1.DeleteOptions) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.res[gvr]
	key := types.NamespacedName{Namespace: ns, Name: name}
	if r == nil {
		return apierrors.NewNotFound(gvr.GroupResource(), name)
	}
	o, ok := r.objs[key]
	if !ok {
		return apierrors.NewNotFound(gvr.GroupResource(), name)
	}
	delete(r.objs, key)
	r.notify(ns, watch.Deleted, o.obj)
	return nil
}

// List returns copies of the objects of one resource (all namespaces for
// ""), sorted by namespace and name, with the resource's current version.
func (s *objectStore) List(gvr schema.GroupVersionResource, gvk schema.GroupVersionKind, ns string, _ ...metav1.ListOptions) (runtime.Object, error) {
	listGVK := gvk
	listGVK.Kind += "List"
	if listGVK.Version == "" {
		listGVK.Version = runtime.APIVersionInternal
	}
	list, err := scheme.Scheme.New(listGVK)
	if err != nil {
		return nil, err
	}
	if !meta.IsListType(list) {
		return nil, fmt.Errorf("%q is not a list type", listGVK.Kind)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.resource(gvr)
	if lm, err := meta.ListAccessor(list); err == nil {
		lm.SetResourceVersion(fmt.Sprint(r.rv))
	}
	keys := make([]types.NamespacedName, 0, len(r.objs))
	for k := range r.objs {
		if ns == metav1.NamespaceAll || k.Namespace == ns {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].Namespace != keys[j].Namespace {
			return keys[i].Namespace < keys[j].Namespace
		}
		return keys[i].Name < keys[j].Name
	})
	items := make([]runtime.Object, len(keys))
	for i, k := range keys {
		items[i] = copyObject(r.objs[k].obj)
	}
	if err := meta.SetList(list, items); err != nil {
		return nil, err
	}
	return list, nil
}

// Watch opens a watch on one resource (all namespaces for ""). With list
// options, as the generated clients always pass, it first delivers the
// objects written after the given version, as client-go's tracker does, so
// that nothing written between a List and its Watch is lost.
func (s *objectStore) Watch(gvr schema.GroupVersionResource, ns string, opts ...metav1.ListOptions) (watch.Interface, error) {
	return s.watch(gvr, ns, opts, false)
}

// watch opens a watch; a shared one is sent the stored objects themselves
// instead of copies. Only read-only consumers' informers get one (the
// proxy's: its handlers never modify an object, as no informer's handler
// may), since a copy per event would be a third of the cost of a write;
// controllers, which may be careless, get copies of their own.
func (s *objectStore) watch(gvr schema.GroupVersionResource, ns string, opts []metav1.ListOptions, shared bool) (watch.Interface, error) {
	replay, from := false, int64(0)
	if len(opts) > 0 {
		replay = true
		if v := opts[0].ResourceVersion; v != "" {
			if _, err := fmt.Sscan(v, &from); err != nil {
				return nil, fmt.Errorf("invalid ResourceVersion %q in ListOptions, must be int64: %w", v, err)
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.resource(gvr)
	w := newStoreWatcher(s, r, ns, shared)
	r.watchers = append(r.watchers, w)
	if replay {
		var later []storedObject
		for k, o := range r.objs {
			if (ns == metav1.NamespaceAll || k.Namespace == ns) && o.rv > from {
				later = append(later, o)
			}
		}
		sort.Slice(later, func(i, j int) bool { return later[i].rv < later[j].rv })
		for _, o := range later {
			w.send(watch.Added, o.obj)
		}
	}
	return w, nil
}

// notify sends a write to every watcher of its namespace. Called with the
// store locked.
func (r *resourceStore) notify(ns string, typ watch.EventType, obj runtime.Object) {
	for _, w := range r.watchers {
		if w.ns == metav1.NamespaceAll || w.ns == ns {
			w.send(typ, obj)
		}
	}
}

// watchBuffer is how many events a watcher holds before a goroutine takes
// over delivering the rest: the world waits for each event, so its
// informers never come near it.
const watchBuffer = 256

// storeWatcher is one open watch. Events go into a buffered channel without
// blocking the writer; if its consumer falls that far behind, the excess
// queues in order and a goroutine feeds it in as the consumer reads.
type storeWatcher struct {
	store  *objectStore
	res    *resourceStore
	ns     string
	shared bool // sent the stored objects, not copies
	ch     chan watch.Event
	done   chan struct{}

	mu       sync.Mutex
	stopped  bool
	pumping  bool
	overflow []watch.Event
}

func newStoreWatcher(s *objectStore, r *resourceStore, ns string, shared bool) *storeWatcher {
	return &storeWatcher{store: s, res: r, ns: ns, shared: shared, ch: make(chan watch.Event, watchBuffer), done: make(chan struct{})}
}

func (w *storeWatcher) ResultChan() <-chan watch.Event { return w.ch }

func (w *storeWatcher) send(typ watch.EventType, obj runtime.Object) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	if !w.shared {
		obj = copyObject(obj)
	}
	ev := watch.Event{Type: typ, Object: obj}
	if len(w.overflow) == 0 {
		select {
		case w.ch <- ev:
			return
		default:
		}
	}
	w.overflow = append(w.overflow, ev)
	if !w.pumping {
		w.pumping = true
		go w.pump()
	}
}

func (w *storeWatcher) pump() {
	for {
		w.mu.Lock()
		if w.stopped || len(w.overflow) == 0 {
			w.pumping = false
			if w.stopped {
				close(w.ch)
			}
			w.mu.Unlock()
			return
		}
		ev := w.overflow[0]
		w.mu.Unlock()
		select {
		case w.ch <- ev:
		case <-w.done:
		}
		w.mu.Lock()
		if !w.stopped {
			w.overflow[0] = watch.Event{}
			w.overflow = w.overflow[1:]
		}
		w.mu.Unlock()
	}
}

// Stop ends the watch: no more events, and the result channel closes.
func (w *storeWatcher) Stop() {
	w.store.mu.Lock()
	for i, o := range w.res.watchers {
		if o == w {
			w.res.watchers = append(w.res.watchers[:i:i], w.res.watchers[i+1:]...)
			break
		}
	}
	w.store.mu.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	w.stopped = true
	close(w.done)
	if !w.pumping {
		close(w.ch)
	}
}
