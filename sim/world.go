// Package sim is proxysim's virtual-time world: a fake API server and real
// shared informers feeding the world's consumers — a service proxy (change
// trackers, runner, backend) and any controllers — whose every timer runs on
// a virtual clock.
//
// The world is single-threaded where it matters. Informer goroutines only
// carry events; the world writes one object at a time, waits until every
// informer watching its kind has seen that write, and hands the events to
// the consumers on its own goroutine. Time moves only when the world advances
// its clock, straight from one deadline to the next. So a scenario of hours
// replays in milliseconds and gives the same trace on every run.
//
// sim names no proxy mode: a backend implements proxy.Backend, and a mode
// plugs its own in through Config.NewBackend (see ipvs.Backend, which imports
// sim, never the other way round). sim never imports fakes/ or the
// real-kernel code in netns/.
package sim

import (
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/proxysim/proxysim/sim/proxy"
	"github.com/proxysim/proxysim/sim/runner"
	"github.com/proxysim/proxysim/sim/trace"
	"github.com/proxysim/proxysim/sim/vclock"
)

// DefaultResyncPeriod is kube-proxy's default configSyncPeriod.
const DefaultResyncPeriod = 15 * time.Minute

// CostModel is how much virtual time one runner run takes: Fixed, plus
// PerService for each applied service port, plus PerEndpoint for each
// endpoint, plus what Work makes of the run's work. (A direct sync, the
// initial one or SyncNow's, takes no time whatever the model.)
type CostModel struct {
	Fixed       time.Duration
	PerService  time.Duration
	PerEndpoint time.Duration
	// Work, when set, adds the cost of what the run wrote and read (the
	// SyncWork its backend reported; see WorkCost). It is evaluated after
	// the proxier computed the run, so the run ends at its start plus the
	// whole cost.
	Work WorkCost
	// Runs, when set, is the cost of each runner run in order (the first
	// entry the first run's), the last entry repeating; it replaces the
	// rest of the model.
	Runs []time.Duration
	// Speed is the node's CPU speed factor: each runner run's cost, from
	// Runs or the model, is divided by it (0 means 1). Jitter, if positive,
	// adds to runner run n a uniform extra in [0, Jitter) drawn from
	// JitterSeed and n alone, so that a node's costs are the same in a
	// cluster and replayed alone. Both describe the node, not the model:
	// SetCost keeps them.
	Speed      float64
	Jitter     time.Duration
	JitterSeed uint64
}

// vary applies the node's speed factor and jitter to runner run n's cost.
func (c CostModel) vary(d time.Duration, n int) time.Duration {
	if c.Speed > 0 && c.Speed != 1 {
		d = time.Duration(float64(d) / c.Speed)
	}
	if c.Jitter > 0 {
		d += time.Duration(splitmix(c.JitterSeed^splitmix(uint64(n))) % uint64(c.Jitter))
	}
	return d
}

// splitmix is SplitMix64's finaliser: a well-mixed hash of x.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// Cost evaluates the model's linear part for a proxy of the given size.
func (c CostModel) Cost(servicePorts, endpoints int) time.Duration {
	return c.Fixed + time.Duration(servicePorts)*c.PerService + time.Duration(endpoints)*c.PerEndpoint
}

// CostOf evaluates the model, Runs aside, for a run that did work (whose
// ServicePorts and Endpoints give the linear part).
func (c CostModel) CostOf(work SyncWork) time.Duration {
	d := c.Cost(work.ServicePorts, work.Endpoints)
	if c.Work != nil {
		d += c.Work.SyncCost(work)
	}
	return d
}

