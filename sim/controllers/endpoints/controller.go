// Package endpoints is Kubernetes' legacy Endpoints controller in a
// proxysim world, for proxies that still read v1 Endpoints (FACTS §1.13;
// kubernetes pkg/controller/endpoint/endpoints_controller.go, v1.36). It
// runs on the same queue machinery as the EndpointSlice controller (package
// queue): client-go's queue and per-key backoff (5ms doubling to 1000s, with
// the 10 qps / burst 100 bucket, 15 retries), pod changes AddAfter(batch
// period), everything on the world's clock.
//
// Per Service with a selector: every selected pod that is not terminal, has
// an IP and, unless the Service publishes not-ready addresses, is not being
// deleted, gives one address of the Service's primary family (nodeName,
// targetRef, hostname when its subdomain names the Service); ready pods, or
// all under publishNotReadyAddresses, go to addresses, the rest to
// notReadyAddresses; a pod whose target port does not resolve is left out
// of that port. Subsets are canonicalised as upstream's RepackSubsets does
// (addresses grouped by identical port sets, sorted by IP then UID; here
// ports and subsets in name/number order where upstream orders by hash).
// More than 1000 addresses are truncated, ready ones first, and annotated
// over-capacity. An Endpoints whose Service is gone is deleted; at start
// every existing Endpoints is queued once (orphans are deleted), except
// those carrying the leader-election annotation. The trigger-time
// annotation is written as for slices; kube-proxy does not read it.
//
// Left out: the stale-cache check (its own writes reach its cache before the
// next sync, see package queue), metrics and events.
package endpoints

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	netutils "k8s.io/utils/net"

	"github.com/proxysim/proxysim/sim"
	"github.com/proxysim/proxysim/sim/controllers/endpointslice"
	"github.com/proxysim/proxysim/sim/controllers/podindex"
	"github.com/proxysim/proxysim/sim/controllers/queue"
	"github.com/proxysim/proxysim/sim/trace"
)

// Name is the controller's name in the trace.
const Name = "endpoint-controller"

// Upstream constants.
const (
	MaxRetries = 15
	// MaxCapacity is the most addresses an Endpoints object carries.
	MaxCapacity = 1000
	// LabelManagedBy and ManagedBy mark the Endpoints it manages.
	LabelManagedBy = "endpoints.kubernetes.io/managed-by"
	ManagedBy      = "endpoint-controller"
	// LeaderAnnotation marks an Endpoints used as a leader-election lock
	// (client-go resourcelock.LeaderElectionRecordAnnotationKey).
	LeaderAnnotation = "control-plane.alpha.kubernetes.io/leader"
	truncated        = "truncated"
)

// Config are the controller's flags.
type Config struct {
	// BatchPeriod is --endpoint-updates-batch-period (default 0).
	BatchPeriod time.Duration
	// Workers is --concurrent-endpoint-syncs (default 5); see package queue.
	Workers int
}

// Controller is the Endpoints controller as a world consumer.
type Controller struct {
	w         *sim.World
	cfg       Config
	q         *queue.Queue
	tt        *endpointslice.TriggerTimes
	idx       *podindex.Index
	endpoints map[string]*v1.Endpoints
}

var _ sim.Consumer = (*Controller)(nil)

// New builds the controller for w; subscribe it with w.Subscribe.
func New(w *sim.World, cfg Config) *Controller {
	if cfg.Workers <= 0 {
		cfg.Workers = 5
	}
	c := &Controller{w: w, cfg: cfg, tt: endpointslice.NewTriggerTimes(),
		idx: podindex.New(), endpoints: map[string]*v1.Endpoints{}}
	c.q = queue.New(queue.Config{
		Clock:       w.Clock,
		RateLimiter: queue.ControllerRateLimiter(w.Clock, 5*time.Millisecond, 1000*time.Second),
		MaxRetries:  MaxRetries,
		Workers:     cfg.Workers,
		Sync:        c.syncService,
		Dropped: func(key string, err error) {
			w.Trace.Add(trace.Event{Kind: trace.Note, Object: "Service " + key, Detail: Name + ": dropped after retries", Err: err.Error()})
		},
	})
	return c
}

func (c *Controller) Name() string    { return Name }
func (c *Controller) Kinds() []string { return []string{"Service", "Pod", "Endpoints"} }
func (c *Controller) Start() error    { return nil }
func (c *Controller) Stop()           { c.q.Stop() }

func key(ns, name string) string { return ns + "/" + name }

