package endpointslice

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/proxysim/proxysim/sim"
)

func service(name string, sel map[string]string) *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: v1.ServiceSpec{
			ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"}, Selector: sel,
			Ports: []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromString("http")}},
		},
	}
}

func pod(name, ip, node string, ready bool, at time.Time) *v1.Pod {
	st := v1.ConditionFalse
	if ready {
		st = v1.ConditionTrue
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: map[string]string{"app": "web"}},
		Spec:       v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "c", Ports: []v1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: v1.ProtocolTCP}}}}},
		Status: v1.PodStatus{
			PodIP: ip, PodIPs: []v1.PodIP{{IP: ip}},
			Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: st, LastTransitionTime: metav1.NewTime(at)}},
		},
	}
}

func node(name string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.LabelTopologyZone: "z1"}}}
}

func count(sl []*discovery.EndpointSlice) (n int) {
	for _, s := range sl {
		n += len(s.Endpoints)
	}
	return n
}

// A Service with 250 pods gets three slices of at most 100; a new pod fills
// the slice with room instead of creating a fourth; the annotation carries
// the new pod's Ready transition.
func TestPackingAndTrigger(t *testing.T) {
	w := sim.New(t, sim.Config{})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(w.Create(node("node-a")))
	must(w.Create(service("web", map[string]string{"app": "web"})))
	t0 := w.Clock.Now()
	for i := 0; i < 250; i++ {
		must(w.Create(pod(fmt.Sprintf("web-%03d", i), fmt.Sprintf("10.0.%d.%d", i/200, i%200+1), "node-a", true, t0)))
	}
	c := New(w, Config{})
	must(w.Subscribe(c))
	must(w.Start())
	w.Advance(2 * time.Second)
	sl := c.Slices("default/web")
	if len(sl) != 3 || count(sl) != 250 {
		t.Fatalf("got %d slices with %d endpoints, want 3 with 250", len(sl), count(sl))
	}
	for _, s := range sl {
		if len(s.Endpoints) > 100 {
			t.Errorf("%s has %d endpoints", s.Name, len(s.Endpoints))
		}
		if len(s.Ports) != 1 || *s.Ports[0].Port != 8080 {
			t.Errorf("%s ports %v", s.Name, s.Ports)
		}
	}
	w.Advance(10 * time.Second)
	at := w.Clock.Now()
	must(w.Create(pod("web-new", "10.0.9.9", "node-a", true, at)))
	w.Advance(time.Second)
	sl = c.Slices("default/web")
	if len(sl) != 3 || count(sl) != 251 {
		t.Fatalf("after one more pod: %d slices with %d endpoints, want 3 with 251", len(sl), count(sl))
	}
	found := false
	for _, s := range sl {
		for _, e := range s.Endpoints {
			if e.TargetRef.Name == "web-new" {
				found = true
				if got := s.Annotations[v1.EndpointsLastChangeTriggerTime]; got != at.UTC().Format(time.RFC3339Nano) {
					t.Errorf("trigger time %q, want %v", got, at)
				}
			}
		}
	}
	if !found {
		t.Fatal("web-new not in any slice")
	}
}

// A pod on a node the controller does not know is left out, and the sync
// retried with backoff; once the node exists, the retry adds it.
func TestUnknownNodeRetries(t *testing.T) {
	w := sim.New(t, sim.Config{})
	w.Create(service("web", map[string]string{"app": "web"}))
	w.Create(pod("web-0", "10.0.0.1", "node-x", true, w.Clock.Now()))
	c := New(w, Config{})
	w.Subscribe(c)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	w.Advance(100 * time.Millisecond)
	if n := count(c.Slices("default/web")); n != 0 {
		t.Fatalf("%d endpoints before the node exists", n)
	}
	w.Create(node("node-x"))
	w.Advance(500 * time.Millisecond)
	if n := count(c.Slices("default/web")); n != 0 {
		t.Fatalf("a node event requeued the Service: %d endpoints", n)
	}
	w.Advance(4 * time.Second)
	if n := count(c.Slices("default/web")); n != 1 {
		t.Fatalf("%d endpoints after the backoff retry, want 1", n)
	}
}

// kube-proxy's sample counts from the annotation (the Ready transition in
// whole seconds), the true latency from the instant of the transition.
func TestProgrammingLatency(t *testing.T) {
	w := sim.New(t, sim.Config{})
	w.Create(node("node-a"))
	w.Create(service("web", map[string]string{"app": "web"}))
	w.Create(pod("web-0", "10.0.0.1", "node-a", false, w.Clock.Now()))
	c := New(w, Config{BatchPeriod: time.Second})
	w.Subscribe(c)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	w.Advance(10300 * time.Millisecond)
	p := pod("web-0", "10.0.0.1", "node-a", true, w.Clock.Now().Truncate(time.Second))
	cur, _ := w.Get("Pod", [2]string{"default", "web-0"})
	p.ResourceVersion = cur.(*v1.Pod).ResourceVersion
	if err := w.Update(p); err != nil {
		t.Fatal(err)
	}
	w.Advance(5 * time.Second)
	lat, ok := w.PodLatency("default/web-0")
	if !ok {
		t.Fatal("no pod latency")
	}
	// batch 1 s, then a sync (default runner: min interval 0, no cost).
	if lat != time.Second {
		t.Errorf("pod latency %v, want 1s", lat)
	}
	var got []time.Duration
	for _, s := range w.ProgrammingSamples() {
		got = append(got, s.Value)
	}
	if len(got) != 1 || got[0] != 1300*time.Millisecond {
		t.Errorf("samples %v, want one of 1.3s", got)
	}
}