// RunCost is the virtual duration of runner run n of a proxy (counted
// from 1 over the proxy's restarts; the direct initial syncs cost nothing
// and are not counted) whose model was set when `since` runs had run:
// the model's Runs entry for the run (the last one repeating), or the
// model evaluated for the run's work, then the node's speed and jitter.
// It is what the world charges each run; a replay of another
// implementation (e2e/upstream's bubble) charges the same through it.
func (c CostModel) RunCost(n, since int, work SyncWork) time.Duration {
	var d time.Duration
	if len(c.Runs) > 0 {
		d = c.Runs[min(max(n-since-1, 0), len(c.Runs)-1)]
	} else {
		d = c.CostOf(work)
	}
	return c.vary(d, n)
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
	// exist, and again at every restart (see ipvs.Backend); it wins over
	// Backend.
	NewBackend func(w *World) (proxy.Backend, error)
	// Start is the virtual instant the world starts at (default vclock.Epoch,
	// or Clock's time).
	Start time.Time
	// Clock, if set, is the world's clock: made first, so that what the
	// backend programs (a fake kernel's connection model) can be built on it.
	// It must read Start.
	Clock *vclock.Clock
	// Endpoints tunes endpoint conversion (node hints, by kube-proxy version).
	Endpoints proxy.EndpointSliceTrackerOptions
	// Metrics, if set, hears kube-proxy's metric updates (sim/kpmetrics).
	Metrics MetricsSink
	// TraceWork records a run.work event after each sync with what it
	// wrote and read (SyncRecord.Work has it either way). Off by default,
	// so that traces stay as they were.
	TraceWork bool
}

// MaxChain bounds a chain of writes, each made by a consumer handling an
// event of the one before: a longer chain is taken for a loop between
// consumers, and its next write fails.
const MaxChain = 64

// World is one simulated node and its cluster: an API server, the node's
// service proxy and any other consumers. The API server and the dataplane
// outlive the proxy: Restart replaces the proxy (informers, trackers,
// runner, backend) and keeps the rest.
type World struct {
	Clock *vclock.Clock
	Trace *trace.Recorder

	// store is the API server. Each consumer's informers read it through a
	// fake clientset of their own; the world reads and writes it directly.
	store   *objectStore
	names   objectNames
	watches watchCounter
	cfg     Config
	subs    []*subscription // in the order they subscribed; the proxy first
	proxy   *proxyConsumer
	psub    *subscription // the proxy's subscription
	stop    chan struct{}
	started bool
	closed  bool
	rv      int64
	syncs   []SyncRecord
	// uids and generated count the UIDs and generated names handed out
	// (see admit).
	uids, generated int64

	// pending is the FIFO of deliveries not yet handed over. handler is the
	// consumer whose handler runs (nil outside handlers), and chain the
	// chain length of the event it handles.
	pending []delivery
	handler *subscription
	chain   int
	// author names the writer outside handlers (see As); "" for a scenario.
	author string
	// chainErr is the first write refused for its chain length since the
	// current drain began; err the first error no caller could be given.
	chainErr error
	err      error

	// lastChange maps "Kind ns/name" to its latest real change as the proxy
	// heard it; written holds the instant of writes the proxy has not heard
	// of yet.
	lastChange map[string]change
	written    map[string]time.Duration

	// prog follows network programming latency (see programming.go).
	prog programming
	// writesBy holds the instants of each named writer's writes.
	writesBy map[string][]time.Duration
	// runnerRuns counts the runner's runs (the direct initial syncs not
	// included); failSyncs is how many of the next runs fail by request.
	runnerRuns int
	failSyncs  int
	costFrom   int // runnerRuns when the cost model last changed
	// directQueued are direct syncs (SyncNow) waiting for a run to end.
	directQueued []string

	// cluster is the world's other nodes (see AddNode); listing is set
	// while the world's proxy takes its informers' initial lists.
	cluster *cluster
	listing bool
	// restarts are the instants of the proxy's restarts.
	restarts []time.Duration
}

// Restarts lists the instants the world's proxy restarted.
func (w *World) Restarts() []time.Duration { return w.restarts }

// subscription is one consumer and its informers.
type subscription struct {
	c     Consumer
	name  string
	kinds []*kind     // in the table's order
	inst  *instance   // nil until started
	held  *heldEvents // non-nil while its watch is broken
	quiet bool        // the proxy: its deliveries are traced without its name
	// shared: its informers get the stored objects, not copies. Only the
	// proxy's, whose handlers never modify an object; a controller may, and
	// must not corrupt the store or another consumer's cache when it does.
	shared bool
}

