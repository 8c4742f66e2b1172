package ingress

import (
	"fmt"
	"maps"
	"math"
	"net"
	"reflect"
	"slices"
	"time"

	"golang.org/x/time/rate"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	networking "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/proxysim/proxysim/sim"
	"github.com/proxysim/proxysim/sim/trace"
)

// Config is the controller's flags and the model's costs.
type Config struct {
	// Name is the consumer's name in the trace (default "ingress-nginx").
	Name string
	// RingSize is the ring channel's capacity (upstream: 1024, fixed).
	RingSize int
	// SyncRateLimit is --sync-rate-limit: syncs per second, burst 1.
	SyncRateLimit float64
	// DynamicConfigurationRetries is --dynamic-configuration-retries.
	DynamicConfigurationRetries int
	// ReloadCost is how long a reload (render, nginx -t, nginx -s reload)
	// takes in virtual time: the model's own figure.
	ReloadCost time.Duration
	// IngressClassAnnotation is the value of kubernetes.io/ingress.class
	// the controller answers to (--ingress-class, "nginx"), and Controller
	// the IngressClass spec.controller it owns (--controller-class).
	IngressClassAnnotation string
	Controller             string
	// WatchIngressWithoutClass is --watch-ingress-without-class.
	WatchIngressWithoutClass bool
	// ConfigMap is --configmap, "namespace/name".
	ConfigMap string
	// AnnotationsPrefix is --annotations-prefix.
	AnnotationsPrefix string
	// BackendsSyncInterval is the Lua balancer's BACKENDS_SYNC_INTERVAL.
	BackendsSyncInterval time.Duration
}

// DefaultConfig is the controller's defaults at controller-v1.15.1
// (pkg/flags/flags.go; store.go; balancer.lua).
func DefaultConfig() Config {
	return Config{
		Name:                        "ingress-nginx",
		RingSize:                    1024,
		SyncRateLimit:               0.3,
		DynamicConfigurationRetries: 15,
		IngressClassAnnotation:      "nginx",
		Controller:                  "k8s.io/ingress-nginx",
		ConfigMap:                   "ingress-nginx/ingress-nginx-controller",
		AnnotationsPrefix:           "nginx.ingress.kubernetes.io",
		BackendsSyncInterval:        time.Second,
	}
}

// Fixed delays of the source.
const (
	// ingressInformerDelay: store.go Informer.Run sleeps 1 s after the
	// other informers synced before it starts the Ingress informer.
	ingressInformerDelay = time.Second
	// firstSyncSleep: syncIngress sleeps 1 s before the first dynamic
	// update, for nginx to start listening.
	firstSyncSleep = time.Second
	// Dynamic update backoff (syncIngress: wait.Backoff{Duration 1s,
	// Factor 1.3, Jitter 0.1}); jitter is not modelled.
	dynamicBackoff = time.Second
	dynamicFactor  = 1.3
)

// classAnnotation is the legacy ingress class annotation
// (internal/ingress/annotations/class IngressKey).
const classAnnotation = "kubernetes.io/ingress.class"

// TraceKind is the trace kind of the controller's own events; their op
// says what happened: nginx.start, skip, sync.wait, sync.nochange,
// sync.dynamic, reload.start, reload.ok, reload.fail, dynamic.post,
// dynamic.fail, sync.end, sync.fail, lua.sync, routed, ring.drop, ignore.
const TraceKind = "ingress"

// Metrics are the controller's metrics (internal/ingress/metric/collectors
// controller.go, namespace nginx_ingress_controller) as exact values, and a
// few counts of the model's own.
type Metrics struct {
	// Reloads is success (reloads that worked), ReloadErrors errors.
	Reloads      int
	ReloadErrors int
	// LastReloadSuccessful is config_last_reload_successful, and
	// LastReloadSuccessAt the instant behind
	// config_last_reload_successful_timestamp_seconds (-1 before any).
	LastReloadSuccessful bool
	LastReloadSuccessAt  time.Duration
	// ConfigHash is config_hash: the running configuration's hash, 0 after
	// a failed reload.
	ConfigHash uint64
	// The model's own: syncs that passed the rate limiter, queue items
	// skipped as older than the last sync, successful and failed backend
	// posts, and events the ring dropped.
	Syncs          int
	Skipped        int
	DynamicUpdates int
	DynamicErrors  int
	RingDropped    int
}

