package endpoints

import (
	"fmt"
	"slices"
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

// Which pods the Endpoints controller publishes, and where (kubernetes
// v1.36 pkg/controller/endpoint/endpoints_controller.go syncService, which
// filters through k8s.io/endpointslice util ShouldPodBeInEndpoints with the
// Service's publishNotReadyAddresses, and addEndpointSubset): a terminal
// pod (Succeeded or Failed) is never published, ready or not; a pod being
// deleted only under publishNotReadyAddresses; a not-ready pod goes to
// notReadyAddresses, except under publishNotReadyAddresses, where every
// published pod is an address.
func TestPublishNotReadyAndTerminalPods(t *testing.T) {
	ready, notReady := pod(1, true), pod(2, false)
	succeeded, failed := pod(3, true), pod(4, false)
	succeeded.Status.Phase = v1.PodSucceeded
	failed.Status.Phase = v1.PodFailed
	deleting := pod(5, true)
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Unix(100, 0)}
	notReadyDeleting := pod(6, false)
	notReadyDeleting.DeletionTimestamp = &metav1.Time{Time: time.Unix(100, 0)}
	pods := []*v1.Pod{ready, notReady, succeeded, failed, deleting, notReadyDeleting}
	for _, tc := range []struct {
		publish           bool
		addresses, unread []string
	}{
		{false, []string{ready.Status.PodIP}, []string{notReady.Status.PodIP}},
		{true, []string{ready.Status.PodIP, notReady.Status.PodIP, deleting.Status.PodIP, notReadyDeleting.Status.PodIP}, nil},
	} {
		svc := &v1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
			Spec: v1.ServiceSpec{ClusterIP: "10.96.0.10", Selector: map[string]string{"app": "web"}, PublishNotReadyAddresses: tc.publish,
				Ports: []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}}},
		}
		var got, gotNR []string
		for _, s := range Subsets(svc, pods) {
			for _, a := range s.Addresses {
				got = append(got, a.IP)
			}
			for _, a := range s.NotReadyAddresses {
				gotNR = append(gotNR, a.IP)
			}
		}
		if !slices.Equal(got, tc.addresses) || !slices.Equal(gotNR, tc.unread) {
			t.Errorf("publishNotReadyAddresses %v: addresses %v, not ready %v; want %v and %v", tc.publish, got, gotNR, tc.addresses, tc.unread)
		}
	}
}

// The same through the controller in a world: a ready pod that completes
// (phase Succeeded, still Ready in its last status) leaves the Endpoints of
// a Service that publishes not-ready addresses; a failed one too.
func TestTerminalPodLeavesEndpoints(t *testing.T) {
	w := sim.New(t, sim.Config{})
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: v1.ServiceSpec{ClusterIP: "10.96.0.10", Selector: map[string]string{"app": "web"}, PublishNotReadyAddresses: true,
			Ports: []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}}},
	}
	if err := w.Create(svc); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := w.Create(pod(i, true)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Subscribe(New(w, Config{})); err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	w.Advance(time.Second)
	ips := func() []string {
		o, err := w.Get("Endpoints", [2]string{"default", "web"})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, s := range o.(*v1.Endpoints).Subsets {
			for _, a := range s.Addresses {
				out = append(out, a.IP)
			}
			for _, a := range s.NotReadyAddresses {
				out = append(out, "not-ready "+a.IP)
			}
		}
		return out
	}
	if got := ips(); !slices.Equal(got, []string{"10.1.0.1", "10.1.0.2", "10.1.0.3"}) {
		t.Fatalf("before: %v", got)
	}
	done := pod(0, true)
	done.Status.Phase = v1.PodSucceeded
	crashed := pod(2, false)
	crashed.Status.Phase = v1.PodFailed
	for _, p := range []*v1.Pod{done, crashed} {
		if err := w.Update(p); err != nil {
			t.Fatal(err)
		}
	}
	w.Advance(time.Second)
	if got := ips(); !slices.Equal(got, []string{"10.1.0.2"}) {
		t.Errorf("after p-0000 succeeded and p-0002 failed: %v, want only 10.1.0.2", got)
	}
}
