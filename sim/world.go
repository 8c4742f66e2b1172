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
	"strconv"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

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
	// exist, and again at every restart (see IPVSBackend); it wins over
	// Backend.
	NewBackend func(w *World) (proxy.Backend, error)
	// Start is the virtual instant the world starts at (default vclock.Epoch).
	Start time.Time
	// Endpoints tunes endpoint conversion (node hints, by kube-proxy version).
	Endpoints proxy.EndpointSliceTrackerOptions
}

// Run is one sync of the proxy, as the world saw it.
type Run struct {
	N     int
	Why   string
	Start time.Duration
	End   time.Duration // -1 while running
	Err   string
}

// World is one simulated node. The API server and the dataplane outlive the
// proxy: Restart replaces the proxy (informers, trackers, runner, backend)
// and keeps the rest.
type World struct {
	Clock   *vclock.Clock
	Client  *fake.Clientset
	Trace   *trace.Recorder
	Proxier *proxy.Proxier
	Runner  *runner.Runner

	// store is the API server behind Client (whose Tracker() is not it).
	store *objectStore
	names objectNames

	cfg     Config
	inst    *instance
	stop    chan struct{}
	started bool
	closed  bool
	rv      int64
	runs    []Run
	backend proxy.Backend
	ipvs    *ipvs.Proxier
	gen     int // proxy generation, bumped by Restart

	held *heldEvents // non-nil while the watch is broken
	// lastChange maps "Kind ns/name" to its latest real change; written
	// holds the instant of writes the proxy has not heard of yet.
	lastChange map[string]change
	written    map[string]time.Duration
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
	if err := cfg.Runner.Validate(); err != nil {
		return nil, err
	}
	w := &World{
		Clock: vclock.New(cfg.Start),
		// Its tracker is replaced by the world's store (install, below).
		Client:     fake.NewSimpleClientset(),
		store:      newObjectStore(),
		cfg:        cfg,
		stop:       make(chan struct{}),
		lastChange: map[string]change{},
		written:    map[string]time.Duration{},
	}
	w.store.install(w.Client) // the clientset serves from the world's store
	w.Trace = trace.NewRecorder(cfg.Start, w.Clock.Now)
	if err := w.newProxy(); err != nil {
		return nil, err
	}
	return w, nil
}

// newProxy builds a fresh proxy: backend, proxier and runner.
func (w *World) newProxy() error {
	w.gen++
	backend := w.cfg.Backend
	if w.cfg.NewBackend != nil {
		b, err := w.cfg.NewBackend(w)
		if err != nil {
			return err
		}
		backend = b
	}
	if backend == nil {
		backend = &RecordingBackend{}
	}
	w.backend = backend
	w.Proxier = proxy.NewProxier(w.cfg.Family, w.cfg.NodeName, w.cfg.Zone, backend, w.cfg.Endpoints)
	gen := w.gen
	r, err := runner.New(w.cfg.Runner, w.Clock, func() error { return w.sync(gen) }, &runnerTrace{w: w})
	if err != nil {
		return err
	}
	w.Runner = r
	w.Proxier.SetSyncer(r)
	return nil
}

// Now is the virtual time since the world started.
func (w *World) Now() time.Duration { return w.Clock.Since(w.cfg.Start) }

// Config returns the world's configuration after defaults.
func (w *World) Config() Config { return w.cfg }

// Backend returns the current proxy's backend.
func (w *World) Backend() proxy.Backend { return w.backend }

// Close stops the informers and the proxy's timers.
func (w *World) Close() {
	if w.closed {
		return
	}
	w.closed = true
	close(w.stop)
	w.stopProxy()
}

func (w *World) stopProxy() {
	w.Runner.Stop()
	if s, ok := w.backend.(interface{ Stop() }); ok {
		s.Stop()
	}
	if w.inst != nil {
		w.inst.close()
		w.inst = nil
	}
}

// sync is the runner's function: one sync of the proxier.
func (w *World) sync(gen int) error {
	if gen != w.gen {
		return fmt.Errorf("proxy was restarted")
	}
	return w.Proxier.SyncProxyRules()
}

func (w *World) cost() time.Duration {
	s, e := w.Proxier.Size()
	return w.cfg.Cost.Cost(s, e)
}

