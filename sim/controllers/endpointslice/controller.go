// Package endpointslice is Kubernetes' EndpointSlice controller in a
// proxysim world: it watches Services, Pods, Nodes and EndpointSlices and
// writes the slices kube-proxy reads, in virtual time.
//
// It reproduces kube-controller-manager's controller as of v1.36
// (pkg/controller/endpointslice, with k8s.io/endpointslice's reconciler;
// FACTS §1): which pods become endpoints and with which conditions, the
// Service queue with its rate limiter (per key 1 s doubling to 1000 s, the
// larger of that and a 10 qps / burst 100 bucket; 15 retries), pod changes
// batched by AddAfter(batchPeriod), slice changes by max(1 s, batchPeriod),
// the reconciler's packing, the trigger-time annotation from which
// kube-proxy computes network_programming_duration_seconds, and topology
// hints: spec.trafficDistribution (PreferClose, PreferSameZone,
// PreferSameNode) and the topology-mode: Auto annotation, whose allotment
// follows the ready nodes' CPU per zone through the topology queue that
// node events feed (hints.go, topology.go).
//
// Determinism: every handler runs on the world's goroutine; the queues
// (package queue) process keys from virtual timers, never goroutines; the
// reconciler walks address types, port groups, slices, pods and zones in
// sorted order where upstream ranges over maps (which is why its slice
// layout and its Auto hints vary from run to run and these do not). A
// sync's writes reach the API server and every informer before the next
// key is processed, so the controller's cache is never stale and
// upstream's stale-cache check (EndpointSliceTracker.StaleSlices) never
// fires here.
//
// What it leaves out: metrics, events, and the pod queue's worker hop (pod
// events AddAfter their Services at once: with syncs taking no virtual
// time, the same instant). The world has no garbage collector, so when a
// Service is gone this package deletes the slices it owned, as the
// garbage collector would, writing as "garbage-collector".
package endpointslice

import (
	"fmt"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/proxysim/proxysim/sim"
	"github.com/proxysim/proxysim/sim/controllers/podindex"
	"github.com/proxysim/proxysim/sim/controllers/queue"
	"github.com/proxysim/proxysim/sim/trace"
)

// Name is the controller's name in the trace (as its writer).
const Name = "endpointslice-controller"

// Upstream constants (pkg/controller/endpointslice/endpointslice_controller.go).
const (
	MaxRetries           = 15
	SyncBackoff          = time.Second
	MaxSyncBackoff       = 1000 * time.Second
	SliceChangeMinDelay  = time.Second // endpointSliceChangeMinSyncDelay
	DefaultWorkers       = 5
	garbageCollectorName = "garbage-collector"
)

// Config are the controller's flags.
type Config struct {
	// BatchPeriod is --endpointslice-updates-batch-period (default 0).
	BatchPeriod time.Duration
	// MaxEndpointsPerSlice is --max-endpoints-per-slice (default 100).
	MaxEndpointsPerSlice int
	// Workers is --concurrent-service-endpoint-syncs (default 5); see
	// package queue for why it does not change the outcome.
	Workers int
}

// Controller is the EndpointSlice controller as a world consumer.
type Controller struct {
	w    *sim.World
	cfg  Config
	q    *queue.Queue
	topo *queue.Queue // upstream's topologyQueue: one key, node changes
	rec  *Reconciler
	tt   *TriggerTimes

	idx      *podindex.Index                                // Services and Pods
	nodes    map[string]*v1.Node                            // by name
	slices   map[string]map[string]*discovery.EndpointSlice // by Service ns/name, then slice name
	written  map[string]*discovery.EndpointSlice            // what it last wrote, by ns/name
	deleting map[string]bool                                // deletions it made and has not yet seen
	syncs    int
	// During a sync, its own writes come back at once (the world delivers
	// them before the write returns); upstream records the API's reply in
	// its tracker before its informer sees the event. So slice handlers
	// update the cache at once but decide on requeues after the sync.
	syncing  bool
	deferred []func()
}

