package ingress

import (
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	networking "k8s.io/api/networking/v1"
	"k8s.io/utils/ptr"
)

func buildOf(ings []*networking.Ingress, svcs []*v1.Service, sls []*discovery.EndpointSlice) *Configuration {
	l := &listers{ingresses: map[string]*networking.Ingress{}, services: map[string]*v1.Service{}, slices: map[string]map[string]*discovery.EndpointSlice{}}
	for _, i := range ings {
		l.ingresses[key(i.Namespace, i.Name)] = i
	}
	for _, s := range svcs {
		l.services[key(s.Namespace, s.Name)] = s
	}
	for _, s := range sls {
		k := key(s.Namespace, s.Labels[discovery.LabelServiceName])
		if l.slices[k] == nil {
			l.slices[k] = map[string]*discovery.EndpointSlice{}
		}
		l.slices[k][s.Name] = s
	}
	cfg, _ := build(l, "nginx.ingress.kubernetes.io", func(string) int64 { return 0 })
	return cfg
}

// getConfiguration's shape: the default backend and the catch-all server
// always; a backend per service port named namespace-service-port
// (controller.go upstreamName), its endpoints the ready-or-unset ones on
// the slice port named like the service port (endpointslices.go
// getEndpointsFromSlices), each address once.
func TestBuild(t *testing.T) {
	s := slice("web", "web-1", map[string]bool{"10.0.0.1": true, "10.0.0.2": false})
	s.Endpoints = append(s.Endpoints, discovery.Endpoint{Addresses: []string{"10.0.0.3"}}) // ready unset: counts
	dup := slice("web", "web-2", map[string]bool{"10.0.0.1": true})
	other := slice("web", "web-3", map[string]bool{"10.0.0.9": true})
	other.Ports[0].Name = ptr.To("metrics")
	cfg := buildOf([]*networking.Ingress{ingressFor("web", "web.example", "/", "web", nil)}, []*v1.Service{service("web")}, []*discovery.EndpointSlice{s, dup, other})
	var names []string
	for _, b := range cfg.Backends {
		names = append(names, b.Name)
	}
	if !slices.Equal(names, []string{"default-web-80", DefaultBackendName}) {
		t.Errorf("backends %v", names)
	}
	if b, _ := cfg.Backend("default-web-80"); !slices.Equal(b.Endpoints, []string{"10.0.0.1:8080", "10.0.0.3:8080"}) {
		t.Errorf("endpoints %v", b.Endpoints)
	}
	var hosts []string
	for _, sv := range cfg.Servers {
		hosts = append(hosts, sv.Hostname)
	}
	if !slices.Equal(hosts, []string{CatchAllServer, "web.example"}) {
		t.Errorf("servers %v", hosts)
	}
	if be, ok := cfg.Route("nowhere.example", "/"); !ok || be != DefaultBackendName {
		t.Errorf("an unknown host goes to %q %v, want the catch-all's default backend", be, ok)
	}
}

// IsDynamicConfigurationEnough (pkg/util/ingress/ingress.go): equal once
// the backends are set aside.
func TestDynamicEnough(t *testing.T) {
	base := buildOf([]*networking.Ingress{ingressFor("web", "web.example", "/", "web", nil)}, []*v1.Service{service("web")},
		[]*discovery.EndpointSlice{slice("web", "web-1", map[string]bool{"10.0.0.1": true})})
	for _, tc := range []struct {
		name    string
		ing     *networking.Ingress
		ready   map[string]bool
		dynamic bool
	}{
		{"endpoints", ingressFor("web", "web.example", "/", "web", nil), map[string]bool{"10.0.0.1": true, "10.0.0.2": true}, true},
		{"backend annotation", ingressFor("web", "web.example", "/", "web", map[string]string{"nginx.ingress.kubernetes.io/affinity": "cookie"}), map[string]bool{"10.0.0.1": true}, true},
		{"location annotation", ingressFor("web", "web.example", "/", "web", map[string]string{"nginx.ingress.kubernetes.io/ssl-redirect": "false"}), map[string]bool{"10.0.0.1": true}, false},
		{"new path", ingressFor("web", "web.example", "/v2", "web", nil), map[string]bool{"10.0.0.1": true}, false},
		{"new host", ingressFor("web", "www.example", "/", "web", nil), map[string]bool{"10.0.0.1": true}, false},
	} {
		next := buildOf([]*networking.Ingress{tc.ing}, []*v1.Service{service("web")}, []*discovery.EndpointSlice{slice("web", "web-1", tc.ready)})
		if next.Equal(base) {
			t.Errorf("%s: no change seen", tc.name)
		}
		if got := DynamicEnough(next, base); got != tc.dynamic {
			t.Errorf("%s: dynamic enough %v, want %v", tc.name, got, tc.dynamic)
		}
		if (next.Hash() == base.Hash()) != next.Equal(base) {
			t.Errorf("%s: the hash does not follow the configuration", tc.name)
		}
	}
}

