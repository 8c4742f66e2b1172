package ingress

import (
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	networking "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/proxysim/proxysim/sim"
)

func service(name string) *v1.Service {
	return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: v1.ServiceSpec{ClusterIP: "10.96.0.10", Ports: []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}}}}
}

func slice(svc, name string, ready map[string]bool) *discovery.EndpointSlice {
	s := &discovery.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: name, Labels: map[string]string{discovery.LabelServiceName: svc}},
		AddressType: discovery.AddressTypeIPv4,
		Ports:       []discovery.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(v1.ProtocolTCP)}},
	}
	ips := make([]string, 0, len(ready))
	for ip := range ready {
		ips = append(ips, ip)
	}
	slices.Sort(ips)
	for _, ip := range ips {
		s.Endpoints = append(s.Endpoints, discovery.Endpoint{Addresses: []string{ip}, Conditions: discovery.EndpointConditions{Ready: ptr.To(ready[ip])}})
	}
	return s
}

func ingressFor(name, host, path, svc string, anns map[string]string) *networking.Ingress {
	return &networking.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Annotations: anns},
		Spec: networking.IngressSpec{IngressClassName: ptr.To("nginx"), Rules: []networking.IngressRule{{Host: host,
			IngressRuleValue: networking.IngressRuleValue{HTTP: &networking.HTTPIngressRuleValue{Paths: []networking.HTTPIngressPath{{
				Path: path, PathType: ptr.To(networking.PathTypePrefix),
				Backend: networking.IngressBackend{Service: &networking.IngressServiceBackend{Name: svc, Port: networking.ServiceBackendPort{Number: 80}}},
			}}}}}}},
	}
}

func class() *networking.IngressClass {
	return &networking.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "nginx"}, Spec: networking.IngressClassSpec{Controller: "k8s.io/ingress-nginx"}}
}

