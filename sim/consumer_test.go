package sim_test

import (
	"bytes"
	"fmt"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	networking "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"

	"github.com/proxysim/proxysim/fakes"
	"github.com/proxysim/proxysim/sim"
	"github.com/proxysim/proxysim/sim/runner"
)

// podSlicer is a toy endpoints controller: it keeps one EndpointSlice,
// "web-pods", with the address of every ready Pod, written on each Pod event.
type podSlicer struct {
	w    *sim.World
	pods map[string]*v1.Pod
}

func (c *podSlicer) Name() string    { return "pod-slicer" }
func (c *podSlicer) Kinds() []string { return []string{"Pod"} }
func (c *podSlicer) OnAdd(_ string, obj kruntime.Object) error {
	p := obj.(*v1.Pod)
	c.pods[p.Name] = p
	return c.write()
}
func (c *podSlicer) OnUpdate(_ string, _, obj kruntime.Object) error { return c.OnAdd("Pod", obj) }
func (c *podSlicer) OnDelete(_ string, obj kruntime.Object) error {
	delete(c.pods, obj.(*v1.Pod).Name)
	return c.write()
}
func (c *podSlicer) OnSynced(string) error { return nil }

func (c *podSlicer) write() error {
	var addrs []string
	names := make([]string, 0, len(c.pods))
	for n := range c.pods {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if p := c.pods[n]; podReady(p) {
			addrs = append(addrs, p.Status.PodIP)
		}
	}
	return c.w.Apply(fakes.EndpointSlice("default", "web-pods", "web", 8080, addrs...))
}

func podReady(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// sliceAudit watches EndpointSlices and keeps a ConfigMap per slice with its
// number of endpoints: a consumer of another consumer's writes.
type sliceAudit struct{ w *sim.World }

func (c *sliceAudit) Name() string    { return "slice-audit" }
func (c *sliceAudit) Kinds() []string { return []string{"EndpointSlice"} }
func (c *sliceAudit) OnAdd(_ string, obj kruntime.Object) error {
	s := obj.(*discovery.EndpointSlice)
	return c.w.Apply(&v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: "audit-" + s.Name},
		Data:       map[string]string{"endpoints": strconv.Itoa(len(s.Endpoints))},
	})
}
func (c *sliceAudit) OnUpdate(_ string, _, obj kruntime.Object) error {
	return c.OnAdd("EndpointSlice", obj)
}
func (c *sliceAudit) OnDelete(_ string, obj kruntime.Object) error {
	return c.w.Delete("ConfigMap", obj.(*discovery.EndpointSlice).Namespace, "audit-"+obj.(*discovery.EndpointSlice).Name)
}
func (c *sliceAudit) OnSynced(string) error { return nil }

func pod(name, ip string, ready bool) *v1.Pod {
	st := v1.ConditionFalse
	if ready {
		st = v1.ConditionTrue
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: map[string]string{"app": "web"}},
		Status: v1.PodStatus{
			PodIP:      ip,
			Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: st}},
		},
	}
}