// Sample is one latency measurement: an EndpointSlice change, and when the
// Lua balancer first routed by a configuration that carried it.
type Sample struct {
	Slice   string // "namespace/name"
	Changed time.Duration
	Routed  time.Duration
}

// Latency is Routed - Changed.
func (s Sample) Latency() time.Duration { return s.Routed - s.Changed }

// Controller is the ingress-nginx controller as a consumer of the world.
type Controller struct {
	cfg Config
	w   *sim.World

	// The store: the listers the build reads, and what the handlers need.
	l             listers
	classes       map[string]*networking.IngressClass // ours only
	ingressOn     bool                                // the Ingress informer started
	heldIngresses map[string]*networking.Ingress      // the API's ingresses before it did
	sliceChanged  map[string]time.Duration            // "ns/name" -> last endpoints change

	ring     ring
	readerOn bool // the main loop reads the ring

	// The task queue and its worker.
	queue     []element
	seq       uint64
	lastSync  stamp
	synced    bool // lastSync is set
	busy      bool
	wakeArmed bool
	current   element
	currentTS stamp
	failures  map[string]int // requeues of a failing key
	retryRate *rate.Limiter

	limiter flowcontrol.RateLimiter
	slept   time.Duration // what the limiter asked to sleep, see limiterClock

	running *Configuration // the last configuration fully applied
	live    *Configuration // what nginx serves: servers of the last reload
	pcfg    *Configuration // the one being applied
	pvers   sliceVersions
	pbuilt  time.Duration // when pcfg was built

	// The Lua side: the shared dictionary the POST fills, and one worker.
	dict      luaDict
	worker    luaWorker
	workerGen int

	metrics  Metrics
	reloads  []time.Duration
	dynamic  []time.Duration
	syncs    []time.Duration
	samples  []Sample
	unrouted map[string][]time.Duration // slice -> its changes not routed yet
	takes    []take                     // each moment the Lua worker routed by a configuration

	// Faults: the next n reloads, or backend posts, fail.
	failReloads int
	failPosts   int
	stopped     bool
}

type luaDict struct {
	set      bool
	gen      int // which post it holds
	backends []Backend
	stamp    int64 // ngx.time() of the POST: whole seconds
	versions sliceVersions
	built    time.Duration // the latest build whose backends these are
}

// take is a moment the Lua worker routed by a configuration built at
// built: the addresses it sent traffic to then (sorted), from which a
// pod's latency is read.
type take struct {
	at, built time.Duration
	addrs     []string
}

type luaWorker struct {
	synced   int64 // backends_last_synced_at
	gen      int   // the post it took
	backends map[string]Backend
	versions sliceVersions
	up       bool
}

// New builds the controller; Subscribe it to the world before Start.
func New(w *sim.World, cfg Config) (*Controller, error) {
	d := DefaultConfig()
	if cfg.Name == "" {
		cfg.Name = d.Name
	}
	if cfg.RingSize <= 0 {
		return nil, fmt.Errorf("ingress: ring size %d: want at least 1", cfg.RingSize)
	}
	if cfg.SyncRateLimit <= 0 {
		return nil, fmt.Errorf("ingress: sync rate limit %v: want more than 0", cfg.SyncRateLimit)
	}
	if cfg.DynamicConfigurationRetries < 0 {
		return nil, fmt.Errorf("ingress: negative dynamic configuration retries")
	}
	if cfg.BackendsSyncInterval <= 0 {
		cfg.BackendsSyncInterval = d.BackendsSyncInterval
	}
	if cfg.AnnotationsPrefix == "" {
		cfg.AnnotationsPrefix = d.AnnotationsPrefix
	}
	c := &Controller{
		cfg:           cfg,
		w:             w,
		classes:       map[string]*networking.IngressClass{},
		heldIngresses: map[string]*networking.Ingress{},
		sliceChanged:  map[string]time.Duration{},
		failures:      map[string]int{},
		unrouted:      map[string][]time.Duration{},
		ring:          ring{size: cfg.RingSize},
		running:       &Configuration{},
		retryRate:     rate.NewLimiter(retryQPS, retryBurst),
	}
	c.l = listers{
		ingresses: map[string]*networking.Ingress{},
		services:  map[string]*v1.Service{},
		slices:    map[string]map[string]*discovery.EndpointSlice{},
	}
	c.metrics.LastReloadSuccessAt = -1
	// The token bucket is client-go's own, on a clock whose Sleep records
	// the wait instead of blocking: the rest of the sync is then scheduled
	// that far ahead on the world's clock.
	c.limiter = flowcontrol.NewTokenBucketRateLimiterWithClock(float32(cfg.SyncRateLimit), 1, limiterClock{c})
	return c, nil
}

