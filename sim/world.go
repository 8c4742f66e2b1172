// Package sim is proxysim's virtual-time world: a fake API server and real
// shared informers feeding a service proxy (change trackers, runner, backend)
// whose every timer runs on a virtual clock.
//
// The world is single-threaded where it matters. Informer goroutines only
// carry events; the world writes one object at a time, waits until the
// informer has delivered that write, and hands the event to the proxy on its
// own goroutine. Time moves only when the world advances its clock, straight
// from one deadline to the next. So a scenario of hours replays in
// milliseconds and gives the same trace on every run.
//
// sim defines the interfaces backends implement (see sim/ipvs); it never
// imports the real-kernel code in netns/.
package sim

import (
	"context"
	"fmt"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/proxysim/proxysim/sim/ipvs"
	"github.com/proxysim/proxysim/sim/proxy"
	"github.com/proxysim/proxysim/sim/runner"
	"github.com/proxysim/proxysim/sim/trace"
	"github.com/proxysim/proxysim/sim/vclock"
)

// DefaultResyncPeriod is kube-proxy's default configSyncPeriod.
const DefaultResyncPeriod = 15 * time.Minute

// CostModel is how much virtual time one sync takes: Fixed, plus PerService
// for each applied service port, plus PerEndpoint for each endpoint.
type CostModel struct {
	Fixed       time.Duration
	PerService  time.Duration
	PerEndpoint time.Duration
}

// Cost evaluates the model for a proxy of the given size.
func (c CostModel) Cost(servicePorts, endpoints int) time.Duration {
	return c.Fixed + time.Duration(servicePorts)*c.PerService + time.Duration(endpoints)*c.PerEndpoint
}

// Config describes a world.
type Config struct {
	Runner   runner.Config
	NodeName string
	Zone     string
	Family   v1.IPFamily // default IPv4
	Cost     CostModel
	// ResyncPeriod is the informers' resync period (configSyncPeriod); the
	// world delivers resyncs itself, in virtual time. Negative disables it;
	// zero means DefaultResyncPeriod.
	ResyncPeriod time.Duration
	// Backend programs the dataplane; nil means a backend that records what
	// each sync saw and programs nothing.
	Backend proxy.Backend
	// NewBackend, if set, builds the backend once the world's clock and trace
	// exist (see IPVSBackend); it wins over Backend.
	NewBackend func(w *World) (proxy.Backend, error)
	// Start is the virtual instant the world starts at (default vclock.Epoch).
	Start time.Time
}

// World is one simulated node.
type World struct {
	Clock   *vclock.Clock
	Client  *fake.Clientset
	Proxier *proxy.Proxier
	Runner  *runner.Runner
	Trace   *trace.Recorder

	cfg      Config
	factory  informers.SharedInformerFactory
	svcInf   cache.SharedIndexInformer
	sliceInf cache.SharedIndexInformer
	stop     chan struct{}
	events   *eventQueue
	started  bool
	rv       int64
	runs     int
	syncErr  error
	ipvs     *ipvs.Proxier

	watchMu  sync.Mutex
	watching map[string]bool
}

