package podindex

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"sort"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

func svc(name string, sel map[string]string) *v1.Service {
	return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: v1.ServiceSpec{Selector: sel}}
}

func pod(rv string, lbls map[string]string, ready bool, ip string) *v1.Pod {
	st := v1.ConditionFalse
	if ready {
		st = v1.ConditionTrue
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", ResourceVersion: rv, Labels: lbls},
		Status:     v1.PodStatus{PodIPs: []v1.PodIP{{IP: ip}}, Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: st}}},
	}
}

func TestServicesToSync(t *testing.T) {
	x := New()
	x.SetService(svc("a", map[string]string{"app": "a"}))
	x.SetService(svc("ab", map[string]string{"tier": "x"}))
	x.SetService(svc("b", map[string]string{"app": "b"}))
	x.SetService(svc("none", nil))
	other := svc("a", map[string]string{"app": "a"})
	other.Namespace = "elsewhere"
	x.SetService(other)

	a := map[string]string{"app": "a", "tier": "x"}
	b := map[string]string{"app": "b", "tier": "x"}
	for _, c := range []struct {
		what     string
		old, new *v1.Pod
		want     []string
	}{
		{"a resync changes nothing", pod("1", a, true, "10.0.0.1"), pod("1", a, false, "10.0.0.2"), nil},
		{"an update endpoints do not show", pod("1", a, true, "10.0.0.1"), pod("2", a, true, "10.0.0.1"), nil},
		{"readiness: the Services selecting it now", pod("1", a, true, "10.0.0.1"), pod("2", a, false, "10.0.0.1"), []string{"ns/a", "ns/ab"}},
		{"a new IP: the same", pod("1", a, true, "10.0.0.1"), pod("2", a, true, "10.0.0.9"), []string{"ns/a", "ns/ab"}},
		{"labels only: those that gained or lost it", pod("1", a, true, "10.0.0.1"), pod("2", b, true, "10.0.0.1"), []string{"ns/a", "ns/b"}},
		{"labels and readiness: every old and new one", pod("1", a, true, "10.0.0.1"), pod("2", b, false, "10.0.0.1"), []string{"ns/a", "ns/ab", "ns/b"}},
	} {
		if got := x.ServicesToSync(c.old, c.new); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %v, want %v", c.what, got, c.want)
		}
	}

	// a pod being deleted counts as changed on every update
	old, now := pod("1", a, true, "10.0.0.1"), pod("2", a, true, "10.0.0.1")
	ts := metav1.Unix(0, 0)
	now.DeletionTimestamp = &ts
	if got := x.ServicesToSync(old, now); !reflect.DeepEqual(got, []string{"ns/a", "ns/ab"}) {
		t.Errorf("deletion: %v", got)
	}
}

func TestSelectedPodsAndDeletes(t *testing.T) {
	x := New()
	s := svc("a", map[string]string{"app": "a"})
	k := x.SetService(s)
	for _, n := range []string{"z", "m", "b"} {
		p := pod("1", map[string]string{"app": "a"}, true, "10.0.0.1")
		p.Name = n
		x.SetPod(p)
	}
	stray := pod("1", map[string]string{"app": "other"}, true, "10.0.0.2")
	stray.Name = "stray"
	x.SetPod(stray)
	var names []string
	for _, p := range x.SelectedPods(s) {
		names = append(names, p.Name)
	}
	if !reflect.DeepEqual(names, []string{"b", "m", "z"}) {
		t.Errorf("selected %v", names)
	}
	if got := x.SelectedPods(svc("none", nil)); got != nil {
		t.Errorf("a Service without a selector selects %v", got)
	}
	gone := pod("1", nil, true, "")
	gone.Name = "m"
	x.DeletePod(gone)
	if got := len(x.SelectedPods(s)); got != 2 {
		t.Errorf("after a delete, %d selected", got)
	}
	if x.DeleteService(s) != k {
		t.Error("keys differ")
	}
	if _, ok := x.Service(k); ok {
		t.Error("the deleted Service is still known")
	}
}

