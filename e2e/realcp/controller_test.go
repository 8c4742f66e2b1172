package realcp

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	upstreamslices "k8s.io/kubernetes/pkg/controller/endpointslice"
	"sigs.k8s.io/yaml"

	"github.com/proxysim/proxysim/e2e/transcript"
	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/controllers"
	"github.com/proxysim/proxysim/sim/controllers/endpointslice"
	"github.com/proxysim/proxysim/sim/vclock"
)

// A controller story (one that switches on proxysim's EndpointSlice
// controller) runs kube-controller-manager v1.36.3's EndpointSlice
// controller in this process, on the real API server: the replay writes the
// story's Pods and Nodes at their instants, and the slices kube-proxy sees
// are the ones upstream's controller writes of them, in real time. The
// slices proxysim's controller wrote are compared with them (compareSlices).

// sliceSettings are the EndpointSlice controller's flags as
// kube-controller-manager takes them.
type sliceSettings struct {
	// BatchPeriod is --endpointslice-updates-batch-period.
	BatchPeriod time.Duration
	// MaxEndpointsPerSlice is --max-endpoints-per-slice.
	MaxEndpointsPerSlice int32
	// Workers is --concurrent-service-endpoint-syncs.
	Workers int
}

// controllerStory is the scenario's EndpointSlice controller settings, or
// nil when it runs none (its slices are written by its steps). proxysim's
// defaults are kube-controller-manager's (sim/controllers/endpointslice
// Config).
func controllerStory(s *scenarios.Scenario) (*sliceSettings, error) {
	on := s.Controllers.On
	set, ok := on["endpointSlice"]
	if !ok {
		return nil, nil
	}
	for key := range on {
		if key != "endpointSlice" {
			return nil, fmt.Errorf("controller %q: only the EndpointSlice controller runs here", key)
		}
	}
	es, ok := set.(*controllers.EndpointSlice)
	if !ok {
		return nil, fmt.Errorf("endpointSlice settings are %T", set)
	}
	c := &sliceSettings{MaxEndpointsPerSlice: endpointslice.DefaultMaxEndpointsPerSlice, Workers: endpointslice.DefaultWorkers}
	if es.BatchPeriod != nil {
		c.BatchPeriod = es.BatchPeriod.D()
	}
	if es.MaxEndpointsPerSlice != nil {
		c.MaxEndpointsPerSlice = int32(*es.MaxEndpointsPerSlice)
	}
	if es.Workers != nil {
		c.Workers = *es.Workers
	}
	return c, nil
}

// sliceEvent is one EndpointSlice event the test's own informer saw.
type sliceEvent struct {
	At  time.Time
	Op  string // add, update, delete
	Obj *discovery.EndpointSlice
}

// sliceController is upstream's EndpointSlice controller on the real API
// server, and a record of every slice event its informer delivered.
type sliceController struct {
	set     sliceSettings
	factory informers.SharedInformerFactory
	ctl     *upstreamslices.Controller
	cancel  context.CancelFunc
	ctx     context.Context
	// Synced is how long its informers took to list (before kube-proxy
	// starts); RunAt is when Run was called (virtual 0).
	Synced time.Duration
	RunAt  time.Time

	mu     sync.Mutex
	events []sliceEvent
}