// New builds a world for a test and closes it when the test ends.
func New(t testing.TB, cfg Config) *World {
	t.Helper()
	w, err := NewWorld(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	return w
}

// NewWorld builds a world. Seed it with Create, then call Start.
func NewWorld(cfg Config) (*World, error) {
	if cfg.Runner.Generation == 0 {
		cfg.Runner.Generation = runner.Cooldown
	}
	if cfg.Runner.MaxInterval == 0 {
		cfg.Runner.MaxInterval = 30 * time.Second
	}
	if cfg.Family == "" {
		cfg.Family = v1.IPv4Protocol
	}
	if cfg.NodeName == "" {
		cfg.NodeName = "node-a"
	}
	if cfg.ResyncPeriod == 0 {
		cfg.ResyncPeriod = DefaultResyncPeriod
	}
	if cfg.Start.IsZero() {
		cfg.Start = vclock.Epoch
	}
	w := &World{
		Clock: vclock.New(cfg.Start),
		// The plain tracker: the field-managed one of NewClientset rebuilds a
		// REST mapper on every write, which dominates a replay's cost.
		Client:   fake.NewSimpleClientset(),
		cfg:      cfg,
		stop:     make(chan struct{}),
		events:   newEventQueue(),
		watching: map[string]bool{},
	}
	w.Trace = trace.NewRecorder(cfg.Start, w.Clock.Now)
	backend := cfg.Backend
	if cfg.NewBackend != nil {
		b, err := cfg.NewBackend(w)
		if err != nil {
			return nil, err
		}
		backend = b
	}
	if backend == nil {
		backend = &RecordingBackend{}
	}
	w.Proxier = proxy.NewProxier(cfg.Family, cfg.NodeName, cfg.Zone, backend)
	r, err := runner.New(cfg.Runner, w.Clock, w.sync, &runnerTrace{w: w})
	if err != nil {
		return nil, err
	}
	w.Runner = r
	w.Proxier.SetSyncer(r)
	tracker := w.Client.Tracker()
	w.Client.PrependWatchReactor("*", func(action k8stesting.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if wa, ok := action.(k8stesting.WatchActionImpl); ok {
			opts = wa.ListOptions
		}
		wi, err := tracker.Watch(action.GetResource(), action.GetNamespace(), opts)
		if err != nil {
			return false, nil, err
		}
		w.watchMu.Lock()
		w.watching[action.GetResource().Resource] = true
		w.watchMu.Unlock()
		return true, wi, nil
	})
	return w, nil
}

// Now is the virtual time since the world started.
func (w *World) Now() time.Duration { return w.Clock.Since(w.cfg.Start) }

// Config returns the world's configuration after defaults.
func (w *World) Config() Config { return w.cfg }

// Close stops the informers.
func (w *World) Close() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
		w.events.wake()
		if w.factory != nil {
			w.factory.Shutdown()
		}
	}
}

// sync is the runner's function: one sync of the proxier, traced.
func (w *World) sync() error {
	err := w.Proxier.SyncProxyRules()
	w.syncErr = err
	return err
}

func (w *World) cost() time.Duration {
	s, e := w.Proxier.Size()
	return w.cfg.Cost.Cost(s, e)
}

// Start starts the runner's loop and the informers at the current virtual
// instant, delivers the initial lists (in namespace/name order, since list
// order is unspecified) and the two synced notifications; the second one
// syncs directly, as kube-proxy does.
func (w *World) Start() error {
	if w.started {
		return fmt.Errorf("world already started")
	}
	w.started = true
	w.Runner.StartVirtual(w.cost)
	w.factory = informers.NewSharedInformerFactory(w.Client, 0)
	w.svcInf = w.factory.Core().V1().Services().Informer()
	w.sliceInf = w.factory.Discovery().V1().EndpointSlices().Informer()
	var regs []cache.ResourceEventHandlerRegistration
	for _, inf := range []struct {
		i    cache.SharedIndexInformer
		kind string
	}{{w.svcInf, "Service"}, {w.sliceInf, "EndpointSlice"}} {
		kind := inf.kind
		reg, err := inf.i.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { w.events.push(informerEvent{kind: kind, op: "add", obj: obj}) },
			UpdateFunc: func(old, obj any) { w.events.push(informerEvent{kind: kind, op: "update", old: old, obj: obj}) },
			DeleteFunc: func(obj any) { w.events.push(informerEvent{kind: kind, op: "delete", obj: obj}) },
		})
		if err != nil {
			return err
		}
		regs = append(regs, reg)
	}
	w.factory.Start(w.stop)
	// A registration has synced once its handler has seen the initial list.
	for !regs[0].HasSynced() || !regs[1].HasSynced() || !w.isWatching("services") || !w.isWatching("endpointslices") {
		select {
		case <-w.stop:
			return fmt.Errorf("world closed while informers were syncing")
		default:
		}
		runtime.Gosched()
	}
	initial := w.events.drain()
	sort.SliceStable(initial, func(i, j int) bool { return initial[i].key() < initial[j].key() })
	for _, ev := range initial {
		w.deliver(ev)
	}
	// Services first: the EndpointSlice notification is then the second one,
	// which syncs directly, outside the runner.
	w.Trace.Add(trace.Event{Kind: trace.Synced, Object: "Service"})
	if err := w.Proxier.OnServicesSynced(); err != nil {
		return err
	}
	w.Trace.Add(trace.Event{Kind: trace.Synced, Object: "EndpointSlice"})
	w.runs++
	w.Trace.Add(trace.Event{Kind: trace.Start, Why: "initial", Run: w.runs})
	end := trace.Event{Kind: trace.End, Run: w.runs}
	if err := w.Proxier.OnEndpointSlicesSynced(); err != nil {
		end.Err = err.Error()
	}
	w.Trace.Add(end)
	if w.cfg.ResyncPeriod > 0 {
		w.scheduleResync()
	}
	return nil
}