// The Service handler (store.go serviceHandler): an add is an event only
// for an ExternalName service.
func TestServiceEvents(t *testing.T) {
	w, c := world(t, nil)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	w.RunUntil(10 * time.Second)
	plain := service("plain")
	plain.Spec.ClusterIP = "10.96.0.11"
	w.Create(plain)
	w.RunUntil(15 * time.Second)
	if n := len(c.Syncs()); n != 1 {
		t.Errorf("a ClusterIP service's add synced: %v", c.Syncs())
	}
	ext := &v1.Service{ObjectMeta: plain.ObjectMeta, Spec: v1.ServiceSpec{Type: v1.ServiceTypeExternalName, ExternalName: "db.example"}}
	ext.Name = "ext"
	w.Create(ext)
	w.RunUntil(20 * time.Second)
	if got, want := c.Syncs(), durations("1s", "15s"); !slices.Equal(got, want) {
		t.Errorf("syncs %v, want %v", got, want)
	}
}

// The running-configuration comparison (pkg/apis/ingress/types_equals.go
// at controller-v1.15.1, Configuration.Equal): backends are compared as a
// set (compareBackends), each backend's endpoints as a set
// (Backend.Equal, compareEndpoints), servers position by position (the
// build sorts them), and BackendConfigChecksum last. The model keeps every
// list sorted, so the same cluster listed in any order builds an equal
// configuration with the same hash; the ConfigMap's checksum alone makes
// two otherwise equal ones differ, and not dynamically.
func TestConfigurationEqual(t *testing.T) {
	ings := []*networking.Ingress{ingressFor("web", "web.example", "/", "web", nil), ingressFor("api", "api.example", "/", "api", nil)}
	api := service("api")
	api.Spec.ClusterIP = "10.96.0.11"
	svcs := []*v1.Service{service("web"), api}
	sls := []*discovery.EndpointSlice{
		slice("web", "web-1", map[string]bool{"10.0.0.1": true, "10.0.0.2": true}),
		slice("web", "web-2", map[string]bool{"10.0.0.3": true}),
		slice("api", "api-1", map[string]bool{"10.0.1.1": true}),
	}
	a := buildOf(ings, svcs, sls)
	// The same objects, listed the other way round, the endpoints of a
	// slice reversed, and the web endpoints split over the slices
	// differently.
	b1 := slice("web", "web-1", map[string]bool{"10.0.0.3": true, "10.0.0.2": true})
	slices.Reverse(b1.Endpoints)
	b2 := slice("web", "web-2", map[string]bool{"10.0.0.1": true})
	b := buildOf([]*networking.Ingress{ings[1], ings[0]}, []*v1.Service{svcs[1], svcs[0]}, []*discovery.EndpointSlice{sls[2], b2, b1})
	if !a.Equal(b) || a.Hash() != b.Hash() {
		t.Errorf("the same cluster in another order builds another configuration:\n%+v\n%+v", a, b)
	}
	c := *b
	c.BackendConfigChecksum = "1"
	if a.Equal(&c) || a.Hash() == c.Hash() {
		t.Error("a ConfigMap checksum change is not seen")
	}
	if DynamicEnough(&c, a) {
		t.Error("a ConfigMap change counted as dynamic: it must reload")
	}
	d := buildOf(ings, svcs, []*discovery.EndpointSlice{sls[0], sls[1], slice("api", "api-1", map[string]bool{"10.0.1.2": true})})
	if a.Equal(d) || !DynamicEnough(d, a) {
		t.Errorf("another endpoint: equal %v, dynamic %v; want a change that needs no reload", a.Equal(d), DynamicEnough(d, a))
	}
}