// limiterClock gives flowcontrol the world's time; Accept's sleep becomes a
// delay the controller waits out on the world's clock.
type limiterClock struct{ c *Controller }

func (l limiterClock) Now() time.Time        { return l.c.w.Clock.Now() }
func (l limiterClock) Sleep(d time.Duration) { l.c.slept += d }

func (l limiterClock) Since(t time.Time) time.Duration { return l.Now().Sub(t) }

// Name implements sim.Consumer.
func (c *Controller) Name() string { return c.cfg.Name }

// Kinds implements sim.Consumer: the store's informers (store.go New).
func (c *Controller) Kinds() []string {
	return []string{"Service", "EndpointSlice", "Ingress", "IngressClass", "ConfigMap", "Secret"}
}

func (c *Controller) note(op, obj, detail string) {
	c.w.Trace.Add(trace.Event{Kind: TraceKind, Op: op, Object: obj, Detail: detail})
}

// Start implements sim.Lifecycle: the store's informers start now; the
// Ingress informer, and after it nginx and the sync loop, 1 s later.
func (c *Controller) Start() error {
	c.w.Clock.AfterFunc(ingressInformerDelay, c.startLoop)
	return nil
}

// Stop implements sim.Lifecycle.
func (c *Controller) Stop() { c.stopped = true }

// startLoop is the end of store.Run and the rest of nginx.go Start: the
// Ingress informer lists, nginx starts (its Lua worker with it), the
// initial sync is queued and the main loop begins reading the ring.
func (c *Controller) startLoop() {
	if c.stopped {
		return
	}
	c.ingressOn = true
	for _, k := range slices.Sorted(maps.Keys(c.heldIngresses)) {
		c.ingressAdd(c.heldIngresses[k])
	}
	c.heldIngresses = nil
	c.live = &Configuration{}
	c.note("nginx.start", "", "")
	c.startWorker()
	c.add(element{key: "initial-sync", ts: c.stampAt(c.w.Now() + nonSkippable)})
	c.readerOn = true
	for _, ev := range c.ring.drain() {
		c.enqueue(ev)
	}
	c.wake()
}

// OnSynced implements sim.Consumer.
func (c *Controller) OnSynced(string) error { return nil }

// OnAdd, OnUpdate and OnDelete are the store's handlers (store.go New).
func (c *Controller) OnAdd(kind string, obj runtime.Object) error {
	return c.handle(kind, nil, obj, false)
}

func (c *Controller) OnUpdate(kind string, old, obj runtime.Object) error {
	return c.handle(kind, old, obj, false)
}

func (c *Controller) OnDelete(kind string, obj runtime.Object) error {
	return c.handle(kind, obj, nil, true)
}

func (c *Controller) handle(kind string, old, cur runtime.Object, deleted bool) error {
	switch kind {
	case "Service":
		c.onService(asT[v1.Service](old), asT[v1.Service](cur), deleted)
	case "EndpointSlice":
		c.onSlice(asT[discovery.EndpointSlice](old), asT[discovery.EndpointSlice](cur), deleted)
	case "Ingress":
		c.onIngress(asT[networking.Ingress](old), asT[networking.Ingress](cur), deleted)
	case "IngressClass":
		c.onClass(asT[networking.IngressClass](old), asT[networking.IngressClass](cur), deleted)
	case "ConfigMap":
		c.onConfigMap(asT[v1.ConfigMap](old), asT[v1.ConfigMap](cur), deleted)
	case "Secret":
		c.onSecret(asT[v1.Secret](old), asT[v1.Secret](cur), deleted)
	}
	return nil
}