// podWorld is a Service, two Pods, the toy controller writing the Pods'
// EndpointSlice, the audit writing a ConfigMap per slice, and the proxy.
func podWorld(t testing.TB, resync time.Duration) *sim.World {
	w, err := sim.NewWorld(sim.Config{
		Runner:       runner.Config{Generation: runner.Cooldown, MinInterval: time.Second, MaxInterval: time.Hour},
		ResyncPeriod: resync,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(w.Subscribe(&podSlicer{w: w, pods: map[string]*v1.Pod{}}))
	must(w.Subscribe(&sliceAudit{w: w}))
	must(w.Create(fakes.Service("default", "web", "10.96.0.10", 80)))
	must(w.Create(pod("a", "10.244.1.2", true)))
	must(w.Create(pod("b", "10.244.1.3", false)))
	must(w.Start())
	step := func(at time.Duration, f func() error) {
		w.At(at, func() {
			if err := f(); err != nil {
				t.Error(err)
			}
		})
	}
	step(time.Second, func() error { return w.Update(pod("b", "10.244.1.3", true)) })
	step(1500*time.Millisecond, func() error { return w.Create(pod("c", "10.244.1.4", true)) })
	step(3*time.Second, func() error { return w.Delete("Pod", "default", "a") })
	return w
}

func TestConsumersChainWritesInOrder(t *testing.T) {
	w := podWorld(t, -1)
	w.RunUntil(5 * time.Second)
	if err := w.Err(); err != nil {
		t.Fatal(err)
	}
	// The proxy starts first, with the Service alone; the slicer then lists
	// the Pods and writes their slice, which the proxy hears after the
	// slicer's pending Pod b (FIFO) and before the slicer's synced
	// notification; the audit starts last and lists the slice. Each later
	// Pod change goes Pod → slicer → slice → proxy, then audit → ConfigMap
	// (no one watches ConfigMaps), all at the instant of the Pod write. At
	// 3s the runner's cooldown timer is due at the same instant as the
	// delete, but was armed later: the whole chain is delivered first.
	want := `{"at":"0s","ev":"object","op":"add","obj":"Service default/web"}
{"at":"0s","ev":"synced","obj":"Service"}
{"at":"0s","ev":"synced","obj":"EndpointSlice"}
{"at":"0s","ev":"run.start","why":"initial","run":1}
{"at":"0s","ev":"run.end","run":1}
{"at":"0s","ev":"object","op":"add","obj":"Pod default/a","detail":"to pod-slicer"}
{"at":"0s","ev":"object","op":"create","obj":"EndpointSlice default/web-pods","why":"pod-slicer"}
{"at":"0s","ev":"object","op":"add","obj":"Pod default/b","detail":"to pod-slicer"}
{"at":"0s","ev":"object","op":"add","obj":"EndpointSlice default/web-pods"}
{"at":"0s","ev":"run.request"}
{"at":"0s","ev":"run.start","why":"request","run":2}
{"at":"0s","ev":"run.end","run":2}
{"at":"0s","ev":"synced","obj":"Pod","detail":"to pod-slicer"}
{"at":"0s","ev":"object","op":"add","obj":"EndpointSlice default/web-pods","detail":"to slice-audit"}
{"at":"0s","ev":"object","op":"create","obj":"ConfigMap default/audit-web-pods","why":"slice-audit"}
{"at":"0s","ev":"synced","obj":"EndpointSlice","detail":"to slice-audit"}
{"at":"1s","ev":"object","op":"update","obj":"Pod default/b","detail":"to pod-slicer"}
{"at":"1s","ev":"object","op":"update","obj":"EndpointSlice default/web-pods","why":"pod-slicer"}
{"at":"1s","ev":"object","op":"update","obj":"EndpointSlice default/web-pods"}
{"at":"1s","ev":"run.request"}
{"at":"1s","ev":"run.start","why":"request","run":3}
{"at":"1s","ev":"run.end","run":3}
{"at":"1s","ev":"object","op":"update","obj":"EndpointSlice default/web-pods","detail":"to slice-audit"}
{"at":"1s","ev":"object","op":"update","obj":"ConfigMap default/audit-web-pods","why":"slice-audit"}
{"at":"1.5s","ev":"object","op":"add","obj":"Pod default/c","detail":"to pod-slicer"}
{"at":"1.5s","ev":"object","op":"update","obj":"EndpointSlice default/web-pods","why":"pod-slicer"}
{"at":"1.5s","ev":"object","op":"update","obj":"EndpointSlice default/web-pods"}
{"at":"1.5s","ev":"run.request"}
{"at":"1.5s","ev":"run.defer","why":"cooldown","until":"2s"}
{"at":"1.5s","ev":"object","op":"update","obj":"EndpointSlice default/web-pods","detail":"to slice-audit"}
{"at":"1.5s","ev":"object","op":"update","obj":"ConfigMap default/audit-web-pods","why":"slice-audit"}
{"at":"2s","ev":"run.start","why":"request","run":4}
{"at":"2s","ev":"run.end","run":4}
{"at":"3s","ev":"object","op":"delete","obj":"Pod default/a","detail":"to pod-slicer"}
{"at":"3s","ev":"object","op":"update","obj":"EndpointSlice default/web-pods","why":"pod-slicer"}
{"at":"3s","ev":"object","op":"update","obj":"EndpointSlice default/web-pods"}
{"at":"3s","ev":"run.request"}
{"at":"3s","ev":"run.defer","why":"cooldown","until":"3s"}
{"at":"3s","ev":"object","op":"update","obj":"EndpointSlice default/web-pods","detail":"to slice-audit"}
{"at":"3s","ev":"object","op":"update","obj":"ConfigMap default/audit-web-pods","why":"slice-audit"}
{"at":"3s","ev":"run.start","why":"request","run":5}
{"at":"3s","ev":"run.end","run":5}
`
	if got := string(w.Trace.JSONL()); got != want {
		t.Fatalf("trace:\n%s\nwant:\n%s", got, want)
	}
	// The proxy ends with the slicer's view: b and c ready, a gone.
	be := w.Backend().(*sim.RecordingBackend)
	if last := be.Syncs[len(be.Syncs)-1]; last.ServicePorts != 1 || last.Endpoints != 2 {
		t.Fatalf("last sync saw %+v; want 1 service port, 2 endpoints", last)
	}
	cm, err := w.Get("ConfigMap", [2]string{"default", "audit-web-pods"})
	if err != nil {
		t.Fatal(err)
	}
	if n := cm.(*v1.ConfigMap).Data["endpoints"]; n != "2" {
		t.Fatalf("audit says %s endpoints; want 2", n)
	}
}

// podReplay is podWorld with resyncs and a broken watch, as JSON Lines.
func podReplay(t *testing.T) []byte {
	w := podWorld(t, 2*time.Second)
	w.At(3500*time.Millisecond, func() { w.BreakWatch(2 * time.Second) })
	w.At(4*time.Second, func() {
		if err := w.Create(pod("d", "10.244.1.5", true)); err != nil {
			t.Error(err)
		}
	})
	w.RunUntil(10 * time.Second)
	if err := w.Err(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	return w.Trace.JSONL()
}

// The chained world replays byte-identically, whatever the scheduler does
// with the informers' goroutines. Run it under -race.
func TestChainedWorldReplayIsByteIdentical(t *testing.T) {
	n := 100
	if testing.Short() {
		n = 10
	}
	want := podReplay(t)
	// Resyncs reach the consumers (and the slicer's no-op rewrites are not
	// written), and the relist gives each consumer the Pod made meanwhile.
	for _, line := range []string{
		`{"at":"2s","ev":"resync","op":"update","obj":"Pod default/a","detail":"to pod-slicer"}`,
		`{"at":"5.5s","ev":"object","op":"add","obj":"Pod default/d","detail":"to pod-slicer"}`,
	} {
		if !bytes.Contains(want, []byte(line+"\n")) {
			t.Fatalf("trace lacks %s:\n%s", line, want)
		}
	}
	prev := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(prev)
	for i := 0; i < n; i++ {
		runtime.GOMAXPROCS(1 + i%2)
		if got := podReplay(t); !bytes.Equal(got, want) {
			t.Fatalf("replay %d (GOMAXPROCS %d) differs:\n%s\nvs\n%s", i, 1+i%2, got, want)
		}
	}
}

// echo rewrites every ConfigMap it hears of: each write causes the next.
type echo struct{ w *sim.World }

func (c *echo) Name() string    { return "echo" }
func (c *echo) Kinds() []string { return []string{"ConfigMap"} }
func (c *echo) OnAdd(_ string, obj kruntime.Object) error {
	cm := obj.(*v1.ConfigMap).DeepCopy()
	n, _ := strconv.Atoi(cm.Data["n"])
	cm.Data["n"] = strconv.Itoa(n + 1)
	return c.w.Update(cm)
}
func (c *echo) OnUpdate(_ string, _, obj kruntime.Object) error { return c.OnAdd("", obj) }
func (c *echo) OnDelete(string, kruntime.Object) error          { return nil }
func (c *echo) OnSynced(string) error                           { return nil }

func TestLoopBetweenConsumersIsCut(t *testing.T) {
	w := sim.New(t, sim.Config{})
	if err := w.Subscribe(&echo{w: w}); err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	err := w.Create(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "ping"}, Data: map[string]string{"n": "0"}})
	if err == nil || !strings.Contains(err.Error(), "a loop between consumers?") {
		t.Fatalf("err = %v; want the chain cut", err)
	}
	cm, err := w.Get("ConfigMap", [2]string{"default", "ping"})
	if err != nil {
		t.Fatal(err)
	}
	// The scenario's create is the first write; echo's updates the others.
	if got := cm.(*v1.ConfigMap).Data["n"]; got != strconv.Itoa(sim.MaxChain-1) {
		t.Fatalf("n = %s after the chain; want %d", got, sim.MaxChain-1)
	}
	var refused int
	for _, e := range kinds(w, "object") {
		if e.Op == "refused" {
			refused++
		}
	}
	if refused != 1 {
		t.Fatalf("%d refused writes; want 1", refused)
	}
}

// recorder subscribes to kinds and lists what it hears.
type recorder struct {
	name  string
	kinds []string
	got   []string
}

func (c *recorder) Name() string    { return c.name }
func (c *recorder) Kinds() []string { return c.kinds }
func (c *recorder) note(op, kind string, obj kruntime.Object) error {
	m := obj.(metav1.Object)
	c.got = append(c.got, fmt.Sprintf("%s %s %s/%s", op, kind, m.GetNamespace(), m.GetName()))
	return nil
}
func (c *recorder) OnAdd(kind string, obj kruntime.Object) error { return c.note("add", kind, obj) }
func (c *recorder) OnUpdate(kind string, _, obj kruntime.Object) error {
	return c.note("update", kind, obj)
}
func (c *recorder) OnDelete(kind string, obj kruntime.Object) error {
	return c.note("delete", kind, obj)
}
func (c *recorder) OnSynced(kind string) error {
	c.got = append(c.got, "synced "+kind)
	return nil
}

// One object of every kind in the table: each goes through the world's
// object store and its own informer.
func TestEveryKindReachesItsConsumers(t *testing.T) {
	objects := map[string]func(label string) kruntime.Object{
		"Service": func(l string) kruntime.Object {
			s := fakes.Service("default", "x", "10.96.0.99", 80)
			s.Labels = map[string]string{"v": l}
			return s
		},
		"EndpointSlice": func(l string) kruntime.Object {
			s := fakes.EndpointSlice("default", "x", "x", 80, "10.244.9.9")
			s.Labels["v"] = l
			return s
		},
		"Pod":          func(l string) kruntime.Object { return &v1.Pod{ObjectMeta: meta("default", l)} },
		"Node":         func(l string) kruntime.Object { return &v1.Node{ObjectMeta: meta("", l)} },
		"Endpoints":    func(l string) kruntime.Object { return &v1.Endpoints{ObjectMeta: meta("default", l)} },
		"Ingress":      func(l string) kruntime.Object { return &networking.Ingress{ObjectMeta: meta("default", l)} },
		"IngressClass": func(l string) kruntime.Object { return &networking.IngressClass{ObjectMeta: meta("", l)} },
		"ConfigMap":    func(l string) kruntime.Object { return &v1.ConfigMap{ObjectMeta: meta("default", l)} },
		"Secret":       func(l string) kruntime.Object { return &v1.Secret{ObjectMeta: meta("default", l)} },
	}
	if len(objects) != len(sim.Kinds()) {
		t.Fatalf("the test covers %d kinds; the world carries %v", len(objects), sim.Kinds())
	}
	w := sim.New(t, sim.Config{})
	early := &recorder{name: "early", kinds: sim.Kinds()}
	if err := w.Subscribe(early); err != nil {
		t.Fatal(err)
	}
	for _, k := range sim.Kinds() {
		if err := w.Create(objects[k]("1")); err != nil {
			t.Fatalf("%s: %v", k, err)
		}
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	// A consumer that subscribes late gets the initial lists at once.
	late := &recorder{name: "late", kinds: []string{"Node", "ConfigMap"}}
	if err := w.Subscribe(late); err != nil {
		t.Fatal(err)
	}
	for _, k := range sim.Kinds() {
		if err := w.Update(objects[k]("2")); err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		m := objects[k]("").(metav1.Object)
		if err := w.Delete(k, m.GetNamespace(), m.GetName()); err != nil {
			t.Fatalf("%s: %v", k, err)
		}
	}
	var want []string
	for _, op := range []string{"add", "synced"} {
		for _, k := range sim.Kinds() {
			if op == "synced" {
				want = append(want, "synced "+k)
			} else {
				m := objects[k]("").(metav1.Object)
				want = append(want, fmt.Sprintf("add %s %s/%s", k, m.GetNamespace(), m.GetName()))
			}
		}
	}
	for _, k := range sim.Kinds() {
		m := objects[k]("").(metav1.Object)
		want = append(want, fmt.Sprintf("update %s %s/%s", k, m.GetNamespace(), m.GetName()), fmt.Sprintf("delete %s %s/%s", k, m.GetNamespace(), m.GetName()))
	}
	if got := strings.Join(early.got, "\n"); got != strings.Join(want, "\n") {
		t.Fatalf("early consumer heard:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
	wantLate := "add Node /x\nadd ConfigMap default/x\nsynced Node\nsynced ConfigMap\nupdate Node /x\ndelete Node /x\nupdate ConfigMap default/x\ndelete ConfigMap default/x"
	if got := strings.Join(late.got, "\n"); got != wantLate {
		t.Fatalf("late consumer heard:\n%s\nwant:\n%s", got, wantLate)
	}
}

func meta(namespace, label string) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Namespace: namespace, Name: "x"}
	if label != "" {
		m.Labels = map[string]string{"v": label}
	}
	return m
}

// failing rejects every Pod, as a handler that cannot use an object would.
type failing struct{ recorder }

func (c *failing) OnAdd(string, kruntime.Object) error { return fmt.Errorf("no room") }

func TestHandlerErrorsAndNamedWritersAreTraced(t *testing.T) {
	w := sim.New(t, sim.Config{})
	if err := w.Subscribe(&failing{recorder{name: "picky", kinds: []string{"Pod"}}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	before := w.Trace.Len()
	// A controller writing from its own timer names itself with As.
	w.At(time.Second, func() {
		if err := w.As("cron", func() error { return w.Create(pod("a", "10.244.1.2", true)) }); err != nil {
			t.Error(err)
		}
	})
	w.RunUntil(time.Second)
	var got []string
	for _, e := range w.Trace.Events()[before:] {
		got = append(got, fmt.Sprintf("%v %s %s %s why=%s detail=%s err=%s", e.At, e.Kind, e.Op, e.Object, e.Why, e.Detail, e.Err))
	}
	want := []string{
		"1s object create Pod default/a why=cron detail= err=",
		"1s object add Pod default/a why= detail=to picky err=",
		"1s note  Pod default/a why= detail=picky err=no room",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("trace:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