// Start starts the proxy at the current virtual instant: the runner's loop,
// then the informers, whose initial lists are delivered in namespace/name
// order (list order is unspecified), then the two synced notifications, the
// second of which syncs directly, as kube-proxy does.
func (w *World) Start() error {
	if w.started {
		return fmt.Errorf("world already started")
	}
	w.started = true
	if err := w.startProxy(); err != nil {
		return err
	}
	if w.cfg.ResyncPeriod > 0 {
		w.scheduleResync()
	}
	return nil
}

func (w *World) startProxy() error {
	w.Runner.StartVirtual(w.cost)
	inst, err := startInstance(w.Client, w.store, w.stop)
	if err != nil {
		return err
	}
	w.inst = inst
	initial := inst.events.drain()
	sortEvents(initial)
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
	w.runStarted("initial")
	w.runFinished(w.Proxier.OnEndpointSlicesSynced())
	return nil
}

// Restart replaces the proxy with a new one, as a kube-proxy restart does:
// the API server and the dataplane keep their state; the new proxy lists
// everything again and syncs once both informers have synced.
func (w *World) Restart() error {
	if !w.started {
		return fmt.Errorf("world not started")
	}
	w.Trace.Add(trace.Event{Kind: trace.Note, Detail: "proxy restart"})
	w.stopProxy()
	if w.held != nil {
		w.held = nil // a new proxy lists afresh
	}
	if err := w.newProxy(); err != nil {
		return err
	}
	return w.startProxy()
}

func (w *World) scheduleResync() {
	w.Clock.AfterFunc(w.cfg.ResyncPeriod, func() {
		if w.closed {
			return
		}
		w.resync()
		w.scheduleResync()
	})
}