func asT[T any](o runtime.Object) *T {
	if o == nil {
		return nil
	}
	t, _ := any(o).(*T)
	return t
}

func key(ns, name string) string { return ns + "/" + name }

// onService: the lister always follows; only an ExternalName service's
// add or delete, or any real change, is an event (store.go serviceHandler).
func (c *Controller) onService(old, cur *v1.Service, deleted bool) {
	switch {
	case deleted:
		delete(c.l.services, key(old.Namespace, old.Name))
		if old.Spec.Type == v1.ServiceTypeExternalName {
			c.send(event{key: key(old.Namespace, old.Name)})
		}
	case old == nil:
		c.l.services[key(cur.Namespace, cur.Name)] = cur
		if cur.Spec.Type == v1.ServiceTypeExternalName {
			c.send(event{key: key(cur.Namespace, cur.Name)})
		}
	default:
		c.l.services[key(cur.Namespace, cur.Name)] = cur
		if !reflect.DeepEqual(old, cur) {
			c.send(event{key: key(cur.Namespace, cur.Name)})
		}
	}
}

// onSlice: adds and deletes are events; an update only when the endpoints
// changed (store.go's EndpointSlice handler), so a ports-only change is
// not.
func (c *Controller) onSlice(old, cur *discovery.EndpointSlice, deleted bool) {
	s := cur
	if deleted {
		s = old
	}
	svc := s.Labels[discovery.LabelServiceName]
	k := key(s.Namespace, s.Name)
	switch {
	case deleted:
		if m := c.l.slices[key(s.Namespace, svc)]; m != nil {
			delete(m, s.Name)
		}
	default:
		if old != nil {
			if osvc := old.Labels[discovery.LabelServiceName]; osvc != svc {
				delete(c.l.slices[key(s.Namespace, osvc)], s.Name)
			}
		}
		m := c.l.slices[key(s.Namespace, svc)]
		if m == nil {
			m = map[string]*discovery.EndpointSlice{}
			c.l.slices[key(s.Namespace, svc)] = m
		}
		m[s.Name] = s
	}
	if !deleted && old != nil && reflect.DeepEqual(old.Endpoints, cur.Endpoints) {
		return
	}
	c.sliceChanged[k] = c.w.Now()
	c.unrouted[k] = append(c.unrouted[k], c.w.Now())
	c.send(event{key: k})
}

// ingressClassOf is store.go GetIngressClass: spec.ingressClassName must
// name one of this controller's IngressClasses; else the legacy annotation
// must equal --ingress-class; else only --watch-ingress-without-class
// admits it.
func (c *Controller) ingressClassOf(ing *networking.Ingress) (string, error) {
	if n := ing.Spec.IngressClassName; n != nil {
		if _, ok := c.classes[*n]; !ok {
			return "", fmt.Errorf("no IngressClass %q of controller %s", *n, c.cfg.Controller)
		}
		return *n, nil
	}
	if v, ok := ing.Annotations[classAnnotation]; ok {
		if v != c.cfg.IngressClassAnnotation {
			return "", fmt.Errorf("ingress class annotation %q is not %q", v, c.cfg.IngressClassAnnotation)
		}
		return v, nil
	}
	if c.cfg.WatchIngressWithoutClass {
		return "_", nil
	}
	return "", fmt.Errorf("no ingress class")
}

func (c *Controller) onIngress(old, cur *networking.Ingress, deleted bool) {
	if !c.ingressOn {
		// The Ingress informer has not listed yet: it will see the state
		// as it is when it does.
		if deleted {
			delete(c.heldIngresses, key(old.Namespace, old.Name))
		} else {
			c.heldIngresses[key(cur.Namespace, cur.Name)] = cur
		}
		return
	}
	switch {
	case deleted:
		c.ingressDelete(old)
	case old == nil:
		c.ingressAdd(cur)
	default:
		// store.go's Ingress UpdateFunc: the class decides between an add,
		// a delete and an update; an identical object is no event.
		_, errOld := c.ingressClassOf(old)
		_, errCur := c.ingressClassOf(cur)
		switch {
		case errOld != nil && errCur == nil:
		case errOld == nil && errCur != nil:
			c.ingressDelete(old)
			return
		case errCur == nil && !reflect.DeepEqual(old, cur):
		default:
			return
		}
		c.l.ingresses[key(cur.Namespace, cur.Name)] = cur
		c.send(event{key: key(cur.Namespace, cur.Name)})
	}
}