// newSliceController builds the controller and starts its informers (a
// SharedInformerFactory as kube-controller-manager's, without resync: its
// 12-24 h resync never comes within a story), waiting until they have
// listed. Its handlers queue the Services and pods listed; its workers
// start with run, at virtual 0. Its client is kube-controller-manager's
// default: QPS 20, burst 30.
func newSliceController(t *testing.T, cp *controlPlane, set sliceSettings) *sliceController {
	t.Helper()
	cfg := rest.CopyConfig(cp.config)
	cfg.QPS, cfg.Burst = 20, 30
	cfg.UserAgent = "kube-controller-manager/endpointslice-controller"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &sliceController{set: set, ctx: ctx, cancel: cancel}
	t.Cleanup(c.stop)
	c.factory = informers.NewSharedInformerFactory(client, 0)
	c.ctl = upstreamslices.NewController(ctx, c.factory.Core().V1().Pods(), c.factory.Core().V1().Services(),
		c.factory.Core().V1().Nodes(), c.factory.Discovery().V1().EndpointSlices(), set.MaxEndpointsPerSlice, client, set.BatchPeriod)
	record := func(op string) func(any) {
		return func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			s, ok := obj.(*discovery.EndpointSlice)
			if !ok {
				return
			}
			c.mu.Lock()
			c.events = append(c.events, sliceEvent{At: time.Now(), Op: op, Obj: s.DeepCopy()})
			c.mu.Unlock()
		}
	}
	_, err = c.factory.Discovery().V1().EndpointSlices().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    record("add"),
		UpdateFunc: func(_, obj any) { record("update")(obj) },
		DeleteFunc: record("delete"),
	})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	c.factory.Start(ctx.Done())
	for typ, ok := range c.factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("the EndpointSlice controller's %v informer did not sync", typ)
		}
	}
	c.Synced = time.Since(start)
	return c
}

// run starts the controller's workers.
func (c *sliceController) run() {
	c.RunAt = time.Now()
	go c.ctl.Run(c.ctx, c.set.Workers)
}

func (c *sliceController) stop() {
	c.cancel()
	c.factory.Shutdown()
}

// Events are the slice events seen so far.
func (c *sliceController) Events() []sliceEvent {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.events)
}

// managedByController says whether a slice is the EndpointSlice
// controller's (its managed-by label): upstream's writes it here.
func managedByController(o runtime.Object) bool {
	s, ok := o.(*discovery.EndpointSlice)
	return ok && s.Labels[discovery.LabelManagedBy] == upstreamslices.ControllerName
}

// stamps maps the virtual instants written into Pods (a Ready condition's
// lastTransitionTime, which upstream's controller copies into the
// trigger-time annotation) onto the real clock: virtual 0
// (vclock.Epoch) is origin. The API server keeps whole seconds, and a
// virtual stamp is whole already (scenarios' podReady), so origin is a
// whole second too: a stamp then reads exactly origin plus its virtual
// offset on both sides.
type stamps struct{ origin time.Time }

func (m stamps) at(t metav1.Time) metav1.Time {
	if t.IsZero() {
		return t
	}
	return metav1.NewTime(m.origin.Add(t.Sub(vclock.Epoch)))
}

// podStatus is st with its times on the real clock, over what the API
// server holds (cur: its QoS class, which a status write may not change).
func (m stamps) podStatus(cur, st v1.PodStatus) v1.PodStatus {
	out := cur
	out.Phase, out.PodIP, out.PodIPs, out.HostIP, out.HostIPs = st.Phase, st.PodIP, st.PodIPs, st.HostIP, st.HostIPs
	out.Conditions = nil
	for _, c := range st.Conditions {
		c.LastTransitionTime, c.LastProbeTime = m.at(c.LastTransitionTime), m.at(c.LastProbeTime)
		out.Conditions = append(out.Conditions, c)
	}
	if st.StartTime != nil {
		t := m.at(*st.StartTime)
		out.StartTime = &t
	}
	return out
}

// podWriter writes a story's Pods and Nodes into the API server as the
// scenario's steps (and kubelet, whose part they play) wrote them in
// proxysim's world: a Pod is created and then its status written through
// the status subresource (the API server resets a new Pod's status); a
// graceful delete is a DELETE with the grace period (the API server sets
// deletionTimestamp); the end of the grace period, kubelet's final DELETE
// with grace 0.
type podWriter struct {
	client kubernetes.Interface
	stamps stamps
	// last is each object as the recording last wrote it, to tell what an
	// update changed.
	last map[string]runtime.Object
}

