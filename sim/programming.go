package sim

import (
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Network programming latency, two ways.
//
// ProgrammingSamples are kube-proxy's network_programming_duration_seconds
// observations, computed as kube-proxy computes them (FACTS §2.3; kubernetes
// pkg/proxy/endpointschangetracker.go EndpointSliceUpdate and
// checkoutTriggerTimes, and each proxier's syncProxyRules): every slice
// event that changes what the proxy holds appends the slice's
// endpoints.kubernetes.io/last-change-trigger-time to its Service's list
// when the time is later than the proxy's start (so objects listed at
// startup give none); a removed slice drops its Service's whole list; each
// sync takes every list at its start and, only if it succeeds, observes
// (end of sync - trigger time) once per time taken. A failed sync loses them.
//
// PodLatency is the true latency the annotation approximates: from the
// instant a pod's readiness changed as endpoints show it (its Ready
// condition, or the start of its deletion) to the end of the first
// successful sync that started when the slices the proxy had heard of
// already showed the change. The annotation, by contrast, carries the Ready
// condition's lastTransitionTime, in whole seconds as the API server
// stores it, and the oldest of a batch.

// ProgrammingSample is one network_programming_duration observation.
type ProgrammingSample struct {
	At      time.Duration // the end of the sync that observed it
	Service string        // namespace/name
	Value   time.Duration // may be negative (the trigger is in the future)
}

type programming struct {
	start   time.Time // kube-proxy's trackerStartTime: when the proxy was built
	pending map[string][]time.Time
	taken   map[string][]time.Time
	samples []ProgrammingSample

	// Pods, tracked once the world has seen one.
	pods map[string]*podChange // by namespace/name
	// open are the pods' changes no sync carries yet, inflight those a
	// sync carries: what a sync's start and end look at, rather than
	// every pod.
	open, inflight map[string]*podChange
	view           map[string]int // ready endpoints per pod in the slices the proxy heard of
	watched        bool
	// measured is every latency measured, each sync's by pod name.
	measured []time.Duration
}

type podChange struct {
	at      time.Duration
	ready   bool
	ip      string // the pod's IP when it changed
	carried int    // the sync that carries it, 0 if none yet
	done    bool
	latency time.Duration
}

func (p *programming) reset(start time.Time) {
	p.start = start
	p.pending = map[string][]time.Time{}
	p.taken = nil
	if p.watched {
		p.view = map[string]int{}
	}
}

// slice follows a slice event the proxy heard (old is nil for add and
// delete), as kube-proxy's EndpointsChangeTracker does.
func (w *World) programmingSlice(old, obj runtime.Object, remove bool) {
	p := &w.prog
	s, ok := obj.(*discovery.EndpointSlice)
	if !ok || string(s.AddressType) != string(w.cfg.Family) {
		return
	}
	if p.watched {
		if o, ok := old.(*discovery.EndpointSlice); ok {
			p.count(o, -1)
		} else if remove {
			p.count(s, -1)
		}
		if !remove {
			p.count(s, 1)
		}
	}
	svc := s.Labels[discovery.LabelServiceName]
	if svc == "" || s.Name == "" {
		return
	}
	if old != nil && identical(old, obj) {
		return // kube-proxy's tracker sees no change
	}
	if remove {
		if len(p.pending) > 0 {
			delete(p.pending, s.Namespace+"/"+svc)
		}
		return
	}
	ann, ok := s.Annotations[v1.EndpointsLastChangeTriggerTime]
	if !ok {
		return
	}
	t, err := time.Parse(time.RFC3339Nano, ann)
	if err != nil || t.IsZero() || !t.After(p.start) {
		return
	}
	key := s.Namespace + "/" + svc
	p.pending[key] = append(p.pending[key], t)
}

func (p *programming) count(s *discovery.EndpointSlice, d int) {
	for i := range s.Endpoints {
		e := &s.Endpoints[i]
		if e.TargetRef == nil || e.TargetRef.Kind != "Pod" || (e.Conditions.Ready != nil && !*e.Conditions.Ready) {
			continue
		}
		k := e.TargetRef.Namespace + "/" + e.TargetRef.Name
		if p.view[k] += d; p.view[k] == 0 {
			delete(p.view, k)
		}
	}
}

// programmingStart checks out the trigger times and the pod changes a sync
// carries.
func (w *World) programmingStart(n int) {
	p := &w.prog
	if len(p.pending) == 0 {
		p.taken = nil
	} else {
		p.taken, p.pending = p.pending, map[string][]time.Time{}
	}
	for k, c := range p.open {
		if (p.view[k] > 0) == c.ready {
			c.carried = n
			delete(p.open, k)
			p.inflight[k] = c
		}
	}
}

// programmingEnd observes what the sync carried, if it succeeded.
func (w *World) programmingEnd(n int, err error) {
	p := &w.prog
	now := w.Now()
	if err == nil {
		keys := make([]string, 0, len(p.taken))
		for k := range p.taken {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			for _, t := range p.taken[k] {
				p.samples = append(p.samples, ProgrammingSample{At: now, Service: k, Value: w.Clock.Now().Sub(t)})
			}
		}
	}
	p.taken = nil
	var done []string
	for k, c := range p.inflight {
		if c.carried != n {
			continue
		}
		delete(p.inflight, k)
		if err == nil {
			c.done, c.latency = true, now-c.at
			done = append(done, k)
		} else {
			c.carried = 0
			p.open[k] = c
		}
	}
	sort.Strings(done)
	for _, k := range done {
		p.measured = append(p.measured, p.pods[k].latency)
	}
}

// programmingPod notes a pod write: a change of its readiness as endpoints
// show it (Ready and not being deleted) starts a new measurement.
func (w *World) programmingPod(cur, obj runtime.Object, deleted bool) {
	if w.cluster != nil {
		w.cluster.podWrite(cur, obj, deleted)
		for _, n := range w.cluster.nodes {
			if n.fw != nil {
				n.fw.programmingPod(cur, obj, deleted)
			}
		}
	}
	p := &w.prog
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	if !p.watched {
		p.watched = true
		p.pods = map[string]*podChange{}
		p.open, p.inflight = map[string]*podChange{}, map[string]*podChange{}
		p.view = map[string]int{}
	}
	ready := !deleted && podServes(pod)
	was := false
	if c, ok := cur.(*v1.Pod); ok {
		was = podServes(c)
	}
	if ready == was && cur != nil {
		return
	}
	if cur == nil && !ready {
		return // a new pod that is not ready changes nothing
	}
	k := pod.Namespace + "/" + pod.Name
	c := &podChange{at: w.Now(), ready: ready, ip: pod.Status.PodIP}
	p.pods[k], p.open[k] = c, c
	delete(p.inflight, k) // the change it replaces is no longer measured
}

func podServes(p *v1.Pod) bool {
	if p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// ProgrammingSamples lists kube-proxy's network_programming_duration
// observations so far, in order.
func (w *World) ProgrammingSamples() []ProgrammingSample { return w.prog.samples }

// PodReadySince reports when a pod ("namespace/name") last turned Ready,
// as endpoints see it, and its IP then; false if its latest readiness
// change was to not ready, or it never changed. Consumers other than
// kube-proxy (the ingress) measure their own latency from it.
func (w *World) PodReadySince(key string) (time.Duration, string, bool) {
	c, ok := w.prog.pods[key]
	if !ok || !c.ready {
		return 0, "", false
	}
	return c.at, c.ip, true
}

// PodLatency reports how long the latest readiness change of a pod
// ("namespace/name") took to be programmed, or false if it has not been
// yet (or the pod never changed).
func (w *World) PodLatency(key string) (time.Duration, bool) {
	c, ok := w.prog.pods[key]
	if !ok || !c.done {
		return 0, false
	}
	return c.latency, true
}
