package endpoints

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/proxysim/proxysim/sim"
)

func pod(i int, ready bool) *v1.Pod {
	st := v1.ConditionFalse
	if ready {
		st = v1.ConditionTrue
	}
	ip := fmt.Sprintf("10.1.%d.%d", i/250, i%250+1)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("p-%04d", i), Labels: map[string]string{"app": "web"}},
		Spec:       v1.PodSpec{NodeName: "node-a"},
		Status: v1.PodStatus{PodIP: ip, PodIPs: []v1.PodIP{{IP: ip}},
			Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: st}}},
	}
}

// 1,100 pods (900 ready, 200 not): the Endpoints keeps 1,000 addresses, the
// 900 ready ones first, and says it truncated; once under capacity the
// annotation goes.
func TestTruncatesOverCapacity(t *testing.T) {
	w := sim.New(t, sim.Config{})
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: v1.ServiceSpec{ClusterIP: "10.96.0.10", Selector: map[string]string{"app": "web"},
			Ports: []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}}},
	}
	if err := w.Create(svc); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 1100; i++ {
		if err := w.Create(pod(i, i < 900)); err != nil {
			t.Fatal(err)
		}
	}
	c := New(w, Config{})
	if err := w.Subscribe(c); err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	w.Advance(time.Second)
	count := func() (int, int, string) {
		o, err := w.Get("Endpoints", [2]string{"default", "web"})
		if err != nil {
			t.Fatal(err)
		}
		ep := o.(*v1.Endpoints)
		r, n := 0, 0
		for _, s := range ep.Subsets {
			r += len(s.Addresses)
			n += len(s.NotReadyAddresses)
		}
		return r, n, ep.Annotations[v1.EndpointsOverCapacity]
	}
	if r, n, a := count(); r != 900 || n != 100 || a != "truncated" {
		t.Fatalf("ready %d, not ready %d, annotation %q; want 900, 100, truncated", r, n, a)
	}
	for i := 1000; i < 1100; i++ {
		if err := w.Delete("Pod", "default", fmt.Sprintf("p-%04d", i)); err != nil {
			t.Fatal(err)
		}
	}
	w.Advance(time.Second)
	if r, n, a := count(); r != 900 || n != 100 || a != "" {
		t.Fatalf("ready %d, not ready %d, annotation %q; want 900, 100, none", r, n, a)
	}
}
