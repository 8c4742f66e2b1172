package sim

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/proxysim/proxysim/sim/runner"
)

func storeClient() (*objectStore, *fake.Clientset) {
	s := newObjectStore()
	return s, s.clientset(false, nil)
}

// testSlice is a slice with one ready endpoint per address. (The fakes
// package would be an import cycle from inside sim.)
func testSlice(namespace, name string, port int32, addresses ...string) *discovery.EndpointSlice {
	s := &discovery.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{discovery.LabelServiceName: "svc"}},
		AddressType: discovery.AddressTypeIPv4,
		Ports:       []discovery.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(port), Protocol: ptr.To(v1.ProtocolTCP)}},
	}
	for _, a := range addresses {
		s.Endpoints = append(s.Endpoints, discovery.Endpoint{Addresses: []string{a}, Conditions: discovery.EndpointConditions{Ready: ptr.To(true)}})
	}
	return s
}

func testService(namespace, name, clusterIP string) *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: v1.ServiceSpec{
			Type: v1.ServiceTypeClusterIP, ClusterIP: clusterIP, ClusterIPs: []string{clusterIP},
			Ports: []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}},
		},
	}
}

// The store behind the clientset behaves like client-go's tracker: copies in
// and out, the usual errors, and a List+Watch that misses nothing.
func TestObjectStoreThroughTheClientset(t *testing.T) {
	_, c := storeClient()
	ctx := context.Background()
	slices := c.DiscoveryV1().EndpointSlices("default")
	in := testSlice("default", "a", 80, "10.0.0.1")
	if _, err := slices.Create(ctx, in, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := slices.Create(ctx, in, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("second create: %v", err)
	}
	*in.Endpoints[0].Conditions.Ready = false // the caller's object is not the stored one
	got, err := slices.Get(ctx, "a", metav1.GetOptions{})
	if err != nil || !*got.Endpoints[0].Conditions.Ready {
		t.Fatalf("get: %v, %+v", err, got)
	}
	got.Endpoints[0].Addresses[0] = "10.9.9.9" // nor is what Get returns
	if again, _ := slices.Get(ctx, "a", metav1.GetOptions{}); again.Endpoints[0].Addresses[0] != "10.0.0.1" {
		t.Fatal("a Get result aliases the stored object")
	}
	if _, err := slices.Update(ctx, testSlice("default", "b", 80), metav1.UpdateOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("update of a missing object: %v", err)
	}
	if _, err := c.DiscoveryV1().EndpointSlices("other").Create(ctx, testSlice("default", "x", 80), metav1.CreateOptions{}); !apierrors.IsBadRequest(err) {
		t.Fatalf("namespace mismatch: %v", err)
	}

	list, err := slices.List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("list: %v, %d items", err, len(list.Items))
	}
	if _, err := slices.Create(ctx, testSlice("default", "b", 80), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A watch from the list's version first gets what was written since.
	w, err := slices.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	// A write's event is queued before the write returns.
	next := func() watch.Event {
		t.Helper()
		select {
		case ev := <-w.ResultChan():
			return ev
		default:
			t.Fatal("no watch event")
		}
		return watch.Event{}
	}
	if ev := next(); ev.Type != watch.Added || ev.Object.(*discovery.EndpointSlice).Name != "b" {
		t.Fatalf("replayed %v %v", ev.Type, ev.Object)
	}
	upd := testSlice("default", "a", 80, "10.0.0.2")
	if _, err := slices.Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	ev := next()
	if ev.Type != watch.Modified || ev.Object.(*discovery.EndpointSlice).Endpoints[0].Addresses[0] != "10.0.0.2" {
		t.Fatalf("update event %v %v", ev.Type, ev.Object)
	}
	ev.Object.(*discovery.EndpointSlice).Endpoints[0].Addresses[0] = "x" // a watcher's copy is its own
	if again, _ := slices.Get(ctx, "a", metav1.GetOptions{}); again.Endpoints[0].Addresses[0] != "10.0.0.2" {
		t.Fatal("a watch event aliases the stored object")
	}
	if err := slices.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if ev := next(); ev.Type != watch.Deleted {
		t.Fatalf("delete event %v", ev.Type)
	}
	w.Stop()
	if _, ok := <-w.ResultChan(); ok {
		t.Fatal("result channel open after Stop")
	}
	if err := slices.Delete(ctx, "a", metav1.DeleteOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("second delete: %v", err)
	}
}

// A watcher whose consumer falls behind keeps every event, in order.
func TestObjectStoreWatcherOverflowKeepsOrder(t *testing.T) {
	s, c := storeClient()
	w, err := c.DiscoveryV1().EndpointSlices("").Watch(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gvr := kindByName["EndpointSlice"].gvr
	const n = 3 * watchBuffer
	for i := 0; i < n; i++ {
		if err := s.put(gvr, testSlice("default", "a", int32(i+1)), "default", i > 0, nil); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < n; i++ {
		ev := <-w.ResultChan()
		if got := *ev.Object.(*discovery.EndpointSlice).Ports[0].Port; got != int32(i+1) {
			t.Fatalf("event %d carries port %d", i, got)
		}
	}
	w.Stop()
}

// Restarting the proxy stops the old informers' watches: the store keeps
// only the new ones.
func TestRestartLeavesOneWatchPerResource(t *testing.T) {
	w := New(t, Config{Runner: runner.Config{Generation: runner.Cooldown, MinInterval: time.Second, MaxInterval: time.Minute}})
	for i, ip := range []string{"10.96.0.1", "10.96.0.2"} {
		name := fmt.Sprintf("svc-%d", i)
		_ = w.Create(testService("default", name, ip))
		_ = w.Create(testSlice("default", name+"-abc", 8080, "10.244.0.1", "10.244.0.2"))
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := w.Restart(); err != nil {
			t.Fatal(err)
		}
	}
	for gvr, r := range w.store.res {
		w.store.mu.Lock()
		n := len(r.watchers)
		w.store.mu.Unlock()
		if n != 1 {
			t.Errorf("%v: %d watchers after restarts, want 1", gvr, n)
		}
	}
}

// mutator is a careless controller: it changes every Service it is handed.
type mutator struct{}

func (mutator) Name() string    { return "mutator" }
func (mutator) Kinds() []string { return []string{"Service"} }
func (mutator) OnAdd(_ string, obj runtime.Object) error {
	obj.(*v1.Service).Spec.ClusterIP = "10.0.0.66"
	return nil
}
func (m mutator) OnUpdate(_ string, _, obj runtime.Object) error { return m.OnAdd("Service", obj) }
func (mutator) OnDelete(string, runtime.Object) error            { return nil }
func (mutator) OnSynced(string) error                            { return nil }

// The proxy's informers hold the stored objects themselves; a controller's
// hold copies, so what a controller does to its own cannot reach the store
// or the proxy.
func TestOnlyTheProxySharesStoredObjects(t *testing.T) {
	w := New(t, Config{})
	if err := w.Subscribe(mutator{}); err != nil {
		t.Fatal(err)
	}
	if err := w.Create(testService("default", "a", "10.96.0.1")); err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	if err := w.Create(testService("default", "b", "10.96.0.2")); err != nil {
		t.Fatal(err)
	}
	svc := kindByName["Service"]
	for _, name := range []string{"a", "b"} {
		stored, ok := w.store.stored(svc.gvr, "default", name)
		if !ok {
			t.Fatalf("%s not stored", name)
		}
		if ip := stored.(*v1.Service).Spec.ClusterIP; ip == "10.0.0.66" {
			t.Errorf("%s: the controller changed the stored object", name)
		}
		// Initial lists are copies (once per start, not worth sharing);
		// watch events are not.
		if o, _ := w.psub.inst.get(svc, "default", name); name == "b" && o != stored {
			t.Errorf("%s: the proxy's cache holds a copy, not the stored object", name)
		}
		for _, s := range w.subs {
			if s.c.Name() != "mutator" {
				continue
			}
			if o, _ := s.inst.get(svc, "default", name); o == stored {
				t.Errorf("%s: the controller's cache holds the stored object", name)
			}
		}
	}
}