// resync delivers an update with identical old and new objects for every
// object in the informers' caches, as a shared informer's resync does.
func (w *World) resync() {
	if w.held != nil || w.inst == nil {
		return // a broken watch has nothing to resync from
	}
	for _, ev := range w.inst.snapshot(true) {
		w.deliver(ev)
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

// nextVersion is the resourceVersion of the world's next write.
func (w *World) nextVersion() string {
	w.rv++
	return strconv.FormatInt(w.rv, 10)
}

// Create adds an object to the API server. Before Start it seeds the initial
// list; after Start it waits until the informer has delivered the event and
// hands it to the proxy at the current virtual instant.
func (w *World) Create(obj any) error { return w.write(obj, false) }

// Update replaces an existing object, like Create.
func (w *World) Update(obj any) error { return w.write(obj, true) }

// Apply creates the object or updates it if it exists.
func (w *World) Apply(obj any) error {
	_, err := w.Get(kindOf(obj), nsName(obj))
	switch {
	case err == nil:
		return w.write(obj, true)
	case isNotFound(err):
		return w.write(obj, false)
	}
	return err
}

// Get reads an object from the API server ("Service" or "EndpointSlice").
func (w *World) Get(kind string, key [2]string) (any, error) {
	ctx := context.Background()
	switch kind {
	case "Service":
		return w.Client.CoreV1().Services(key[0]).Get(ctx, key[1], metav1.GetOptions{})
	case "EndpointSlice":
		return w.Client.DiscoveryV1().EndpointSlices(key[0]).Get(ctx, key[1], metav1.GetOptions{})
	}
	return nil, fmt.Errorf("unsupported kind %q", kind)
}

func kindOf(obj any) string {
	switch obj.(type) {
	case *v1.Service:
		return "Service"
	case *discovery.EndpointSlice:
		return "EndpointSlice"
	}
	return fmt.Sprintf("%T", obj)
}

// nsName is an object's namespace and name.
func nsName(obj any) [2]string {
	m, err := meta.Accessor(obj)
	if err != nil {
		return [2]string{}
	}
	return [2]string{m.GetNamespace(), m.GetName()}
}

func (w *World) write(obj any, update bool) error {
	gvr, ok := resourceOf(obj)
	if !ok {
		return fmt.Errorf("unsupported object type %T", obj)
	}
	// Like the API server, an update that changes nothing is not written:
	// no new resourceVersion, no watch event. The store keeps its own copy.
	m := obj.(metav1.Object)
	written, err := w.store.put(gvr, obj.(runtime.Object), m.GetNamespace(), update, w.nextVersion)
	if err != nil || !written {
		return err
	}
	w.noteWrite(kindOf(obj), [2]string{m.GetNamespace(), m.GetName()})
	return w.await()
}

// noteWrite remembers when an object was written, so that its propagation
// latency counts from the API write even if the proxy hears of it later.
func (w *World) noteWrite(kind string, key [2]string) {
	w.written[w.names.key(kind, key[0], key[1])] = w.Now()
}

// Delete removes an object ("Service" or "EndpointSlice").
func (w *World) Delete(kind, namespace, name string) error {
	gvr, ok := kindResources[kind]
	if !ok {
		return fmt.Errorf("unsupported kind %q", kind)
	}
	if err := w.store.Delete(gvr, namespace, name); err != nil {
		return err
	}
	w.noteWrite(kind, [2]string{namespace, name})
	return w.await()
}

// await is the barrier: every write yields exactly one informer event, which
// is handed to the proxy before virtual time moves on.
func (w *World) await() error {
	if w.inst == nil {
		return nil
	}
	ev, ok := w.inst.events.pop(w.stop)
	if !ok {
		return fmt.Errorf("world closed while waiting for an informer event")
	}
	if w.held != nil {
		w.held.add(ev)
		return nil
	}
	w.deliver(ev)
	return nil
}

// BreakWatch holds informer deliveries for d: writes still reach the API
// server, but the proxy hears nothing until the watch is restored, when it
// gets what a relisting informer delivers: the net change of every object
// that changed, and a no-op update for every other.
func (w *World) BreakWatch(d time.Duration) {
	if w.held != nil || w.inst == nil {
		return
	}
	w.Trace.Add(trace.Event{Kind: trace.Note, Detail: fmt.Sprintf("watch broken for %v", d)})
	w.held = newHeldEvents()
	held, gen := w.held, w.gen
	w.Clock.AfterFunc(d, func() {
		if w.held != held || w.gen != gen || w.closed {
			return
		}
		w.held = nil
		w.Trace.Add(trace.Event{Kind: trace.Note, Detail: "watch restored: relist"})
		for _, ev := range held.relist(w.inst.snapshot(false)) {
			w.deliver(ev)
		}
	})
}

func (w *World) deliver(ev informerEvent) {
	key := w.names.of(ev)
	te := trace.Event{Kind: trace.Object, Op: ev.op, Object: key}
	if ev.resync {
		te.Kind = trace.Resync
	}
	w.Trace.Add(te)
	if !ev.resync && !ev.noop() {
		at, ok := w.written[key]
		if !ok {
			at = w.Now()
		}
		delete(w.written, key)
		w.lastChange[key] = change{at: at, runsBefore: len(w.runs)}
	}
	var err error
	switch ev.kind {
	case "Service":
		old := asService(ev.old)
		cur := asService(ev.obj)
		switch ev.op {
		case "add":
			w.Proxier.OnServiceAdd(cur)
		case "update":
			w.Proxier.OnServiceUpdate(old, cur)
		case "delete":
			w.Proxier.OnServiceDelete(cur)
		}
	case "EndpointSlice":
		old := asSlice(ev.old)
		cur := asSlice(ev.obj)
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
		w.Trace.Add(trace.Event{Kind: trace.Note, Object: key, Err: err.Error()})
	}
}

type change struct {
	at         time.Duration
	runsBefore int
}

// LastChange reports the instant of the latest API write that changed an
// object ("Kind namespace/name") and how many syncs had started before the
// proxy heard of it, so that Runs()[runsBefore] is the first sync that could
// carry it.
func (w *World) LastChange(key string) (at time.Duration, runsBefore int, ok bool) {
	c, ok := w.lastChange[key]
	return c.at, c.runsBefore, ok
}

// Runs lists every sync so far: the initial direct one of each proxy start
// and every runner run.
func (w *World) Runs() []Run { return append([]Run(nil), w.runs...) }

func (w *World) runStarted(why string) {
	n := len(w.runs) + 1
	w.runs = append(w.runs, Run{N: n, Why: why, Start: w.Now(), End: -1})
	w.Trace.Add(trace.Event{Kind: trace.Start, Why: why, Run: n})
}

func (w *World) runFinished(err error) {
	r := &w.runs[len(w.runs)-1]
	r.End = w.Now()
	e := trace.Event{Kind: trace.End, Run: r.N}
	if err != nil {
		r.Err = err.Error()
		e.Err = r.Err
	}
	w.Trace.Add(e)
}

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
func (t *runnerTrace) Started(_ time.Time, why runner.Reason) { t.w.runStarted(string(why)) }
func (t *runnerTrace) Finished(_ time.Time, err error)        { t.w.runFinished(err) }
func (t *runnerTrace) Dropped(_ time.Time, why runner.Reason) {
	t.w.Trace.Add(trace.Event{Kind: trace.Drop, Why: string(why)})
}