func objKey(kind string, o metav1.Object) string {
	return kind + " " + o.GetNamespace() + "/" + o.GetName()
}

// write replays one recorded Pod or Node write.
func (pw *podWriter) write(ctx context.Context, w transcript.Write) error {
	m := w.Obj.(metav1.Object)
	key := objKey(w.Kind, m)
	prev := pw.last[key]
	pw.last[key] = w.Obj
	switch o := w.Obj.(type) {
	case *v1.Pod:
		switch w.Op {
		case "add":
			return pw.createPod(ctx, o)
		case "delete":
			// kubelet's final delete, or a delete without grace.
			return pw.client.CoreV1().Pods(o.Namespace).Delete(ctx, o.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
		case "update":
			old, _ := prev.(*v1.Pod)
			if old == nil {
				return fmt.Errorf("update of %s: no earlier write of it", key)
			}
			return pw.updatePod(ctx, old, o)
		}
	case *v1.Node:
		switch w.Op {
		case "add":
			_, err := pw.client.CoreV1().Nodes().Create(ctx, bare(o).(*v1.Node), metav1.CreateOptions{})
			return err
		case "delete":
			return pw.client.CoreV1().Nodes().Delete(ctx, o.Name, metav1.DeleteOptions{})
		case "update":
			old, _ := prev.(*v1.Node)
			if old == nil || !reflect.DeepEqual(old.Spec, o.Spec) || !reflect.DeepEqual(old.Status, o.Status) {
				return fmt.Errorf("update of %s: only a Node's labels and annotations are replayed", key)
			}
			cur, err := pw.client.CoreV1().Nodes().Get(ctx, o.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur.Labels, cur.Annotations = o.Labels, o.Annotations
			_, err = pw.client.CoreV1().Nodes().Update(ctx, cur, metav1.UpdateOptions{})
			return err
		}
	}
	return fmt.Errorf("cannot replay %s of %s", w.Op, key)
}

func (pw *podWriter) createPod(ctx context.Context, o *v1.Pod) error {
	c := pw.client.CoreV1().Pods(o.Namespace)
	p := bare(o).(*v1.Pod)
	p.Status = v1.PodStatus{}
	got, err := c.Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	if reflect.DeepEqual(o.Status, v1.PodStatus{}) {
		return nil
	}
	got.Status = pw.stamps.podStatus(got.Status, o.Status)
	_, err = c.UpdateStatus(ctx, got, metav1.UpdateOptions{})
	return err
}

// updatePod replays what one write changed: a graceful delete, labels or
// annotations, or the status. A Pod's spec is not the steps' to change.
func (pw *podWriter) updatePod(ctx context.Context, old, o *v1.Pod) error {
	c := pw.client.CoreV1().Pods(o.Namespace)
	if !apiequality.Semantic.DeepEqual(old.Spec, o.Spec) {
		return fmt.Errorf("update of Pod %s/%s changes its spec: not replayed", o.Namespace, o.Name)
	}
	if o.DeletionTimestamp != nil && old.DeletionTimestamp == nil {
		opts := metav1.DeleteOptions{GracePeriodSeconds: o.DeletionGracePeriodSeconds}
		if err := c.Delete(ctx, o.Name, opts); err != nil {
			return err
		}
	}
	if !maps.Equal(old.Labels, o.Labels) || !maps.Equal(old.Annotations, o.Annotations) {
		cur, err := c.Get(ctx, o.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Labels, cur.Annotations = o.Labels, o.Annotations
		if _, err := c.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	if !apiequality.Semantic.DeepEqual(old.Status, o.Status) {
		cur, err := c.Get(ctx, o.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Status = pw.stamps.podStatus(cur.Status, o.Status)
		if _, err := c.UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// createInitial makes a controller story's objects before kube-proxy
// starts: its Nodes (kube-proxy's own with its address, which kube-proxy
// waits for), Services, Pods (with their status) and the slices its steps
// own; the controller's slices are upstream's controller's to write.
func createInitial(ctx context.Context, cp *controlPlane, tr *transcript.Transcript, cfg proxyConfig, pw *podWriter) error {
	for _, kind := range []string{"Node", "Service", "Pod", "EndpointSlice"} {
		for _, o := range tr.Initial {
			if objKind(o) != kind || managedByController(o) {
				continue
			}
			switch o := o.(type) {
			case *v1.Node:
				n := bare(o).(*v1.Node)
				if n.Name == cfg.NodeName {
					n.Status.Addresses = ownAddresses(cfg)
				}
				if _, err := cp.client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
					return fmt.Errorf("create Node %s: %w", n.Name, err)
				}
			case *v1.Pod:
				pw.last[objKey("Pod", o)] = o
				if err := pw.createPod(ctx, o); err != nil {
					return fmt.Errorf("create Pod %s/%s: %w", o.Namespace, o.Name, err)
				}
			default:
				if err := createBefore(ctx, cp.client, o); err != nil {
					return fmt.Errorf("create %s: %w", kind, err)
				}
			}
		}
	}
	return nil
}

// objKind is the kind of a scenario object by its Go type.
func objKind(o runtime.Object) string {
	switch o.(type) {
	case *v1.Node:
		return "Node"
	case *v1.Pod:
		return "Pod"
	}
	return kindOf(o)
}

// ownAddresses are kube-proxy's Node's addresses.
func ownAddresses(cfg proxyConfig) []v1.NodeAddress {
	return []v1.NodeAddress{
		{Type: v1.NodeInternalIP, Address: cfg.NodeIP},
		{Type: v1.NodeHostName, Address: cfg.NodeName},
	}
}

// sliceWrite is one slice write of a controller, on one side: its instant
// after virtual 0, the slice without what differs by nature between two
// API servers (normalSlice), and its trigger time.
type sliceWrite struct {
	At      time.Duration
	Op      string
	Service string // namespace/name
	Name    string // the slice's own, on its side
	Slice   string // normalSlice's YAML
	// Trigger is the trigger-time annotation ("" without one); Old says it
	// is at or before the proxy's start, which kube-proxy ignores.
	Trigger time.Time
	Old     bool
	// Index is a predicted write's place in the transcript's Writes
	// (transcript.Sync.Heard counts them).
	Index int
}

// normalSlice is s as compared: no name (generated), UID, resourceVersion,
// creation time, generation or managed fields; no UIDs in its owner and
// target references; endpoints in address order (upstream's reconciler
// meets pods in its lister's order); the trigger-time annotation apart.
func normalSlice(s *discovery.EndpointSlice) (string, time.Time) {
	c := s.DeepCopy()
	c.TypeMeta = metav1.TypeMeta{}
	c.Name, c.UID, c.ResourceVersion, c.Generation = "", "", "", 0
	c.CreationTimestamp, c.ManagedFields = metav1.Time{}, nil
	for i := range c.OwnerReferences {
		c.OwnerReferences[i].UID = ""
	}
	var trigger time.Time
	if v, ok := c.Annotations[v1.EndpointsLastChangeTriggerTime]; ok {
		trigger, _ = time.Parse(time.RFC3339Nano, v)
		delete(c.Annotations, v1.EndpointsLastChangeTriggerTime)
		if len(c.Annotations) == 0 {
			c.Annotations = nil
		}
	}
	for i := range c.Endpoints {
		if r := c.Endpoints[i].TargetRef; r != nil {
			r.UID, r.ResourceVersion = "", ""
		}
	}
	slices.SortStableFunc(c.Endpoints, func(a, b discovery.Endpoint) int {
		return strings.Compare(strings.Join(a.Addresses, ","), strings.Join(b.Addresses, ","))
	})
	out, err := yaml.Marshal(c)
	if err != nil {
		return fmt.Sprintf("unprintable slice: %v", err), trigger
	}
	return string(out), trigger
}

func sliceWriteOf(at time.Duration, op string, s *discovery.EndpointSlice) sliceWrite {
	text, trigger := normalSlice(s)
	return sliceWrite{At: at, Op: op, Service: s.Namespace + "/" + s.Labels[discovery.LabelServiceName], Name: s.Namespace + "/" + s.Name, Slice: text, Trigger: trigger}
}

// predictedSliceWrites are the slice writes proxysim's controller made,
// trigger times on the real clock (stamps).
func predictedSliceWrites(tr *transcript.Transcript, m stamps) []sliceWrite {
	var out []sliceWrite
	for i, w := range tr.Writes {
		s, ok := w.Obj.(*discovery.EndpointSlice)
		if !ok || w.By != endpointslice.Name {
			continue
		}
		sw := sliceWriteOf(w.At, w.Op, s)
		sw.Index = i
		if !sw.Trigger.IsZero() {
			sw.Old = !sw.Trigger.After(vclock.Epoch)
			sw.Trigger = m.at(metav1.NewTime(sw.Trigger)).Time
		}
		out = append(out, sw)
	}
	return out
}

// realSliceWrites are the slice writes upstream's controller made after it
// started (its informer's events of the slices it manages, timed from t0;
// proxyStart tells the trigger times kube-proxy ignores).
func realSliceWrites(events []sliceEvent, r *run, runAt, proxyStart time.Time) []sliceWrite {
	var out []sliceWrite
	for _, e := range events {
		if e.At.Before(runAt) || !managedByController(e.Obj) {
			continue
		}
		sw := sliceWriteOf(r.since(e.At), e.Op, e.Obj)
		if !sw.Trigger.IsZero() {
			sw.Old = !sw.Trigger.After(proxyStart)
		}
		out = append(out, sw)
	}
	return out
}

// compareSliceWrites matches each Service's slice writes one to one:
// the same operation, the same slice, within tol of each other, and the
// same trigger time (both absent; both ignored by kube-proxy, at or before
// its start; or equal within tol). It returns the differences and the
// largest offset.
func compareSliceWrites(pred, real []sliceWrite, tol time.Duration) (diffs []string, jitter time.Duration) {
	byService := func(ws []sliceWrite) map[string][]sliceWrite {
		out := map[string][]sliceWrite{}
		for _, w := range ws {
			out[w.Service] = append(out[w.Service], w)
		}
		return out
	}
	p, g := byService(pred), byService(real)
	services := slices.Sorted(maps.Keys(p))
	for svc := range g {
		if _, ok := p[svc]; !ok {
			services = append(services, svc)
		}
	}
	for _, svc := range services {
		ps, gs := p[svc], g[svc]
		if len(ps) != len(gs) {
			diffs = append(diffs, fmt.Sprintf("slices of %s: proxysim's controller wrote %d times %v, upstream's %d times %v", svc, len(ps), writeTimes(ps), len(gs), writeTimes(gs)))
		}
		for i := range min(len(ps), len(gs)) {
			a, b := ps[i], gs[i]
			if d := absDur(b.At - a.At); d > jitter {
				jitter = d
			}
			what := fmt.Sprintf("slice write %d of %s (predicted %s at %v, upstream's %s at %v)", i+1, svc, a.Op, a.At, b.Op, b.At.Round(time.Millisecond))
			if a.Op != b.Op {
				diffs = append(diffs, what+": not the same operation")
			}
			if !within(b.At, a.At, tol) {
				diffs = append(diffs, fmt.Sprintf("%s: off by %v, tolerance %v", what, (b.At-a.At).Round(time.Millisecond), tol))
			}
			if a.Slice != b.Slice {
				diffs = append(diffs, fmt.Sprintf("%s: the slices differ:\n%s", what, lineDiff(a.Slice, b.Slice)))
			}
			if msg := compareTriggers(a, b, tol); msg != "" {
				diffs = append(diffs, what+": "+msg)
			}
		}
	}
	return diffs, jitter
}

func compareTriggers(a, b sliceWrite, tol time.Duration) string {
	switch {
	case a.Trigger.IsZero() != b.Trigger.IsZero():
		return fmt.Sprintf("trigger time predicted %v, upstream's %v", a.Trigger, b.Trigger)
	case a.Trigger.IsZero(), a.Old && b.Old:
		return ""
	case a.Old != b.Old:
		return fmt.Sprintf("trigger time predicted %v (before the proxy's start: %v), upstream's %v (%v)", a.Trigger, a.Old, b.Trigger, b.Old)
	case !within(b.Trigger.Sub(a.Trigger), 0, tol):
		return fmt.Sprintf("trigger time predicted %v, upstream's %v", a.Trigger.Format(time.RFC3339Nano), b.Trigger.Format(time.RFC3339Nano))
	}
	return ""
}

func writeTimes(ws []sliceWrite) []string {
	var out []string
	for _, w := range ws {
		out = append(out, fmt.Sprintf("%s@%v", w.Op, w.At.Round(time.Millisecond)))
	}
	return out
}

// lineDiff is two YAML texts' differing lines, "-" proxysim's, "+"
// upstream's.
func lineDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	var out []string
	for _, l := range al {
		if !slices.Contains(bl, l) {
			out = append(out, "  - "+l)
		}
	}
	for _, l := range bl {
		if !slices.Contains(al, l) {
			out = append(out, "  + "+l)
		}
	}
	if len(out) == 0 {
		return "  (the same lines in another order)\n--- proxysim's\n" + a + "--- upstream's\n" + b
	}
	return strings.Join(out, "\n")
}

// sliceState is the controller's slices after the writes up to a cut, as
// a sorted list of normalSlice texts (their names differ between the two
// API servers).
func sliceState(writes []sliceWrite, upTo func(sliceWrite) bool) []string {
	live := map[string]string{}
	for _, w := range writes {
		if !upTo(w) {
			break
		}
		if w.Op == "delete" {
			delete(live, w.Name)
		} else {
			live[w.Name] = w.Slice
		}
	}
	return slices.Sorted(maps.Values(live))
}

// compareSliceStates checks the controller's slices each sync started
// with. proxysim's: the writes its proxy had heard (transcript.Sync.Heard:
// of one instant's writes, those before the sync); of that instant's
// writes for several Services, as many in any order that keeps each
// Service's own (upstream's workers sync different Services at once,
// in no set order; proxysim's queue takes them in sorted order). Upstream's:
// the writes the test's informer saw before the real sync's start; a write
// seen within tol of the start may have reached kube-proxy on the other
// side of it, so a cut at any write within tol of the start that agrees is
// accepted. Both acceptances are logged.
func compareSliceStates(pred []sliceWrite, predSyncs []transcript.Sync, real []sliceWrite, realStarts []time.Duration, tol time.Duration) (diffs, raced []string) {
	for i := range min(len(predSyncs), len(realStarts)) {
		p := predSyncs[i]
		want := sliceState(pred, func(w sliceWrite) bool { return w.Index < p.Heard })
		wants := reorderedStates(pred, p)
		agrees := func(got []string) bool {
			return slices.ContainsFunc(wants, func(w []string) bool { return slices.Equal(w, got) })
		}
		got := sliceState(real, func(w sliceWrite) bool { return w.At < realStarts[i] })
		if slices.Equal(want, got) {
			continue
		}
		if agrees(got) {
			raced = append(raced, fmt.Sprintf("sync %d at %v: it started with the slices of its instant's writes in another order of their Services", i+1, p.Start))
			continue
		}
		agreed := false
		for _, w := range real {
			if !within(w.At, realStarts[i], tol) {
				continue
			}
			cut := w.At
			if agrees(sliceState(real, func(x sliceWrite) bool { return x.At <= cut })) || agrees(sliceState(real, func(x sliceWrite) bool { return x.At < cut })) {
				agreed = true
				break
			}
		}
		if agreed {
			raced = append(raced, fmt.Sprintf("sync %d at %v: a slice write seen within %v of its start counted on the other side of it", i+1, p.Start, tol))
			continue
		}
		diffs = append(diffs, fmt.Sprintf("sync %d: the controller's slices it started with differ (predicted at %v, kube-proxy's at %v):\n%s", i+1, p.Start, realStarts[i].Round(time.Millisecond),
			lineDiff(strings.Join(want, "---\n"), strings.Join(got, "---\n"))))
	}
	return diffs, raced
}

// reorderedStates are the slice states a sync may have started with: the
// writes before its instant, and as many of its instant's writes as
// proxysim's proxy had heard, taken as a prefix of each Service's.
func reorderedStates(pred []sliceWrite, p transcript.Sync) [][]string {
	var before []sliceWrite
	bySvc := map[string][]sliceWrite{}
	heardNow := 0
	for _, w := range pred {
		switch {
		case w.At < p.Start:
			before = append(before, w)
		case w.At == p.Start:
			bySvc[w.Service] = append(bySvc[w.Service], w)
			if w.Index < p.Heard {
				heardNow++
			}
		}
	}
	svcs := slices.Sorted(maps.Keys(bySvc))
	var out [][]string
	var pick func(k, left int, taken []sliceWrite)
	pick = func(k, left int, taken []sliceWrite) {
		if k == len(svcs) {
			if left == 0 {
				all := append(slices.Clone(before), taken...)
				out = append(out, sliceState(all, func(sliceWrite) bool { return true }))
			}
			return
		}
		for n := 0; n <= min(left, len(bySvc[svcs[k]])); n++ {
			pick(k+1, left-n, append(slices.Clone(taken), bySvc[svcs[k]][:n]...))
		}
	}
	pick(0, heardNow, nil)
	return out
}

// firstSliceWrite is how long after its workers started upstream's
// controller's first slice write was seen (its start-up cost: proxysim's
// writes at virtual 0).
func (r *run) firstSliceWrite() time.Duration {
	for _, e := range r.slices.Events() {
		if !e.At.Before(r.slices.RunAt) && managedByController(e.Obj) {
			return e.At.Sub(r.slices.RunAt)
		}
	}
	return -1
}

// withProxyZone is s with the proxy's own Node labelled with the proxy's
// zone (proxy.zone; no zone label when it has none), on both sides.
// proxysim's proxy takes its zone from proxy.zone and never reads its
// Node, where kube-proxy reads its Node's topology.kubernetes.io/zone: on a
// Node with a zone it calls OnTopologyChange when its informer lists it,
// before its first sync, and that asks its runner for a sync that
// starts the minSyncPeriod cooldown (docs/realcp.md, "What it found").
// The controller stories label every Node with a zone the proxy does not
// have.
func withProxyZone(s *scenarios.Scenario, nodeName string) *scenarios.Scenario {
	c := *s
	c.Initial = nil
	for _, o := range s.Initial {
		if n, ok := o.Obj.(*v1.Node); ok && n.Name == nodeName && n.Labels[v1.LabelTopologyZone] != s.Proxy.Zone {
			n = n.DeepCopy()
			if s.Proxy.Zone == "" {
				delete(n.Labels, v1.LabelTopologyZone)
			} else {
				if n.Labels == nil {
					n.Labels = map[string]string{}
				}
				n.Labels[v1.LabelTopologyZone] = s.Proxy.Zone
			}
			o.Obj = n
		}
		c.Initial = append(c.Initial, o)
	}
	return &c
}