func (c *Controller) ingressAdd(ing *networking.Ingress) {
	if _, err := c.ingressClassOf(ing); err != nil {
		c.note("ignore", "Ingress "+key(ing.Namespace, ing.Name), err.Error())
		return
	}
	c.l.ingresses[key(ing.Namespace, ing.Name)] = ing
	c.send(event{key: key(ing.Namespace, ing.Name)})
}

func (c *Controller) ingressDelete(ing *networking.Ingress) {
	if _, err := c.ingressClassOf(ing); err != nil {
		return
	}
	delete(c.l.ingresses, key(ing.Namespace, ing.Name))
	c.send(event{key: key(ing.Namespace, ing.Name)})
}

// onClass keeps this controller's IngressClasses (store.go's IngressClass
// handlers): an add or delete of one is an event; an update is one, and
// reaches the lister, only when spec.parameters changed; another
// controller's class is ignored, in its updates too (so a class whose
// controller changes stays as it was).
func (c *Controller) onClass(old, cur *networking.IngressClass, deleted bool) {
	switch {
	case deleted:
		if old.Spec.Controller != c.cfg.Controller {
			return
		}
		delete(c.classes, old.Name)
		c.send(event{key: old.Name})
	case cur.Spec.Controller != c.cfg.Controller:
	case old == nil || !reflect.DeepEqual(old.Spec.Parameters, cur.Spec.Parameters):
		c.classes[cur.Name] = cur
		c.send(event{key: cur.Name})
	}
}

// onConfigMap: only the controller's ConfigMap matters (TCP and UDP
// services are not modelled); its add or real update is a configuration
// event. A delete has no handler upstream.
func (c *Controller) onConfigMap(old, cur *v1.ConfigMap, deleted bool) {
	if deleted || key(cur.Namespace, cur.Name) != c.cfg.ConfigMap {
		return
	}
	if old != nil && reflect.DeepEqual(old, cur) {
		return
	}
	c.l.configMap = cur
	c.send(event{key: key(cur.Namespace, cur.Name), configuration: true})
}

// onSecret: an event only for a secret an admitted ingress names for TLS
// (store.go's secret handlers). Certificates are not modelled, so such a
// sync finds nothing new.
func (c *Controller) onSecret(old, cur *v1.Secret, deleted bool) {
	s := cur
	if deleted {
		s = old
	} else if old != nil && reflect.DeepEqual(old, cur) {
		return
	}
	for _, ing := range c.l.ingresses {
		if ing.Namespace != s.Namespace {
			continue
		}
		for _, t := range ing.Spec.TLS {
			if t.SecretName == s.Name {
				c.send(event{key: key(s.Namespace, s.Name)})
				return
			}
		}
	}
}

// send is updateCh.In() <- ev: into the ring, and on into the queue at
// once when the main loop reads.
func (c *Controller) send(ev event) {
	if c.readerOn {
		c.enqueue(ev)
		c.wake()
		return
	}
	if lost, ok := c.ring.push(ev); ok {
		c.metrics.RingDropped++
		c.note("ring.drop", lost.key, fmt.Sprintf("size=%d", c.ring.size))
	}
}

func (c *Controller) stampAt(t time.Duration) stamp {
	c.seq++
	return stamp{t: t, seq: c.seq}
}

// enqueue is the main loop's hand-over (nginx.go Start): a configuration
// event is a non-skippable "configmap-change", anything else a skippable
// task stamped now.
func (c *Controller) enqueue(ev event) {
	if ev.configuration {
		c.add(element{key: "configmap-change", ts: c.stampAt(c.w.Now() + nonSkippable)})
		return
	}
	c.add(element{key: ev.key, ts: c.stampAt(c.w.Now())})
}

// add puts an element in the queue; an identical one already waiting
// absorbs it, as in a workqueue. Stamps are unique, so only requeued
// items (timestamp 0) can be identical.
func (c *Controller) add(e element) {
	if e.zero {
		for _, q := range c.queue {
			if q == e {
				return
			}
		}
	}
	c.queue = append(c.queue, e)
}