// OnSynced: once the Endpoints informer has listed, queue every existing
// Endpoints (upstream checkLeftoverEndpoints), so orphans are deleted.
func (c *Controller) OnSynced(kind string) error {
	if kind != "Endpoints" {
		return nil
	}
	var keys []string
	for k, e := range c.endpoints {
		if _, ok := e.Annotations[LeaderAnnotation]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		c.q.Add(k)
	}
	return nil
}

func (c *Controller) OnAdd(kind string, obj runtime.Object) error {
	switch o := obj.(type) {
	case *v1.Service:
		c.q.Add(c.idx.SetService(o))
	case *v1.Pod:
		c.idx.SetPod(o)
		c.queue(c.idx.ServicesFor(o.Namespace, o.Labels))
	case *v1.Endpoints:
		c.endpoints[key(o.Namespace, o.Name)] = o
	}
	return nil
}

func (c *Controller) OnUpdate(kind string, old, obj runtime.Object) error {
	switch o := obj.(type) {
	case *v1.Service:
		c.q.Add(c.idx.SetService(o))
	case *v1.Pod:
		c.idx.SetPod(o)
		c.queue(c.idx.ServicesToSync(old.(*v1.Pod), o))
	case *v1.Endpoints:
		c.endpoints[key(o.Namespace, o.Name)] = o
	}
	return nil
}

func (c *Controller) OnDelete(kind string, obj runtime.Object) error {
	switch o := obj.(type) {
	case *v1.Service:
		c.q.Add(c.idx.DeleteService(o))
	case *v1.Pod:
		c.idx.DeletePod(o)
		c.queue(c.idx.ServicesFor(o.Namespace, o.Labels))
	case *v1.Endpoints:
		delete(c.endpoints, key(o.Namespace, o.Name))
		c.q.Add(key(o.Namespace, o.Name))
	}
	return nil
}

// queue queues the Services a pod change touches after the batch period
// (--endpoint-updates-batch-period).
func (c *Controller) queue(keys []string) {
	for _, k := range keys {
		c.q.AddAfter(k, c.cfg.BatchPeriod)
	}
}

