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

// TestIndexMatchesSelectors checks the label-pair index against
// labels.SelectorFromSet on every Service and pod, through updates that
// change selectors and labels and deletions.
func TestIndexMatchesSelectors(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	lbls := func() map[string]string {
		m := map[string]string{}
		for range r.IntN(3) {
			m[[]string{"app", "tier", "zone"}[r.IntN(3)]] = []string{"a", "b", ""}[r.IntN(3)]
		}
		return m
	}
	x := New()
	for step := range 2000 {
		name := fmt.Sprint(r.IntN(20))
		ns := []string{"ns", "other"}[r.IntN(2)]
		switch r.IntN(4) {
		case 0:
			s := svc(name, lbls())
			s.Namespace = ns
			if r.IntN(5) == 0 {
				s.Spec.Selector = nil
			}
			x.SetService(s)
		case 1:
			s := svc(name, nil)
			s.Namespace = ns
			x.DeleteService(s)
		case 2:
			p := pod("1", lbls(), true, "10.0.0.1")
			p.Namespace, p.Name = ns, name
			x.SetPod(p)
		case 3:
			p := pod("1", nil, true, "10.0.0.1")
			p.Namespace, p.Name = ns, name
			x.DeletePod(p)
		}
		for _, ns := range []string{"ns", "other"} {
			for _, p := range x.pods[ns] {
				var want []string
				for k, s := range x.services {
					if s.Namespace == ns && s.Spec.Selector != nil && labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(p.Labels)) {
						want = append(want, k)
					}
				}
				sort.Strings(want)
				if got := x.ServicesFor(ns, p.Labels); !reflect.DeepEqual(got, want) {
					t.Fatalf("step %d: ServicesFor(%s %v) = %v, want %v", step, ns, p.Labels, got, want)
				}
			}
		}
		for _, s := range x.services {
			var want []*v1.Pod
			if s.Spec.Selector != nil {
				for _, p := range x.pods[s.Namespace] {
					if labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(p.Labels)) {
						want = append(want, p)
					}
				}
				sort.Slice(want, func(i, j int) bool { return want[i].Name < want[j].Name })
			}
			if got := x.SelectedPods(s); !reflect.DeepEqual(got, want) {
				t.Fatalf("step %d: SelectedPods(%s/%s %v) = %d pods, want %d", step, s.Namespace, s.Name, s.Spec.Selector, len(got), len(want))
			}
		}
	}
}