// wake lets the worker take the next item at this instant, after whatever
// is being delivered now.
func (c *Controller) wake() {
	if c.busy || c.wakeArmed || !c.readerOn || len(c.queue) == 0 || c.stopped {
		return
	}
	c.wakeArmed = true
	c.w.Clock.AfterFunc(0, c.next)
}

// next is the queue worker (internal/task/queue.go worker): take the
// oldest item; stamp now; skip it if a sync that started after it
// succeeded; otherwise sync.
func (c *Controller) next() {
	c.wakeArmed = false
	if c.stopped {
		return
	}
	for len(c.queue) > 0 && !c.busy {
		e := c.queue[0]
		c.queue = c.queue[1:]
		ts := c.stampAt(c.w.Now())
		if !e.zero && c.synced && c.lastSync.after(e.ts) {
			c.metrics.Skipped++
			c.note("skip", e.key, "")
			continue
		}
		c.busy = true
		c.current, c.currentTS = e, ts
		c.accept()
	}
}

// accept is syncIngress's first step: the token bucket.
func (c *Controller) accept() {
	c.slept = 0
	c.limiter.Accept()
	if d := c.slept; d > 0 {
		c.note("sync.wait", c.current.key, d.String())
		c.w.Clock.AfterFunc(d, c.syncIngress)
		return
	}
	c.syncIngress()
}

// syncIngress builds the configuration and compares it with the running
// one (controller.go syncIngress).
func (c *Controller) syncIngress() {
	if c.stopped {
		return
	}
	c.metrics.Syncs++
	c.syncs = append(c.syncs, c.w.Now())
	pcfg, vers := build(&c.l, c.cfg.AnnotationsPrefix, func(k string) int64 {
		if t, ok := c.sliceChanged[k]; ok {
			return int64(t)
		}
		return 0
	})
	c.pcfg, c.pvers, c.pbuilt = pcfg, vers, c.w.Now()
	hash := pcfg.Hash()
	if c.running.Equal(pcfg) {
		c.note("sync.nochange", c.current.key, "")
		if !c.metrics.LastReloadSuccessful && c.metrics.Reloads+c.metrics.ReloadErrors > 0 {
			c.configSuccess(hash, true)
		}
		c.applied()
		return
	}
	if DynamicEnough(pcfg, c.running) {
		c.note("sync.dynamic", c.current.key, "")
		c.afterReload()
		return
	}
	c.note("reload.start", c.current.key, "")
	c.reloads = append(c.reloads, c.w.Now())
	c.w.Clock.AfterFunc(c.cfg.ReloadCost, func() {
		if c.stopped {
			return
		}
		if c.failReloads > 0 {
			c.failReloads--
			c.metrics.ReloadErrors++
			c.configSuccess(hash, false)
			c.note("reload.fail", c.current.key, "")
			c.finish(fmt.Errorf("reload failed"))
			return
		}
		c.metrics.Reloads++
		c.configSuccess(hash, true)
		c.note("reload.ok", c.current.key, fmt.Sprintf("hash=%016x", hash))
		c.live = pcfg
		c.startWorker() // a reload starts new nginx workers
		c.afterReload()
	})
}

// configSuccess is the collector's ConfigSuccess: the hash and the success
// flag (both zeroed by a failure), and the success timestamp.
func (c *Controller) configSuccess(hash uint64, ok bool) {
	c.metrics.LastReloadSuccessful = ok
	if !ok {
		c.metrics.ConfigHash = 0
		return
	}
	c.metrics.ConfigHash = hash
	c.metrics.LastReloadSuccessAt = c.w.Now()
}

// afterReload: on the very first sync, wait 1 s for nginx to listen; then
// the dynamic update.
func (c *Controller) afterReload() {
	if c.running.IsEmpty() {
		c.w.Clock.AfterFunc(firstSyncSleep, func() { c.configureDynamically(0) })
		return
	}
	c.configureDynamically(0)
}