func (c *Controller) syncService(k string) error {
	ns, name, _ := cache.SplitMetaNamespaceKey(k)
	svc, ok := c.idx.Service(k)
	if !ok {
		c.tt.Forget(k)
		if _, exists := c.endpoints[k]; !exists {
			return nil
		}
		err := c.w.As(Name, func() error { return c.w.Delete("Endpoints", ns, name) })
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	if svc.Spec.Type == v1.ServiceTypeExternalName || svc.Spec.Selector == nil {
		return nil
	}
	c.w.Trace.Add(trace.Event{Kind: trace.Note, Object: "Service " + k, Detail: Name + ": sync"})
	pods := c.idx.SelectedPods(svc)
	trigger := c.tt.Compute(k, svc, pods)
	subsets := Subsets(svc, pods)

	cur, exists := c.endpoints[k]
	if exists && equalSubsets(cur.Subsets, subsets) && labelsCorrect(cur.Labels, svc.Labels) && capacityCorrect(cur.Annotations, cur.Subsets) {
		return nil
	}
	var ep *v1.Endpoints
	if exists {
		ep = cur.DeepCopy()
	} else {
		ep = &v1.Endpoints{}
		ep.Namespace, ep.Name = ns, name
	}
	ep.Subsets = subsets
	ep.Labels = map[string]string{}
	for lk, lv := range svc.Labels {
		ep.Labels[lk] = lv
	}
	if ep.Annotations == nil {
		ep.Annotations = map[string]string{}
	}
	if trigger.IsZero() {
		delete(ep.Annotations, v1.EndpointsLastChangeTriggerTime)
	} else {
		ep.Annotations[v1.EndpointsLastChangeTriggerTime] = trigger.UTC().Format(time.RFC3339Nano)
	}
	if truncate(ep) {
		ep.Annotations[v1.EndpointsOverCapacity] = truncated
	} else {
		delete(ep.Annotations, v1.EndpointsOverCapacity)
	}
	if svc.Spec.ClusterIP == v1.ClusterIPNone || svc.Spec.ClusterIP == "" {
		ep.Labels[v1.IsHeadlessService] = ""
	} else {
		delete(ep.Labels, v1.IsHeadlessService)
	}
	ep.Labels[LabelManagedBy] = ManagedBy
	return c.w.As(Name, func() error {
		if exists {
			return c.w.Update(ep)
		}
		return c.w.Create(ep)
	})
}

// Subsets computes a Service's subsets from its selected pods, repacked.
func Subsets(svc *v1.Service, pods []*v1.Pod) []v1.EndpointSubset {
	var raw []v1.EndpointSubset
	for _, p := range pods {
		if !endpointslice.IncludePod(p, svc.Spec.PublishNotReadyAddresses) {
			continue
		}
		addr, ok := address(svc, p)
		if !ok {
			continue
		}
		ready := svc.Spec.PublishNotReadyAddresses || podindex.Ready(p)
		add := func(ports []v1.EndpointPort) {
			s := v1.EndpointSubset{Ports: ports}
			if ready {
				s.Addresses = []v1.EndpointAddress{addr}
			} else {
				s.NotReadyAddresses = []v1.EndpointAddress{addr}
			}
			raw = append(raw, s)
		}
		if len(svc.Spec.Ports) == 0 {
			if svc.Spec.ClusterIP == v1.ClusterIPNone {
				add(nil)
			}
			continue
		}
		for i := range svc.Spec.Ports {
			sp := &svc.Spec.Ports[i]
			n, ok := endpointslice.FindPort(p, sp)
			if !ok {
				continue
			}
			add([]v1.EndpointPort{{Name: sp.Name, Port: n, Protocol: sp.Protocol, AppProtocol: sp.AppProtocol}})
		}
	}
	return repack(raw)
}

// address is the pod's address of the Service's primary family (upstream
// podToEndpointAddressForService).
func address(svc *v1.Service, p *v1.Pod) (v1.EndpointAddress, bool) {
	v6 := false
	switch {
	case len(svc.Spec.IPFamilies) > 0:
		v6 = svc.Spec.IPFamilies[0] == v1.IPv6Protocol
	case svc.Spec.ClusterIP != "" && svc.Spec.ClusterIP != v1.ClusterIPNone:
		v6 = netutils.IsIPv6String(svc.Spec.ClusterIP)
	default:
		v6 = netutils.IsIPv6String(p.Status.PodIP)
	}
	for _, pip := range p.Status.PodIPs {
		ip := netutils.ParseIPSloppy(pip.IP)
		if ip != nil && netutils.IsIPv6(ip) == v6 {
			node := p.Spec.NodeName
			a := v1.EndpointAddress{IP: ip.String(), NodeName: &node,
				TargetRef: &v1.ObjectReference{Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.UID}}
			if endpointslice.SetsHostname(p, svc) {
				a.Hostname = p.Spec.Hostname
			}
			return a, true
		}
	}
	return v1.EndpointAddress{}, false
}

// repack canonicalises subsets as upstream's RepackSubsets does: per port,
// the addresses (ready wins over not ready); ports with the same addresses
// share a subset; addresses sorted by IP, then UID.
func repack(raw []v1.EndpointSubset) []v1.EndpointSubset {
	type portAddrs struct {
		port     *v1.EndpointPort
		ready    map[string]v1.EndpointAddress
		notReady map[string]v1.EndpointAddress
	}
	byPort := map[string]*portAddrs{}
	var portOrder []string
	addrKey := func(a v1.EndpointAddress) string {
		uid := ""
		if a.TargetRef != nil {
			uid = string(a.TargetRef.UID)
		}
		return a.IP + "|" + uid
	}
	for _, s := range raw {
		ports := s.Ports
		if len(ports) == 0 {
			ports = []v1.EndpointPort{{Port: -1}}
		}
		for i := range ports {
			p := ports[i]
			k := portString(p)
			pa := byPort[k]
			if pa == nil {
				pa = &portAddrs{port: &p, ready: map[string]v1.EndpointAddress{}, notReady: map[string]v1.EndpointAddress{}}
				byPort[k] = pa
				portOrder = append(portOrder, k)
			}
			for _, a := range s.Addresses {
				pa.ready[addrKey(a)] = a
				delete(pa.notReady, addrKey(a))
			}
			for _, a := range s.NotReadyAddresses {
				if _, ok := pa.ready[addrKey(a)]; !ok {
					pa.notReady[addrKey(a)] = a
				}
			}
		}
	}
	sort.Strings(portOrder)
	type group struct {
		ports           []v1.EndpointPort
		ready, notReady []v1.EndpointAddress
	}
	groups := map[string]*group{}
	var groupOrder []string
	sorted := func(m map[string]v1.EndpointAddress) ([]v1.EndpointAddress, string) {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { return lessAddr(m[keys[i]], m[keys[j]]) })
		out := make([]v1.EndpointAddress, len(keys))
		for i, k := range keys {
			out[i] = m[k]
		}
		return out, strings.Join(keys, ",")
	}
	for _, pk := range portOrder {
		pa := byPort[pk]
		r, rk := sorted(pa.ready)
		n, nk := sorted(pa.notReady)
		gk := rk + ";" + nk
		g := groups[gk]
		if g == nil {
			g = &group{ready: r, notReady: n}
			groups[gk] = g
			groupOrder = append(groupOrder, gk)
		}
		if pa.port.Port != -1 {
			g.ports = append(g.ports, *pa.port)
		}
	}
	out := []v1.EndpointSubset{}
	for _, gk := range groupOrder {
		g := groups[gk]
		s := v1.EndpointSubset{Ports: g.ports}
		if len(g.ready) > 0 {
			s.Addresses = g.ready
		}
		if len(g.notReady) > 0 {
			s.NotReadyAddresses = g.notReady
		}
		out = append(out, s)
	}
	return out
}