// delivery is one event on its way to one consumer. chain counts the writes
// that led to it, each made while handling an event of the one before (0 for
// initial lists, resyncs and relists).
type delivery struct {
	sub   *subscription
	ev    informerEvent
	chain int
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

// NewWorld builds a world with its proxy. Seed it with Create, add other
// consumers with Subscribe, then call Start.
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
		if cfg.Clock != nil {
			cfg.Start = cfg.Clock.Now()
		}
	}
	clk := cfg.Clock
	if clk == nil {
		clk = vclock.New(cfg.Start)
	} else if !clk.Now().Equal(cfg.Start) {
		return nil, fmt.Errorf("sim: Config.Clock reads %v, not the world's start %v", clk.Now(), cfg.Start)
	}
	if err := cfg.Runner.Validate(); err != nil {
		return nil, err
	}
	w := &World{
		Clock:      clk,
		store:      newObjectStore(),
		cfg:        cfg,
		stop:       make(chan struct{}),
		lastChange: map[string]change{},
		written:    map[string]time.Duration{},
	}
	w.Trace = trace.NewRecorder(cfg.Start, w.Clock.Now)
	p, err := w.newProxy()
	if err != nil {
		return nil, err
	}
	sub, err := w.subscription(p)
	if err != nil {
		return nil, err
	}
	sub.quiet, sub.shared = true, true
	w.proxy, w.psub = p, sub
	w.subs = append(w.subs, sub)
	return w, nil
}

func (w *World) subscription(c Consumer) (*subscription, error) {
	s := &subscription{c: c, name: c.Name()}
	want := map[string]bool{}
	for _, name := range c.Kinds() {
		if _, err := lookupKind(name); err != nil {
			return nil, fmt.Errorf("consumer %s: %w", s.name, err)
		}
		want[name] = true
	}
	for _, k := range kinds {
		if want[k.name] {
			s.kinds = append(s.kinds, k)
		}
	}
	return s, nil
}

// Subscribe adds a consumer. Consumers start in the order they subscribed,
// after the proxy; one that subscribes after Start starts at once, with the
// initial lists of its kinds.
func (w *World) Subscribe(c Consumer) error {
	if w.closed {
		return fmt.Errorf("world closed")
	}
	if w.handler != nil {
		return fmt.Errorf("%s subscribed %s from a handler", w.handler.name, c.Name())
	}
	s, err := w.subscription(c)
	if err != nil {
		return err
	}
	for _, o := range w.subs {
		if o.name == s.name {
			return fmt.Errorf("a consumer named %q already subscribed", s.name)
		}
	}
	w.subs = append(w.subs, s)
	if !w.started {
		return nil
	}
	return w.startSub(s)
}

// Now is the virtual time since the world started.
func (w *World) Now() time.Duration { return w.Clock.Since(w.cfg.Start) }

// Config returns the world's configuration after defaults.
func (w *World) Config() Config { return w.cfg }

// Backend returns the current proxy's backend; a caller that knows its mode
// asserts its concrete type (see ipvs.Backend for one).
func (w *World) Backend() proxy.Backend { return w.proxy.backend }

// Err reports the first error the world met where it could not return it:
// in a resync or a relist, which run inside the clock.
func (w *World) Err() error { return w.err }

// Close stops the informers and every consumer's timers.
func (w *World) Close() {
	if w.closed {
		return
	}
	w.closed = true
	close(w.stop)
	for _, s := range w.subs {
		w.stopSub(s)
	}
	if w.cluster != nil {
		w.cluster.close()
	}
}

func (w *World) stopSub(s *subscription) {
	if l, ok := s.c.(Lifecycle); ok {
		l.Stop()
	}
	if s.inst != nil {
		s.inst.close()
		s.inst = nil
	}
	s.held = nil
}

// Start starts every consumer at the current virtual instant, one after
// another, the proxy first. Each gets its informers' initial lists in
// kind/namespace/name order (list order is unspecified), then one synced
// notification per kind; the proxy's second one syncs directly, as
// kube-proxy does.
func (w *World) Start() error {
	if w.started {
		return fmt.Errorf("world already started")
	}
	w.started = true
	for _, s := range w.subs {
		if err := w.startSub(s); err != nil {
			return err
		}
		// The other nodes start right after the world's proxy, before any
		// controller: each as if it were the world's proxy.
		if s == w.psub && w.cluster != nil {
			if err := w.cluster.start(); err != nil {
				return err
			}
		}
	}
	if w.cfg.ResyncPeriod > 0 {
		w.scheduleResync()
	}
	return nil
}