// configureDynamically posts the backends when they changed (nginx.go
// configureDynamically), retried under syncIngress's exponential backoff:
// 1 + retries attempts, 1 s apart growing by 1.3.
func (c *Controller) configureDynamically(attempt int) {
	if c.stopped {
		return
	}
	if BackendsEqual(c.running, c.pcfg) {
		c.applied()
		return
	}
	if c.failPosts > 0 {
		c.failPosts--
		c.metrics.DynamicErrors++
		c.note("dynamic.fail", c.current.key, fmt.Sprintf("attempt=%d", attempt+1))
		if attempt+1 >= 1+c.cfg.DynamicConfigurationRetries {
			c.finish(fmt.Errorf("dynamic configuration failed %d times", attempt+1))
			return
		}
		d := time.Duration(float64(dynamicBackoff) * math.Pow(dynamicFactor, float64(attempt)))
		c.w.Clock.AfterFunc(d, func() { c.configureDynamically(attempt + 1) })
		return
	}
	c.metrics.DynamicUpdates++
	c.dynamic = append(c.dynamic, c.w.Now())
	c.dict = luaDict{set: true, gen: c.dict.gen + 1, backends: c.pcfg.Backends, stamp: c.w.Clock.Now().Unix(), versions: c.pvers, built: c.pbuilt}
	c.note("dynamic.post", c.current.key, fmt.Sprintf("backends=%d", len(c.pcfg.Backends)))
	c.applied()
}

// applied ends a sync that worked: the running configuration is the new
// one. Slice changes the new configuration carries without a post (their
// backends came out the same) are routed as soon as the Lua worker has
// the current post.
func (c *Controller) applied() {
	if c.pcfg != nil {
		c.running = c.pcfg
		if c.dict.versions == nil {
			c.dict.versions = sliceVersions{}
		}
		for k, v := range c.pvers {
			if v > c.dict.versions[k] {
				c.dict.versions[k] = v
			}
		}
		if c.dict.set && c.pbuilt > c.dict.built && reflect.DeepEqual(c.dict.backends, c.pcfg.Backends) {
			c.dict.built = c.pbuilt // the posted backends are still the configuration's
		}
		if c.worker.up && c.dict.set && c.worker.gen == c.dict.gen {
			c.route(c.dict.versions)
		}
	}
	c.finish(nil)
}

// finish is the end of the queue worker's turn: a failure is requeued
// with timestamp 0 after the workqueue's backoff; a success records the
// sync's start as lastSync.
func (c *Controller) finish(err error) {
	e, ts := c.current, c.currentTS
	c.busy = false
	c.pcfg, c.pvers = nil, nil
	if err != nil {
		retry := element{key: e.key, zero: true}
		n := c.failures[e.key]
		c.failures[e.key] = n + 1
		now := c.w.Clock.Now()
		d := max(retryDelay(n), c.retryRate.ReserveN(now, 1).DelayFrom(now))
		c.note("sync.fail", e.key, fmt.Sprintf("%v; requeued in %v", err, d))
		c.w.Clock.AfterFunc(d, func() {
			c.add(retry)
			c.wake()
		})
	} else {
		if e.zero {
			delete(c.failures, e.key)
		}
		c.lastSync, c.synced = ts, true
		c.note("sync.end", e.key, "")
	}
	c.wake()
}

// startWorker starts a Lua worker (at nginx start and at every reload):
// init_worker syncs the backends at once, then every
// BackendsSyncInterval (balancer.lua).
func (c *Controller) startWorker() {
	c.workerGen++
	gen := c.workerGen
	c.worker = luaWorker{up: true}
	c.syncBackends()
	var tick func()
	tick = func() {
		if c.stopped || gen != c.workerGen {
			return
		}
		c.syncBackends()
		c.w.Clock.AfterFunc(c.cfg.BackendsSyncInterval, tick)
	}
	c.w.Clock.AfterFunc(c.cfg.BackendsSyncInterval, tick)
}

// syncBackends is balancer.lua sync_backends: take the posted backends
// only when their stamp (whole seconds) is newer than the last taken.
func (c *Controller) syncBackends() {
	if !c.dict.set || c.dict.stamp <= c.worker.synced {
		return
	}
	c.worker.synced, c.worker.gen = c.dict.stamp, c.dict.gen
	c.worker.backends = map[string]Backend{}
	for _, b := range c.dict.backends {
		c.worker.backends[b.Name] = b
	}
	c.note("lua.sync", "", fmt.Sprintf("backends=%d", len(c.dict.backends)))
	c.route(c.dict.versions)
}