func (w *World) isWatching(resource string) bool {
	w.watchMu.Lock()
	defer w.watchMu.Unlock()
	return w.watching[resource]
}

func (w *World) scheduleResync() {
	w.Clock.AfterFunc(w.cfg.ResyncPeriod, func() {
		w.resync()
		w.scheduleResync()
	})
}

// resync delivers an update with identical old and new objects for every
// object in the informers' caches, as a shared informer's resync does.
func (w *World) resync() {
	for _, inf := range []struct {
		i    cache.SharedIndexInformer
		kind string
	}{{w.svcInf, "Service"}, {w.sliceInf, "EndpointSlice"}} {
		objs := inf.i.GetStore().List()
		evs := make([]informerEvent, 0, len(objs))
		for _, o := range objs {
			evs = append(evs, informerEvent{kind: inf.kind, op: "update", old: o, obj: o, resync: true})
		}
		sort.Slice(evs, func(i, j int) bool { return evs[i].key() < evs[j].key() })
		for _, ev := range evs {
			w.deliver(ev)
		}
	}
}

// Run advances virtual time by d, firing every timer on the way.
func (w *World) Run(d time.Duration) { w.Clock.Advance(d) }

// RunUntil advances virtual time to offset d from the world's start.
func (w *World) RunUntil(d time.Duration) { w.Clock.AdvanceTo(w.cfg.Start.Add(d)) }

// At schedules f at offset d from the world's start.
func (w *World) At(d time.Duration, f func()) {
	w.Clock.AfterFunc(w.cfg.Start.Add(d).Sub(w.Clock.Now()), f)
}

func (w *World) stamp(m *metav1.ObjectMeta) {
	w.rv++
	m.ResourceVersion = strconv.FormatInt(w.rv, 10)
}

// Create adds an object to the API server. Before Start it seeds the initial
// list; after Start it waits until the informer has delivered the event and
// hands it to the proxy at the current virtual instant.
func (w *World) Create(obj any) error { return w.write(obj, false) }

// Update replaces an existing object, like Create.
func (w *World) Update(obj any) error { return w.write(obj, true) }

// Apply creates the object or updates it if it exists.
func (w *World) Apply(obj any) error {
	exists, err := w.exists(obj)
	if err != nil {
		return err
	}
	return w.write(obj, exists)
}