func portString(p v1.EndpointPort) string {
	app := ""
	if p.AppProtocol != nil {
		app = *p.AppProtocol
	}
	return fmt.Sprintf("%s/%s/%010d/%s", p.Name, p.Protocol, p.Port+1, app)
}

// lessAddr orders addresses by IP string bytes, then target UID (upstream
// addrsByIPAndUID).
func lessAddr(a, b v1.EndpointAddress) bool {
	if a.IP != b.IP {
		return a.IP < b.IP
	}
	ua, ub := "", ""
	if a.TargetRef != nil {
		ua = string(a.TargetRef.UID)
	}
	if b.TargetRef != nil {
		ub = string(b.TargetRef.UID)
	}
	return ua < ub
}

// equalSubsets compares subsets ignoring target references'
// resourceVersions, as upstream's no-op check does; the current ones are
// repacked too.
func equalSubsets(cur, want []v1.EndpointSubset) bool {
	strip := func(ss []v1.EndpointSubset) []v1.EndpointSubset {
		out := make([]v1.EndpointSubset, len(ss))
		for i := range ss {
			out[i] = *ss[i].DeepCopy()
			for _, l := range [][]v1.EndpointAddress{out[i].Addresses, out[i].NotReadyAddresses} {
				for j := range l {
					if l[j].TargetRef != nil {
						l[j].TargetRef.ResourceVersion = ""
					}
				}
			}
		}
		return out
	}
	w := strip(want)
	return reflect.DeepEqual(strip(cur), w) || reflect.DeepEqual(strip(repack(cur)), w)
}

// labelsCorrect is upstream's labelsCorrectForEndpoints.
func labelsCorrect(ep, svc map[string]string) bool {
	if ep[LabelManagedBy] != ManagedBy {
		return false
	}
	skipped := 0
	for k, v := range ep {
		if k == v1.IsHeadlessService || k == LabelManagedBy {
			skipped++
		} else if sv, ok := svc[k]; !ok || sv != v {
			return false
		}
	}
	return len(svc) == len(ep)-skipped
}

func capacityCorrect(ann map[string]string, subsets []v1.EndpointSubset) bool {
	n := 0
	for _, s := range subsets {
		n += len(s.Addresses) + len(s.NotReadyAddresses)
	}
	if n > MaxCapacity {
		return false
	}
	_, ok := ann[v1.EndpointsOverCapacity]
	return !ok
}

// truncate keeps MaxCapacity addresses, ready ones first, each subset its
// share rounded up (upstream truncateEndpoints).
func truncate(ep *v1.Endpoints) bool {
	ready, notReady := 0, 0
	for _, s := range ep.Subsets {
		ready += len(s.Addresses)
		notReady += len(s.NotReadyAddresses)
	}
	if ready+notReady <= MaxCapacity {
		return false
	}
	truncReady := ready > MaxCapacity
	max, total := MaxCapacity-ready, notReady
	if truncReady {
		max, total = MaxCapacity, ready
	}
	left := max
	for i := range ep.Subsets {
		s := &ep.Subsets[i]
		n := len(s.NotReadyAddresses)
		if truncReady {
			n = len(s.Addresses)
		}
		take := int(math.Ceil(float64(n) / float64(total) * float64(max)))
		if take > left {
			take = left
		}
		if truncReady {
			if take < len(s.Addresses) {
				s.Addresses = s.Addresses[:take]
			}
			s.NotReadyAddresses = []v1.EndpointAddress{}
			left -= len(s.Addresses)
		} else {
			if take < len(s.NotReadyAddresses) {
				s.NotReadyAddresses = s.NotReadyAddresses[:take]
			}
			left -= len(s.NotReadyAddresses)
		}
	}
	return true
}