// route records a latency sample for every change of a slice, up to the
// version the worker now routes by, not yet routed, and the addresses the
// worker routes to.
func (c *Controller) route(vers sliceVersions) {
	now := c.w.Now()
	c.takes = append(c.takes, take{at: now, built: c.dict.built, addrs: c.workerAddrs()})
	for _, k := range slices.Sorted(maps.Keys(vers)) {
		v := time.Duration(vers[k])
		pending := c.unrouted[k]
		n := 0
		for n < len(pending) && pending[n] <= v {
			c.samples = append(c.samples, Sample{Slice: k, Changed: pending[n], Routed: now})
			c.note("routed", k, fmt.Sprintf("change at %v, latency %v", pending[n], now-pending[n]))
			n++
		}
		if n == len(pending) {
			delete(c.unrouted, k)
		} else {
			c.unrouted[k] = pending[n:]
		}
	}
}

// workerAddrs lists the addresses of every endpoint the Lua worker holds,
// sorted, each once.
func (c *Controller) workerAddrs() []string {
	var out []string
	for _, b := range c.worker.backends {
		for _, ep := range b.Endpoints {
			if h, _, err := net.SplitHostPort(ep); err == nil {
				out = append(out, h)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// PodLatency is the time from a pod's latest Ready transition
// ("namespace/name", as the world saw it) to the first moment the Lua
// worker routed to its address by a configuration built after it: false
// if the pod is not Ready or the ingress does not route to it yet. With
// the EndpointSlice controller in the world this covers the controller,
// the sync loop and the balancer's pick-up.
func (c *Controller) PodLatency(pod string) (time.Duration, bool) {
	since, ip, ok := c.w.PodReadySince(pod)
	if !ok || ip == "" {
		return 0, false
	}
	for _, t := range c.takes {
		if t.built < since {
			continue
		}
		if _, found := slices.BinarySearch(t.addrs, ip); found {
			return t.at - since, true
		}
	}
	return 0, false
}

// FailReloads makes the next n reloads fail.
func (c *Controller) FailReloads(n int) { c.failReloads += n }

// FailPosts makes the next n backend posts fail.
func (c *Controller) FailPosts(n int) { c.failPosts += n }

// Metrics returns the metrics now.
func (c *Controller) Metrics() Metrics { return c.metrics }

// Reloads lists when each reload started (failed ones included).
func (c *Controller) Reloads() []time.Duration { return slices.Clone(c.reloads) }

// DynamicUpdates lists when each backend post succeeded.
func (c *Controller) DynamicUpdates() []time.Duration { return slices.Clone(c.dynamic) }

// Syncs lists when each sync passed the rate limiter.
func (c *Controller) Syncs() []time.Duration { return slices.Clone(c.syncs) }

// Running is the configuration last applied in full.
func (c *Controller) Running() *Configuration { return c.running }

// Samples lists every latency measured, in the order they were routed.
func (c *Controller) Samples() []Sample { return slices.Clone(c.samples) }

// Latency is the latency of a slice's latest change ("namespace/name"):
// false if the ingress does not route by it yet.
func (c *Controller) Latency(slice string) (time.Duration, bool) {
	changed, ok := c.sliceChanged[slice]
	if !ok {
		return 0, false
	}
	for i := len(c.samples) - 1; i >= 0; i-- {
		if s := c.samples[i]; s.Slice == slice && s.Changed == changed {
			return s.Latency(), true
		}
	}
	return 0, false
}

// Routes returns the endpoints the Lua worker sends host and path to, and
// whether nginx serves that host and path at all (a location exists in
// the configuration of its last reload). A location whose backend the
// worker has not taken yet routes nowhere (nginx answers 503).
func (c *Controller) Routes(host, path string) ([]string, bool) {
	if c.live == nil {
		return nil, false
	}
	name, ok := c.live.Route(host, path)
	if !ok {
		return nil, false
	}
	return slices.Clone(c.worker.backends[name].Endpoints), true
}

// QueueLen is how many items wait in the task queue.
func (c *Controller) QueueLen() int { return len(c.queue) }

var (
	_ sim.Consumer  = (*Controller)(nil)
	_ sim.Lifecycle = (*Controller)(nil)
)