func (w *World) startSub(s *subscription) error {
	if l, ok := s.c.(Lifecycle); ok {
		if err := l.Start(); err != nil {
			return fmt.Errorf("starting %s: %w", s.name, err)
		}
	}
	inst, err := startInstance(w.store, s.shared, &w.watches, s.kinds, w.stop)
	if err != nil {
		return err
	}
	s.inst = inst
	initial := inst.events.drain()
	sortEvents(initial)
	for _, ev := range initial {
		w.pending = append(w.pending, delivery{sub: s, ev: ev})
	}
	w.listing = s == w.psub
	err = w.drain()
	w.listing = false
	if err != nil {
		return err
	}
	for _, k := range s.kinds {
		e := trace.Event{Kind: trace.Synced, Object: k.name}
		if !s.quiet {
			e.Detail = "to " + s.name
		}
		w.Trace.Add(e)
		if err := s.c.OnSynced(k.name); err != nil {
			return fmt.Errorf("%s: %s synced: %w", s.name, k.name, err)
		}
		if err := w.drain(); err != nil {
			return err
		}
	}
	return nil
}

// Restart replaces the proxy with a new one, as a kube-proxy restart does:
// the API server and the dataplane keep their state; the new proxy lists
// everything again and syncs once both informers have synced.
func (w *World) Restart() error {
	if !w.started {
		return fmt.Errorf("world not started")
	}
	if w.handler != nil {
		return fmt.Errorf("%s restarted the proxy from a handler", w.handler.name)
	}
	w.Trace.Add(trace.Event{Kind: trace.Note, Detail: "proxy restart"})
	w.restarts = append(w.restarts, w.Now())
	w.stopSub(w.psub) // a new proxy lists afresh, broken watch or not
	p, err := w.newProxy()
	if err != nil {
		return err
	}
	w.proxy = p
	w.psub.c = p
	return w.startSub(w.psub)
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
// object in each consumer's informer caches, as a shared informer's resync
// does.
func (w *World) resync() {
	for _, s := range w.subs {
		if s.held != nil || s.inst == nil {
			continue // a broken watch has nothing to resync from
		}
		for _, ev := range s.inst.snapshot(true) {
			w.pending = append(w.pending, delivery{sub: s, ev: ev})
		}
	}
	w.keep(w.drain())
}

// keep records an error raised inside the clock, where no caller can take it.
func (w *World) keep(err error) {
	if err == nil {
		return
	}
	w.Trace.Add(trace.Event{Kind: trace.Note, Err: err.Error()})
	if w.err == nil {
		w.err = err
	}
}

// Advance moves virtual time on by d, firing every timer on the way.
func (w *World) Advance(d time.Duration) { w.Clock.Advance(d) }

// RunUntil advances virtual time to offset d from the world's start.
func (w *World) RunUntil(d time.Duration) { w.Clock.AdvanceTo(w.cfg.Start.Add(d)) }

// At schedules f at offset d from the world's start.
func (w *World) At(d time.Duration, f func()) {
	w.Clock.AfterFunc(w.cfg.Start.Add(d).Sub(w.Clock.Now()), f)
}

// As runs f with its writes traced as the named writer's, as a handler's
// are traced as its consumer's: for a controller that writes from its own
// timers rather than from a handler.
func (w *World) As(name string, f func() error) error {
	prev := w.author
	w.author = name
	defer func() { w.author = prev }()
	return f()
}

// Create adds an object of any kind the world carries (see Kinds) to the API
// server. Before Start it seeds the initial lists; after Start it waits
// until every informer watching the kind has seen the write and hands the
// events to their consumers, and the events of any writes they make in
// turn, at the current virtual instant. Made by a consumer while it handles
// an event, it is traced as that consumer's, and its events are delivered
// after the current one.
func (w *World) Create(obj runtime.Object) error {
	_, err := w.writeNamed("create", obj)
	return err
}

// CreateNamed is Create returning the object's name, which the world
// generates, as the API server does, for an object with only
// metadata.generateName.
func (w *World) CreateNamed(obj runtime.Object) (string, error) {
	return w.writeNamed("create", obj)
}

// Update replaces an existing object, like Create.
func (w *World) Update(obj runtime.Object) error { return w.write("update", obj) }

// Apply creates the object or updates it if it exists.
func (w *World) Apply(obj runtime.Object) error {
	k, err := kindOfObject(obj)
	if err != nil {
		return err
	}
	m := obj.(Object)
	if _, ok := w.store.stored(k.gvr, m.GetNamespace(), m.GetName()); ok {
		return w.write("update", obj)
	}
	return w.write("create", obj)
}

// Get reads an object of the named kind from the API server.
func (w *World) Get(kind string, key [2]string) (runtime.Object, error) {
	k, err := lookupKind(kind)
	if err != nil {
		return nil, err
	}
	return w.store.Get(k.gvr, key[0], key[1])
}

// Delete removes an object of the named kind, like Create.
func (w *World) Delete(kind, namespace, name string) error {
	k, err := lookupKind(kind)
	if err != nil {
		return err
	}
	if err := w.checkChain(k, namespace, name); err != nil {
		return err
	}
	cur, _ := w.store.stored(k.gvr, namespace, name)
	err = w.store.Delete(k.gvr, namespace, name)
	if _, isPod := cur.(*v1.Pod); isPod && err == nil {
		w.programmingPod(cur, cur, true)
	}
	return w.afterWrite(k, "delete", namespace, name, err)
}

func (w *World) write(op string, obj runtime.Object) error {
	_, err := w.writeNamed(op, obj)
	return err
}

func (w *World) writeNamed(op string, obj runtime.Object) (string, error) {
	k, err := kindOfObject(obj)
	if err != nil {
		return "", err
	}
	m := obj.(Object)
	ns, name := m.GetNamespace(), m.GetName()
	if op == "update" {
		cur, ok := w.store.stored(k.gvr, ns, name)
		if ok {
			obj = w.admit(k, obj, cur)
		}
		// Like the API server, an update that changes nothing is not
		// written: no new resourceVersion, no watch event. Only the world
		// writes the store, so it cannot change before put.
		if ok && equalButVersion(obj, cur) {
			return name, nil
		}
	} else {
		obj = w.admit(k, obj, nil)
		name = obj.(Object).GetName()
	}
	if err := w.checkChain(k, ns, name); err != nil {
		return name, err
	}
	var before runtime.Object
	if _, isPod := obj.(*v1.Pod); isPod {
		before, _ = w.store.stored(k.gvr, ns, name)
	}
	// The store keeps a copy: the caller's object is left alone.
	err = w.store.put(k.gvr, obj, ns, op == "update", w)
	if err == nil && before != nil || err == nil && op == "create" {
		w.programmingPod(before, obj, false)
	}
	return name, w.afterWrite(k, op, ns, name, err)
}

// nextVersion is the resourceVersion of the world's next write; the store
// asks for it only for a write that happens.
func (w *World) nextVersion() string {
	w.rv++
	return strconv.FormatInt(w.rv, 10)
}

// checkChain refuses a consumer's write that would make its chain too long.
func (w *World) checkChain(k *kind, namespace, name string) error {
	if w.handler == nil || w.chain < MaxChain {
		return nil
	}
	err := fmt.Errorf("%s's write of %s would be number %d in a chain of writes, each made handling an event of the one before (limit %d): a loop between consumers?",
		w.handler.name, objectKey(k.name, namespace, name), w.chain+1, MaxChain)
	w.Trace.Add(trace.Event{Kind: trace.Object, Op: "refused", Object: objectKey(k.name, namespace, name), Why: w.handler.name, Err: err.Error()})
	if w.chainErr == nil {
		w.chainErr = err
	}
	return err
}

// objectKey names an object in the trace: "Kind namespace/name", or "Kind
// name" for a cluster-scoped one.
func objectKey(kind, namespace, name string) string {
	if namespace == "" {
		return kind + " " + name
	}
	return kind + " " + namespace + "/" + name
}

// afterWrite follows a write to the API server (err is its outcome): trace it
// if a consumer or a named writer made it, then the barrier.
func (w *World) afterWrite(k *kind, op, namespace, name string, err error) error {
	key := w.names.key(k.name, namespace, name)
	by := w.author
	if w.handler != nil {
		by = w.handler.name
	}
	if by != "" {
		e := trace.Event{Kind: trace.Object, Op: op, Object: key, Why: by}
		if err != nil {
			e.Err = err.Error()
		}
		w.Trace.Add(e)
	}
	if err != nil {
		return err
	}
	if by != "" {
		if w.writesBy == nil {
			w.writesBy = map[string][]time.Duration{}
		}
		w.writesBy[by] = append(w.writesBy[by], w.Now())
	}
	// Its propagation latency counts from the API write even if the proxy
	// hears of it later; a kind the proxy does not watch has none (and would
	// only grow the map).
	if slices.Contains(w.psub.kinds, k) {
		w.written[key] = w.Now()
	}
	return w.await(k)
}

// await is the barrier: a write yields exactly one event in every informer
// watching its kind; each is queued for its consumer, in the order the
// consumers subscribed, and unless the write was made by a handler (whose
// drain goes on after it returns) delivered before virtual time moves on.
func (w *World) await(k *kind) error {
	chain := 1
	if w.handler != nil {
		chain = w.chain + 1
	}
	for _, s := range w.subs {
		if s.inst == nil || !s.inst.watches(k) {
			continue
		}
		ev, ok := s.inst.events.pop(w.stop)
		if !ok {
			return fmt.Errorf("world closed while waiting for an informer event")
		}
		if s.held != nil {
			s.held.add(ev)
			continue
		}
		w.pending = append(w.pending, delivery{sub: s, ev: ev, chain: chain})
	}
	return w.drain()
}

// drain delivers pending events in order until none is left, including
// those of writes the consumers make meanwhile. It returns the first write
// refused for its chain length.
func (w *World) drain() error {
	if w.handler != nil {
		return nil // inside a handler: the outer drain goes on
	}
	// The loop reads len(w.pending) afresh: handlers' writes append to it.
	for i := 0; i < len(w.pending); i++ {
		d := w.pending[i]
		w.pending[i] = delivery{}
		w.handler, w.chain = d.sub, d.chain
		w.deliver(d)
		w.handler, w.chain = nil, 0
	}
	w.pending = w.pending[:0]
	err := w.chainErr
	w.chainErr = nil
	return err
}

// BreakWatch holds informer deliveries for d: writes still reach the API
// server, but the consumers hear nothing until the watch is restored, when
// each gets what a relisting informer delivers: the net change of every
// object that changed, and a no-op update for every other.
func (w *World) BreakWatch(d time.Duration) {
	var broken []*subscription
	for _, s := range w.subs {
		if s.held == nil && s.inst != nil {
			s.held = newHeldEvents()
			broken = append(broken, s)
		}
	}
	if len(broken) == 0 {
		return
	}
	w.Trace.Add(trace.Event{Kind: trace.Note, Detail: fmt.Sprintf("watch broken for %v", d)})
	held := make([]*heldEvents, len(broken))
	for i, s := range broken {
		held[i] = s.held
	}
	w.Clock.AfterFunc(d, func() {
		if w.closed {
			return
		}
		restored := false
		for i, s := range broken {
			if s.held != held[i] {
				continue // restarted meanwhile: it listed afresh
			}
			s.held = nil
			if !restored {
				w.Trace.Add(trace.Event{Kind: trace.Note, Detail: "watch restored: relist"})
				restored = true
			}
			for _, ev := range held[i].relist(s.inst.snapshot(false)) {
				w.pending = append(w.pending, delivery{sub: s, ev: ev})
			}
		}
		w.keep(w.drain())
	})
}

// deliver hands one event to its consumer and traces it.
func (w *World) deliver(d delivery) {
	s, ev := d.sub, d.ev
	key := w.names.of(ev)
	te := trace.Event{Kind: trace.Object, Op: ev.op, Object: key}
	if ev.resync {
		te.Kind = trace.Resync
	}
	if !s.quiet {
		te.Detail = "to " + s.name
	}
	w.Trace.Add(te)
	var err error
	if s == w.psub && w.cluster != nil && w.cluster.take(ev, w.listing) {
		defer w.cluster.tell()
	}
	switch ev.op {
	case "add":
		err = s.c.OnAdd(ev.kind.name, asObject(ev.obj))
	case "update":
		err = s.c.OnUpdate(ev.kind.name, asObject(ev.old), asObject(ev.obj))
	case "delete":
		err = s.c.OnDelete(ev.kind.name, asObject(ev.obj))
	}
	if err != nil {
		e := trace.Event{Kind: trace.Note, Object: key, Err: err.Error()}
		if !s.quiet {
			e.Detail = s.name
		}
		w.Trace.Add(e)
	}
}

// Writes lists the instants of the writes a consumer or named writer made
// (see As), in order.
func (w *World) Writes(by string) []time.Duration { return w.writesBy[by] }