// world is a world with a web service of two ready endpoints behind one
// ingress, and the controller (cfg changed by tune), not started.
func world(t *testing.T, tune func(*Config)) (*sim.World, *Controller) {
	t.Helper()
	w := sim.New(t, sim.Config{ResyncPeriod: -1})
	cfg := DefaultConfig()
	if tune != nil {
		tune(&cfg)
	}
	c, err := New(w, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []sim.Object{service("web"), slice("web", "web-1", map[string]bool{"10.0.0.1": true, "10.0.0.2": true}),
		class(), ingressFor("web", "web.example", "/", "web", nil)} {
		if err := w.Create(o); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Subscribe(c); err != nil {
		t.Fatal(err)
	}
	return w, c
}

func durations(ds ...string) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, s := range ds {
		out[i], _ = time.ParseDuration(s)
	}
	return out
}

// The first sync: the Ingress informer starts 1 s after the others
// (store.go Informer.Run), the initial sync reloads at once (the bucket
// starts full), sleeps 1 s (controller.go syncIngress, first sync) and
// posts the backends; the Lua worker, restarted by the reload, takes them
// on its next whole-second tick (balancer.lua sync_backends).
func TestFirstSync(t *testing.T) {
	w, c := world(t, nil)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	w.RunUntil(2500 * time.Millisecond)
	if got, want := c.Reloads(), durations("1s"); !slices.Equal(got, want) {
		t.Errorf("reloads at %v, want %v", got, want)
	}
	if got, want := c.DynamicUpdates(), durations("2s"); !slices.Equal(got, want) {
		t.Errorf("posts at %v, want %v", got, want)
	}
	if eps, ok := c.Routes("web.example", "/"); !ok || len(eps) != 0 {
		t.Errorf("before the Lua pick-up: routes %v %v, want the location with no endpoints yet", eps, ok)
	}
	w.RunUntil(3 * time.Second)
	if eps, _ := c.Routes("web.example", "/"); !slices.Equal(eps, []string{"10.0.0.1:8080", "10.0.0.2:8080"}) {
		t.Errorf("routes %v", eps)
	}
	if d, ok := c.Latency("default/web-1"); !ok || d != 3*time.Second {
		t.Errorf("latency %v %v, want 3s", d, ok)
	}
	m := c.Metrics()
	if m.Reloads != 1 || !m.LastReloadSuccessful || m.ConfigHash == 0 || m.LastReloadSuccessAt != time.Second {
		t.Errorf("metrics %+v", m)
	}
}

// An endpoint change is backends-only: no reload, one post
// (IsDynamicConfigurationEnough), routed at the Lua worker's next tick.
func TestEndpointChangeIsDynamic(t *testing.T) {
	w, c := world(t, nil)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	w.RunUntil(10 * time.Second)
	w.Update(slice("web", "web-1", map[string]bool{"10.0.0.1": true, "10.0.0.2": true, "10.0.0.3": true}))
	w.RunUntil(12 * time.Second)
	if n := c.Metrics().Reloads; n != 1 {
		t.Errorf("%d reloads, want only the first", n)
	}
	if got, want := c.DynamicUpdates(), durations("2s", "10s"); !slices.Equal(got, want) {
		t.Errorf("posts at %v, want %v", got, want)
	}
	if d, ok := c.Latency("default/web-1"); !ok || d != time.Second {
		t.Errorf("latency %v %v, want 1s", d, ok)
	}
	if eps, _ := c.Routes("web.example", "/"); len(eps) != 3 {
		t.Errorf("routes %v", eps)
	}
}

// A new path changes a server: a reload (IsDynamicConfigurationEnough is
// false), and a backend-level annotation does not.
func TestReloadDecision(t *testing.T) {
	w, c := world(t, nil)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	w.RunUntil(10 * time.Second)
	w.Create(ingressFor("api", "web.example", "/api", "web", nil))
	w.RunUntil(20 * time.Second)
	if got, want := c.Reloads(), durations("1s", "10s"); !slices.Equal(got, want) {
		t.Errorf("reloads at %v, want %v", got, want)
	}
	w.Update(ingressFor("api", "web.example", "/api", "web", map[string]string{"nginx.ingress.kubernetes.io/load-balance": "ewma"}))
	w.RunUntil(30 * time.Second)
	if n := len(c.Reloads()); n != 2 {
		t.Errorf("a backend annotation reloaded: %v", c.Reloads())
	}
	w.Update(ingressFor("api", "web.example", "/api", "web", map[string]string{"nginx.ingress.kubernetes.io/load-balance": "ewma", "nginx.ingress.kubernetes.io/rewrite-target": "/"}))
	w.RunUntil(40 * time.Second)
	if got, want := c.Reloads(), durations("1s", "10s", "30s"); !slices.Equal(got, want) {
		t.Errorf("a location annotation: reloads at %v, want %v", got, want)
	}
	w.Update(ingressFor("api", "web.example", "/api", "web", map[string]string{"nginx.ingress.kubernetes.io/load-balance": "ewma", "nginx.ingress.kubernetes.io/rewrite-target": "/", "example.com/owner": "me"}))
	w.RunUntil(50 * time.Second)
	if n := len(c.Reloads()); n != 3 {
		t.Errorf("a foreign annotation reloaded: %v", c.Reloads())
	}
}

// The token bucket (syncIngress: flowcontrol, 0.3/s, burst 1) paces syncs
// 3.33 s apart; the queue skips every event older than the last sync's
// start (internal/task/queue.go worker).
func TestTokenBucketAndSkip(t *testing.T) {
	w, c := world(t, nil)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	w.RunUntil(2 * time.Second)
	for i := range 20 {
		w.At(2*time.Second+time.Duration(i)*100*time.Millisecond, func() {
			w.Update(ingressFor("web", "web.example", "/", "web", map[string]string{"nginx.ingress.kubernetes.io/proxy-body-size": string(rune('a' + i))}))
		})
	}
	w.RunUntil(30 * time.Second)
	// 1s: initial; 2s: the first change waits for the token at 1s + 1/0.3 s
	// (as a float32, which flowcontrol takes: 3.3333332 s);
	// the other 19 arrive while it waits, and survive the skip (they are
	// younger than its dequeue); the next waits again, and skips the rest.
	want := durations("1s", "4.3333332s", "7.666666401s")
	if got := c.Syncs(); !slices.Equal(got, want) {
		t.Errorf("syncs at %v, want %v", got, want)
	}
	if c.Metrics().Skipped == 0 {
		t.Error("nothing skipped")
	}
}

// A failed reload counts an error, zeroes the hash and the success flag,
// and the item comes back with timestamp 0 after the workqueue's backoff
// (queue.go worker: AddRateLimited; 5 ms for a first failure); the retry
// waits for the next token.
func TestFailedReloadIsRetried(t *testing.T) {
	w, c := world(t, func(cfg *Config) { cfg.ReloadCost = 200 * time.Millisecond })
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	w.RunUntil(10 * time.Second)
	c.FailReloads(1)
	w.Create(ingressFor("api", "web.example", "/api", "web", nil))
	w.RunUntil(10*time.Second + 300*time.Millisecond)
	m := c.Metrics()
	if m.ReloadErrors != 1 || m.LastReloadSuccessful || m.ConfigHash != 0 {
		t.Errorf("after the failure: %+v", m)
	}
	w.RunUntil(20 * time.Second)
	// Retry requeued at 10.2s + 5ms, then the bucket: 10s + 3.3333332s.
	if got, want := c.Reloads(), durations("1s", "10s", "13.3333332s"); !slices.Equal(got, want) {
		t.Errorf("reloads at %v, want %v", got, want)
	}
	m = c.Metrics()
	if m.Reloads != 2 || m.ReloadErrors != 1 || !m.LastReloadSuccessful || m.ConfigHash != c.Running().Hash() || m.LastReloadSuccessAt != 13533333200*time.Nanosecond {
		t.Errorf("after the retry: %+v", m)
	}
	if _, ok := c.Running().Route("web.example", "/api"); !ok {
		t.Error("the new path is not in the running configuration")
	}
}

// A failed backend post is retried 1 s, 1.3 s, 1.69 s ... later (syncIngress's
// wait.Backoff without its jitter); past 1 + retries attempts the sync
// fails and is requeued.
func TestDynamicBackoff(t *testing.T) {
	w, c := world(t, func(cfg *Config) { cfg.DynamicConfigurationRetries = 2 })
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	w.RunUntil(10 * time.Second)
	c.FailPosts(2)
	w.Update(slice("web", "web-1", map[string]bool{"10.0.0.1": true}))
	w.RunUntil(20 * time.Second)
	if got, want := c.DynamicUpdates(), durations("2s", "12.3s"); !slices.Equal(got, want) {
		t.Errorf("posts at %v, want %v", got, want)
	}
	c.FailPosts(3)
	w.Update(slice("web", "web-1", map[string]bool{"10.0.0.2": true}))
	w.RunUntil(40 * time.Second)
	// Attempts at 20s, 21s, 22.3s fail; requeued 5 ms later; the token is
	// there (last take 20s) at 23.3333332s, where the post works.
	if got, want := c.DynamicUpdates(), durations("2s", "12.3s", "23.3333332s"); !slices.Equal(got, want) {
		t.Errorf("posts at %v, want %v", got, want)
	}
	if m := c.Metrics(); m.DynamicErrors != 5 || m.Reloads != 1 {
		t.Errorf("metrics %+v", m)
	}
}

// ingress-nginx's ring at controller-v1.15.1: NewNGINXController
// (internal/ingress/controller/nginx.go) makes updateCh with
// channels.NewRingChannel(1024); the store's handlers (store.go New: the
// Ingress, EndpointSlice, Service, Secret and ConfigMap handlers) write
// every event into updateCh.In() without blocking; the main loop
// (nginx.go Start) reads updateCh.Out() only after the store has run and
// nginx has started. eapache/channels' RingChannel (ring_channel.go,
// ringBuffer) drops the oldest buffered item when a new one arrives past
// the size. So before the main loop reads (the first second, and the
// store's initial lists), the ring keeps only the newest RingSize events.
func TestRingDropsTheOldest(t *testing.T) {
	w, c := world(t, func(cfg *Config) { cfg.RingSize = 4 })
	for i := range 6 {
		s := slice("web", "extra-"+string(rune('a'+i)), map[string]bool{"10.0.1.1": true})
		if err := w.Create(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	w.RunUntil(5 * time.Second)
	// Service (ClusterIP: no event), 7 slices, the IngressClass, then the
	// ingress at 1s: 9 events, 4 kept.
	if m := c.Metrics(); m.RingDropped != 5 {
		t.Errorf("dropped %d, want 5 of 9", m.RingDropped)
	}
	if got := c.Syncs(); !slices.Equal(got, durations("1s")) {
		t.Errorf("syncs %v: the ring's leftovers should be skipped behind the initial sync", got)
	}
}

// The ring on its own (eapache/channels ring_channel.go ringBuffer): past
// its size each new event pushes out the oldest one, and what is left
// comes out in the order it went in.
func TestRingKeepsTheNewestInOrder(t *testing.T) {
	r := ring{size: 3}
	var dropped []string
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		if d, ok := r.push(event{key: k}); ok {
			dropped = append(dropped, d.key)
		}
	}
	if !slices.Equal(dropped, []string{"a", "b"}) || r.dropped != 2 {
		t.Errorf("dropped %v (%d), want the two oldest", dropped, r.dropped)
	}
	var kept []string
	for _, ev := range r.drain() {
		kept = append(kept, ev.key)
	}
	if !slices.Equal(kept, []string{"c", "d", "e"}) {
		t.Errorf("kept %v, want the newest three in order", kept)
	}
	if left := r.drain(); len(left) != 0 {
		t.Errorf("a drained ring still holds %v", left)
	}
}

// The store's filters at controller-v1.15.1 (internal/ingress/controller/
// store/store.go New): the Ingress handler drops an ingress whose class is
// not this controller's (GetIngressClass); the EndpointSlice handler's
// UpdateFunc sends an event only when the Endpoints field changed, so a
// ports-only change is none; handleCfgMapEvent sends a ConfigurationEvent
// only for the controller's own ConfigMap (or its TCP/UDP ones,
// changeTriggerUpdate), which the main loop (nginx.go Start) enqueues as
// the non-skippable "configmap-change", and the new checksum reloads.
func TestStoreFilters(t *testing.T) {
	w, c := world(t, nil)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	w.RunUntil(10 * time.Second)
	other := ingressFor("other", "other.example", "/", "web", nil)
	other.Spec.IngressClassName = ptr.To("traefik")
	w.Create(other)
	s := slice("web", "web-1", map[string]bool{"10.0.0.1": true, "10.0.0.2": true})
	s.Ports[0].Port = ptr.To[int32](9090)
	w.Update(s)
	w.Create(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "app-settings"}, Data: map[string]string{"proxy-body-size": "8m"}})
	w.RunUntil(20 * time.Second)
	if n := len(c.Syncs()); n != 1 {
		t.Errorf("syncs %v: filtered events caused syncs", c.Syncs())
	}
	w.Create(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ingress-nginx", Name: "ingress-nginx-controller"}, Data: map[string]string{"proxy-body-size": "8m"}})
	w.RunUntil(30 * time.Second)
	if got, want := c.Reloads(), durations("1s", "20s"); !slices.Equal(got, want) {
		t.Errorf("reloads %v, want %v", got, want)
	}
}

// The Lua worker takes a post only when its whole-second stamp is newer
// than the one it holds (balancer.lua sync_backends, configuration.lua
// ngx.time()): a second post in the same second, after the worker took the
// first, waits for a later post.
func TestTwoPostsInOneSecond(t *testing.T) {
	w, c := world(t, func(cfg *Config) {
		cfg.SyncRateLimit = 100
		cfg.ReloadCost = 500 * time.Millisecond // the worker ticks at x.5s
	})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	w.RunUntil(10200 * time.Millisecond)
	w.Update(slice("web", "web-1", map[string]bool{"10.0.0.1": true}))
	w.RunUntil(10800 * time.Millisecond)
	w.Update(slice("web", "web-1", map[string]bool{"10.0.0.2": true}))
	w.RunUntil(15 * time.Second)
	if got, want := c.DynamicUpdates(), durations("2.5s", "10.2s", "10.8s"); !slices.Equal(got, want) {
		t.Fatalf("posts at %v, want %v", got, want)
	}
	if eps, _ := c.Routes("web.example", "/"); !slices.Equal(eps, []string{"10.0.0.1:8080"}) {
		t.Errorf("routes %v: the worker should still hold the first post of second 10", eps)
	}
	if d, ok := c.Latency("default/web-1"); ok {
		t.Errorf("the second change is routed (%v), though no newer post came", d)
	}
	w.RunUntil(20 * time.Second)
	w.Update(slice("web", "web-1", map[string]bool{"10.0.0.2": true, "10.0.0.3": true}))
	w.RunUntil(21 * time.Second)
	if d, ok := c.Latency("default/web-1"); !ok || d != 500*time.Millisecond {
		t.Errorf("latency %v %v, want 500ms", d, ok)
	}
}

// The class rules of store.go GetIngressClass.
func TestIngressClassRules(t *testing.T) {
	for _, tc := range []struct {
		name         string
		tune         func(*networking.Ingress)
		withoutClass bool
		admitted     bool
	}{
		{"class name of ours", func(*networking.Ingress) {}, false, true},
		{"class name of another controller", func(i *networking.Ingress) { i.Spec.IngressClassName = ptr.To("traefik") }, false, false},
		{"annotation nginx", func(i *networking.Ingress) {
			i.Spec.IngressClassName = nil
			i.Annotations = map[string]string{"kubernetes.io/ingress.class": "nginx"}
		}, false, true},
		{"annotation other", func(i *networking.Ingress) {
			i.Spec.IngressClassName = nil
			i.Annotations = map[string]string{"kubernetes.io/ingress.class": "haproxy"}
		}, true, false},
		{"no class", func(i *networking.Ingress) { i.Spec.IngressClassName = nil }, false, false},
		{"no class, watched without class", func(i *networking.Ingress) { i.Spec.IngressClassName = nil }, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, c := world(t, func(cfg *Config) { cfg.WatchIngressWithoutClass = tc.withoutClass })
			other := &networking.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "traefik"}, Spec: networking.IngressClassSpec{Controller: "traefik.io/ingress-controller"}}
			if err := w.Create(other); err != nil {
				t.Fatal(err)
			}
			ing := ingressFor("api", "api.example", "/", "web", nil)
			tc.tune(ing)
			if err := w.Create(ing); err != nil {
				t.Fatal(err)
			}
			if err := w.Start(); err != nil {
				t.Fatal(err)
			}
			w.RunUntil(5 * time.Second)
			if _, ok := c.Running().Route("api.example", "/"); ok != tc.admitted {
				// The catch-all answers any host: look for the server itself.
				t.Logf("route found %v", ok)
			}
			served := false
			for _, s := range c.Running().Servers {
				served = served || s.Hostname == "api.example"
			}
			if served != tc.admitted {
				t.Errorf("api.example served %v, want %v", served, tc.admitted)
			}
		})
	}
}