// TestIndexAnswersAsTheScanDoes holds the label index to the scan it
// replaces (every Service's selector against every pod, as
// labels.SelectorFromSet matches): random Services and Pods in two
// namespaces, added, relabelled, reselected and deleted, both questions
// asked after every change.
func TestIndexAnswersAsTheScanDoes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	keys, vals := []string{"app", "tier", "zone"}, []string{"a", "b", "c"}
	randLabels := func(empty bool) map[string]string {
		m := map[string]string{}
		for _, k := range keys {
			if rng.IntN(2) == 0 {
				m[k] = vals[rng.IntN(len(vals))]
			}
		}
		if len(m) == 0 && !empty {
			return nil
		}
		return m
	}
	x := New()
	services := map[string]*v1.Service{}
	pods := map[string]*v1.Pod{}
	namespaces := []string{"ns", "other"}
	for step := range 3000 {
		ns := namespaces[rng.IntN(2)]
		name := fmt.Sprint("o", rng.IntN(15))
		switch rng.IntN(4) {
		case 0:
			s := svc(name, randLabels(rng.IntN(5) == 0))
			s.Namespace = ns
			services[Key(ns, name)] = s
			x.SetService(s)
		case 1:
			if s := services[Key(ns, name)]; s != nil {
				delete(services, Key(ns, name))
				x.DeleteService(s)
			}
		case 2:
			p := pod(fmt.Sprint(step), randLabels(false), true, "10.0.0.1")
			p.Namespace, p.Name = ns, name
			pods[Key(ns, name)] = p
			x.SetPod(p)
		case 3:
			if p := pods[Key(ns, name)]; p != nil {
				delete(pods, Key(ns, name))
				x.DeletePod(p)
			}
		}
		for _, p := range pods {
			var want []string
			for k, s := range services {
				if s.Namespace == p.Namespace && s.Spec.Selector != nil && labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(p.Labels)) {
					want = append(want, k)
				}
			}
			sort.Strings(want)
			if got := x.ServicesFor(p.Namespace, p.Labels); !reflect.DeepEqual(got, want) {
				t.Fatalf("step %d: ServicesFor(%s %v) = %v, want %v", step, p.Name, p.Labels, got, want)
			}
		}
		for _, s := range services {
			var want []string
			for _, p := range pods {
				if p.Namespace == s.Namespace && s.Spec.Selector != nil && labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(p.Labels)) {
					want = append(want, p.Name)
				}
			}
			sort.Strings(want)
			var got []string
			for _, p := range x.SelectedPods(s) {
				got = append(got, p.Name)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("step %d: SelectedPods(%s %v) = %v, want %v", step, s.Name, s.Spec.Selector, got, want)
			}
		}
	}
}

// A generated cluster's shape: n Services, each selecting its own 3 Pods
// (cluster.generate with pods: true labels them so), in one namespace.
func benchIndex(n int) (*Index, []*v1.Service, []*v1.Pod) {
	x := New()
	var svcs []*v1.Service
	var pods []*v1.Pod
	for i := range n {
		app := fmt.Sprint("svc-", i)
		s := svc(app, map[string]string{"app": app})
		x.SetService(s)
		svcs = append(svcs, s)
		for k := range 3 {
			p := pod("1", map[string]string{"app": app, "pod-template-hash": "v1"}, true, "10.0.0.1")
			p.Name = fmt.Sprint(app, "-", k)
			x.SetPod(p)
			pods = append(pods, p)
		}
	}
	return x, svcs, pods
}

// Every Pod's Services, then every Service's Pods, as the EndpointSlice
// controller asks them when it starts on a 5,000-Service cluster.
func BenchmarkStartOn5000Services(b *testing.B) {
	x, svcs, pods := benchIndex(5000)
	b.ResetTimer()
	for range b.N {
		for _, p := range pods {
			x.ServicesFor(p.Namespace, p.Labels)
		}
		for _, s := range svcs {
			x.SelectedPods(s)
		}
	}
}