func (w *World) exists(obj any) (bool, error) {
	ctx := context.Background()
	var err error
	switch o := obj.(type) {
	case *v1.Service:
		_, err = w.Client.CoreV1().Services(o.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
	case *discovery.EndpointSlice:
		_, err = w.Client.DiscoveryV1().EndpointSlices(o.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
	default:
		return false, fmt.Errorf("unsupported object type %T", obj)
	}
	if err == nil {
		return true, nil
	}
	if isNotFound(err) {
		return false, nil
	}
	return false, err
}

func (w *World) write(obj any, update bool) error {
	ctx := context.Background()
	var err error
	switch o := obj.(type) {
	case *v1.Service:
		o = o.DeepCopy()
		w.stamp(&o.ObjectMeta)
		c := w.Client.CoreV1().Services(o.Namespace)
		if update {
			_, err = c.Update(ctx, o, metav1.UpdateOptions{})
		} else {
			_, err = c.Create(ctx, o, metav1.CreateOptions{})
		}
	case *discovery.EndpointSlice:
		o = o.DeepCopy()
		w.stamp(&o.ObjectMeta)
		c := w.Client.DiscoveryV1().EndpointSlices(o.Namespace)
		if update {
			_, err = c.Update(ctx, o, metav1.UpdateOptions{})
		} else {
			_, err = c.Create(ctx, o, metav1.CreateOptions{})
		}
	default:
		return fmt.Errorf("unsupported object type %T", obj)
	}
	if err != nil {
		return err
	}
	return w.await()
}

// Delete removes an object ("Service" or "EndpointSlice").
func (w *World) Delete(kind, namespace, name string) error {
	ctx := context.Background()
	var err error
	switch kind {
	case "Service":
		err = w.Client.CoreV1().Services(namespace).Delete(ctx, name, metav1.DeleteOptions{})
	case "EndpointSlice":
		err = w.Client.DiscoveryV1().EndpointSlices(namespace).Delete(ctx, name, metav1.DeleteOptions{})
	default:
		return fmt.Errorf("unsupported kind %q", kind)
	}
	if err != nil {
		return err
	}
	return w.await()
}

// await is the barrier: every write yields exactly one informer event, which
// is handed to the proxy before virtual time moves on.
func (w *World) await() error {
	if !w.started {
		return nil
	}
	ev, ok := w.events.pop(w.stop)
	if !ok {
		return fmt.Errorf("world closed while waiting for an informer event")
	}
	w.deliver(ev)
	return nil
}

func (w *World) deliver(ev informerEvent) {
	te := trace.Event{Kind: trace.Object, Op: ev.op, Object: ev.kind + " " + ev.name()}
	if ev.resync {
		te.Kind = trace.Resync
	}
	var err error
	switch ev.kind {
	case "Service":
		old, _ := ev.old.(*v1.Service)
		cur := asService(ev.obj)
		w.Trace.Add(te)
		switch ev.op {
		case "add":
			w.Proxier.OnServiceAdd(cur)
		case "update":
			w.Proxier.OnServiceUpdate(old, cur)
		case "delete":
			w.Proxier.OnServiceDelete(cur)
		}
	case "EndpointSlice":
		old, _ := ev.old.(*discovery.EndpointSlice)
		cur := asSlice(ev.obj)
		w.Trace.Add(te)
		switch ev.op {
		case "add":
			err = w.Proxier.OnEndpointSliceAdd(cur)
		case "update":
			err = w.Proxier.OnEndpointSliceUpdate(old, cur)
		case "delete":
			err = w.Proxier.OnEndpointSliceDelete(cur)
		}
	}
	if err != nil {
		w.Trace.Add(trace.Event{Kind: trace.Note, Object: te.Object, Err: err.Error()})
	}
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

// Runs counts syncs: the initial direct one and every runner run.
func (w *World) Runs() int { return w.runs }

// runnerTrace records runner decisions.
type runnerTrace struct{ w *World }

func (t *runnerTrace) Requested(time.Time) {
	t.w.Trace.Add(trace.Event{Kind: trace.Request})
}
func (t *runnerTrace) Deferred(_ time.Time, why runner.Reason, until time.Time) {
	e := trace.Event{Kind: trace.Defer, Why: string(why)}
	if !until.IsZero() {
		e.Until = t.w.Trace.At(until)
	}
	t.w.Trace.Add(e)
}
func (t *runnerTrace) Started(_ time.Time, why runner.Reason) {
	t.w.runs++
	t.w.Trace.Add(trace.Event{Kind: trace.Start, Why: string(why), Run: t.w.runs})
}
func (t *runnerTrace) Finished(_ time.Time, err error) {
	e := trace.Event{Kind: trace.End, Run: t.w.runs}
	if err != nil {
		e.Err = err.Error()
	}
	t.w.Trace.Add(e)
}
func (t *runnerTrace) Dropped(_ time.Time, why runner.Reason) {
	t.w.Trace.Add(trace.Event{Kind: trace.Drop, Why: string(why)})
}