// The Ingress informer starts 1 s after the others (store.go Informer.Run):
// what happened to Ingresses before then reaches the controller as one add
// per Ingress, listed at 1s.
func TestIngressInformerStartsLate(t *testing.T) {
	w, c := world(t, nil)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	w.RunUntil(300 * time.Millisecond)
	w.Create(ingressFor("api", "api.example", "/", "web", nil))
	w.RunUntil(600 * time.Millisecond)
	w.Update(ingressFor("api", "api.example", "/v2", "web", nil))
	w.RunUntil(5 * time.Second)
	if got := c.Syncs(); !slices.Equal(got, durations("1s")) {
		t.Errorf("syncs %v, want only the initial one", got)
	}
	if _, ok := c.Running().Route("api.example", "/v2"); !ok {
		t.Error("the initial sync missed the Ingress as it was at 1s")
	}
	if c.Metrics().Skipped != 4 {
		t.Errorf("skipped %d, want the 4 start-up events (slice, class, two ingresses)", c.Metrics().Skipped)
	}
}

// The metrics as the collector sets them at controller-v1.15.1
// (internal/ingress/metric/collectors/controller.go): IncReloadErrorCount
// and ConfigSuccess(hash, false) on a failed reload, which zero the
// success gauge and config_hash but leave the last success timestamp;
// ConfigSuccess(hash, true) and IncReloadCount on a good one. syncIngress
// (internal/ingress/controller/controller.go) also calls
// ConfigSuccess(hash, true) when a sync finds the running configuration
// unchanged after a failed reload: here the change is undone before its
// retry, so the retry reloads nothing and the flag comes back anyway.
func TestMetricsFollowTheCollector(t *testing.T) {
	w, c := world(t, func(cfg *Config) { cfg.ReloadCost = 200 * time.Millisecond })
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	w.RunUntil(10 * time.Second)
	good := c.Metrics()
	if good.Reloads != 1 || good.ReloadErrors != 0 || !good.LastReloadSuccessful || good.ConfigHash != c.Running().Hash() || good.LastReloadSuccessAt != 1200*time.Millisecond {
		t.Fatalf("after the first reload: %+v", good)
	}
	c.FailReloads(1)
	api := ingressFor("api", "web.example", "/api", "web", nil)
	w.Create(api)
	w.RunUntil(10*time.Second + 300*time.Millisecond)
	m := c.Metrics()
	if m.Reloads != 1 || m.ReloadErrors != 1 || m.LastReloadSuccessful || m.ConfigHash != 0 || m.LastReloadSuccessAt != good.LastReloadSuccessAt {
		t.Errorf("after the failed reload: %+v", m)
	}
	w.Delete("Ingress", "default", "api")
	w.RunUntil(30 * time.Second)
	m = c.Metrics()
	if got := c.Reloads(); !slices.Equal(got, durations("1s", "10s")) {
		t.Errorf("reloads at %v: the undone change should need none", got)
	}
	if m.Reloads != 1 || m.ReloadErrors != 1 || !m.LastReloadSuccessful || m.ConfigHash != good.ConfigHash {
		t.Errorf("after the unchanged sync: %+v, want success and the running hash back", m)
	}
	if m.LastReloadSuccessAt <= good.LastReloadSuccessAt {
		t.Errorf("the success timestamp %v did not move on ConfigSuccess(hash, true)", m.LastReloadSuccessAt)
	}
}