var _ sim.Consumer = (*Controller)(nil)
var _ sim.Lifecycle = (*Controller)(nil)

// New builds the controller for w; subscribe it with w.Subscribe.
func New(w *sim.World, cfg Config) *Controller {
	if cfg.MaxEndpointsPerSlice <= 0 {
		cfg.MaxEndpointsPerSlice = DefaultMaxEndpointsPerSlice
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	c := &Controller{
		w: w, cfg: cfg, tt: NewTriggerTimes(),
		idx:      podindex.New(),
		nodes:    map[string]*v1.Node{},
		slices:   map[string]map[string]*discovery.EndpointSlice{},
		written:  map[string]*discovery.EndpointSlice{},
		deleting: map[string]bool{},
	}
	c.q = queue.New(queue.Config{
		Clock:       w.Clock,
		RateLimiter: queue.ControllerRateLimiter(w.Clock, SyncBackoff, MaxSyncBackoff),
		MaxRetries:  MaxRetries,
		Workers:     cfg.Workers,
		Sync:        c.syncService,
		Dropped: func(key string, err error) {
			w.Trace.Add(trace.Event{Kind: trace.Note, Object: "Service " + key, Detail: Name + ": dropped after retries", Err: err.Error()})
		},
	})
	// Upstream's topology worker refreshes the cache from every node and
	// queues the Services whose hints now overload a zone
	// (checkNodeTopologyDistribution). Its sync never fails.
	c.topo = queue.New(queue.Config{Clock: w.Clock, MaxRetries: MaxRetries, Workers: 1, Sync: func(string) error {
		c.refreshTopology()
		return nil
	}})
	c.rec = &Reconciler{
		Topology:                      NewTopologyCache(),
		PreferSameTrafficDistribution: true, // GA, locked on in v1.36
		MaxEndpointsPerSlice:          cfg.MaxEndpointsPerSlice,
		Node: func(name string) (*v1.Node, bool) {
			n, ok := c.nodes[name]
			return n, ok
		},
		Writer: worldWriter{w},
		Wrote:  c.wrote,
	}
	return c
}

func (c *Controller) Name() string { return Name }
func (c *Controller) Kinds() []string {
	return []string{"Service", "EndpointSlice", "Pod", "Node"}
}
func (c *Controller) Start() error          { return nil }
func (c *Controller) Stop()                 { c.q.Stop(); c.topo.Stop() }
func (c *Controller) OnSynced(string) error { return nil }

// Syncs counts the Service syncs it ran.
func (c *Controller) Syncs() int { return c.syncs }

func (c *Controller) OnAdd(kind string, obj runtime.Object) error {
	switch o := obj.(type) {
	case *v1.Service:
		c.q.Add(c.idx.SetService(o))
	case *v1.Pod:
		c.idx.SetPod(o)
		c.queuePodServices(c.idx.ServicesFor(o.Namespace, o.Labels))
	case *v1.Node:
		c.nodes[o.Name] = o
		c.topo.Add(topologyKey)
	case *discovery.EndpointSlice:
		c.putSlice(o)
		c.later(func() {
			if managed(o) && c.shouldSync(o) {
				c.queueForSlice(o)
			}
		})
	}
	return nil
}

// later runs f now, or after the current sync.
func (c *Controller) later(f func()) {
	if c.syncing {
		c.deferred = append(c.deferred, f)
		return
	}
	f()
}

func (c *Controller) OnUpdate(kind string, old, obj runtime.Object) error {
	switch o := obj.(type) {
	case *v1.Service:
		c.q.Add(c.idx.SetService(o))
	case *v1.Pod:
		c.idx.SetPod(o)
		c.queuePodServices(c.idx.ServicesToSync(old.(*v1.Pod), o))
	case *v1.Node:
		c.nodes[o.Name] = o
		// A change of allocatable CPU alone waits for the next node event
		// (upstream updateNode).
		if prev := old.(*v1.Node); nodeReady(prev) != nodeReady(o) || prev.Labels[v1.LabelTopologyZone] != o.Labels[v1.LabelTopologyZone] {
			c.topo.Add(topologyKey)
		}
	case *discovery.EndpointSlice:
		prev := old.(*discovery.EndpointSlice)
		c.dropSlice(prev)
		c.putSlice(o)
		c.later(func() {
			switch {
			case prev.Labels[discovery.LabelServiceName] != o.Labels[discovery.LabelServiceName]:
				c.queueForSlice(prev)
				c.queueForSlice(o)
			case managed(prev) != managed(o), managed(o) && c.shouldSync(o):
				c.queueForSlice(o)
			}
		})
	}
	return nil
}

func (c *Controller) OnDelete(kind string, obj runtime.Object) error {
	switch o := obj.(type) {
	case *v1.Service:
		c.q.Add(c.idx.DeleteService(o))
	case *v1.Pod:
		c.idx.DeletePod(o)
		c.queuePodServices(c.idx.ServicesFor(o.Namespace, o.Labels))
	case *v1.Node:
		delete(c.nodes, o.Name)
		c.topo.Add(topologyKey)
	case *discovery.EndpointSlice:
		c.dropSlice(o)
		c.later(func() {
			k := key(o.Namespace, o.Name)
			_, tracked := c.written[k]
			delete(c.written, k)
			if c.deleting[k] {
				delete(c.deleting, k)
			} else if managed(o) && tracked {
				c.queueForSlice(o)
			}
		})
	}
	return nil
}

const topologyKey = "topology"

// refreshTopology gives the topology cache every node and queues the
// Services some zone of which is now overloaded. Upstream leaves a deleted
// Service's counts in the cache, so it may be queued too, to no effect.
func (c *Controller) refreshTopology() {
	names := sortedKeys(c.nodes)
	nodes := make([]*v1.Node, len(names))
	for i, n := range names {
		nodes[i] = c.nodes[n]
	}
	c.rec.Topology.SetNodes(nodes)
	for _, k := range c.rec.Topology.Overloaded() {
		c.q.Add(k)
	}
}

// Topology is the controller's topology cache (read-only for callers).
func (c *Controller) Topology() *TopologyCache { return c.rec.Topology }

// queuePodServices queues the Services a pod change touches after the
// batch period (--endpointslice-updates-batch-period).
func (c *Controller) queuePodServices(keys []string) {
	for _, k := range keys {
		c.q.AddAfter(k, c.cfg.BatchPeriod)
	}
}

// queueForSlice requeues a slice's Service after max(1 s, batch period)
// (upstream queueServiceForEndpointSlice).
func (c *Controller) queueForSlice(s *discovery.EndpointSlice) {
	svc := s.Labels[discovery.LabelServiceName]
	if svc == "" {
		return
	}
	d := SliceChangeMinDelay
	if c.cfg.BatchPeriod > d {
		d = c.cfg.BatchPeriod
	}
	c.q.AddAfter(key(s.Namespace, svc), d)
}

// shouldSync is upstream's EndpointSliceTracker.ShouldSync: a slice it did
// not write, or one changed since in what bumps an API generation
// (anything but metadata, and labels).
func (c *Controller) shouldSync(s *discovery.EndpointSlice) bool {
	w, ok := c.written[key(s.Namespace, s.Name)]
	if !ok {
		return true
	}
	eq := apiequality.Semantic.DeepEqual
	return !eq(w.Endpoints, s.Endpoints) || !eq(w.Ports, s.Ports) || w.AddressType != s.AddressType || !eq(w.Labels, s.Labels)
}

func (c *Controller) wrote(op string, s *discovery.EndpointSlice) {
	k := key(s.Namespace, s.Name)
	switch op {
	case "delete":
		delete(c.written, k)
		c.deleting[k] = true
	default:
		c.written[k] = s
	}
}

func managed(s *discovery.EndpointSlice) bool {
	return s.Labels[discovery.LabelManagedBy] == ControllerName
}

func key(ns, name string) string { return ns + "/" + name }

func (c *Controller) putSlice(s *discovery.EndpointSlice) {
	svc := s.Labels[discovery.LabelServiceName]
	if svc == "" {
		return
	}
	k := key(s.Namespace, svc)
	m := c.slices[k]
	if m == nil {
		m = map[string]*discovery.EndpointSlice{}
		c.slices[k] = m
	}
	m[s.Name] = s
}

func (c *Controller) dropSlice(s *discovery.EndpointSlice) {
	svc := s.Labels[discovery.LabelServiceName]
	if m := c.slices[key(s.Namespace, svc)]; m != nil {
		delete(m, s.Name)
		if len(m) == 0 {
			delete(c.slices, key(s.Namespace, svc))
		}
	}
}

// syncService is upstream's syncService for one key.
func (c *Controller) syncService(k string) error {
	c.syncs++
	c.syncing = true
	defer func() {
		c.syncing = false
		d := c.deferred
		c.deferred = nil
		for _, f := range d {
			f()
		}
	}()
	ns, name, _ := cache.SplitMetaNamespaceKey(k)
	svc, ok := c.idx.Service(k)
	if !ok {
		c.tt.Forget(k)
		return c.collectGarbage(ns, name)
	}
	c.w.Trace.Add(trace.Event{Kind: trace.Note, Object: "Service " + k, Detail: Name + ": sync"})
	if svc.Spec.Type == v1.ServiceTypeExternalName || svc.Spec.Selector == nil {
		return nil
	}
	pods := c.idx.SelectedPods(svc)
	var existing []*discovery.EndpointSlice
	for _, s := range c.slices[k] {
		if managed(s) && s.DeletionTimestamp == nil {
			existing = append(existing, s)
		}
	}
	trigger := c.tt.Compute(k, svc, pods)
	err := c.w.As(Name, func() error { return c.rec.Reconcile(svc, pods, existing, trigger) })
	if err != nil {
		c.w.Trace.Add(trace.Event{Kind: trace.Note, Object: "Service " + k, Detail: Name + ": sync failed, retry with backoff", Err: err.Error()})
	}
	return err
}

// collectGarbage deletes the slices a gone Service owned, as the garbage
// collector would after the Service's deletion.
func (c *Controller) collectGarbage(ns, name string) error {
	var gone []string
	for n, s := range c.slices[key(ns, name)] {
		if s.Labels[discovery.LabelManagedBy] == ControllerName {
			gone = append(gone, n)
		}
	}
	sort.Strings(gone)
	var errs []string
	c.w.As(garbageCollectorName, func() error {
		for _, n := range gone {
			if err := c.w.Delete("EndpointSlice", ns, n); err != nil {
				errs = append(errs, err.Error())
			}
		}
		return nil
	})
	if len(errs) > 0 {
		return fmt.Errorf("garbage collection: %s", strings.Join(errs, "; "))
	}
	return nil
}

// worldWriter writes slices through the world, as the controller's
// clientset writes to the API server.
type worldWriter struct{ w *sim.World }

func (ww worldWriter) Create(s *discovery.EndpointSlice) (string, error) { return ww.w.CreateNamed(s) }
func (ww worldWriter) Update(s *discovery.EndpointSlice) error           { return ww.w.Update(s) }
func (ww worldWriter) Delete(ns, name string) error                      { return ww.w.Delete("EndpointSlice", ns, name) }

// Slices lists the controller's cached slices of a Service ("ns/name"),
// by name.
func (c *Controller) Slices(service string) []*discovery.EndpointSlice {
	var out []*discovery.EndpointSlice
	for _, s := range c.slices[service] {
		out = append(out, s)
	}
	return sortedByName(out)
}
