package sim

import (
	"context"
	"testing"
	"time"

	discovery "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/proxysim/proxysim/fakes"
	"github.com/proxysim/proxysim/sim/runner"
)

func storeClient() (*objectStore, *fake.Clientset) {
	s, c := newObjectStore(), fake.NewSimpleClientset()
	s.install(c)
	return s, c
}

// The store behind the clientset behaves like client-go's tracker: copies in
// and out, the usual errors, and a List+Watch that misses nothing.
func TestObjectStoreThroughTheClientset(t *testing.T) {
	_, c := storeClient()
	ctx := context.Background()
	slices := c.DiscoveryV1().EndpointSlices("default")
	in := fakes.EndpointSlice("default", "a", "svc", 80, "10.0.0.1")
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
	if _, err := slices.Update(ctx, fakes.EndpointSlice("default", "b", "svc", 80), metav1.UpdateOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("update of a missing object: %v", err)
	}
	if _, err := c.DiscoveryV1().EndpointSlices("other").Create(ctx, fakes.EndpointSlice("default", "x", "svc", 80), metav1.CreateOptions{}); !apierrors.IsBadRequest(err) {
		t.Fatalf("namespace mismatch: %v", err)
	}

	list, err := slices.List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("list: %v, %d items", err, len(list.Items))
	}
	if _, err := slices.Create(ctx, fakes.EndpointSlice("default", "b", "svc", 80), metav1.CreateOptions{}); err != nil {
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
	upd := fakes.EndpointSlice("default", "a", "svc", 80, "10.0.0.2")
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
	gvr := kindResources["EndpointSlice"]
	const n = 3 * watchBuffer
	for i := 0; i < n; i++ {
		if _, err := s.put(gvr, fakes.EndpointSlice("default", "a", "svc", int32(i+1)), "default", i > 0, nil); err != nil {
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
	svcs, slices := fakes.Cluster(2, 2)
	for i := range svcs {
		_ = w.Create(svcs[i])
		_ = w.Create(slices[i])
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
