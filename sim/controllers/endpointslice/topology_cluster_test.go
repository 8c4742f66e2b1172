package endpointslice_test

import (
	"fmt"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/proxysim/proxysim/fakes"
	"github.com/proxysim/proxysim/sim"
	"github.com/proxysim/proxysim/sim/clustergen"
	"github.com/proxysim/proxysim/sim/controllers/endpointslice"
	"github.com/proxysim/proxysim/sim/ipvs"
	"github.com/proxysim/proxysim/sim/runner"
	"github.com/proxysim/proxysim/sim/vclock"
)

func zonedNode(name, zone, cpu string, ready bool) *v1.Node {
	st := v1.ConditionFalse
	if ready {
		st = v1.ConditionTrue
	}
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.LabelTopologyZone: zone}},
		Status: v1.NodeStatus{
			Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)},
			Conditions:  []v1.NodeCondition{{Type: v1.NodeReady, Status: st}},
		},
	}
}

func zonedService(name, ip string) *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)},
		Spec: v1.ServiceSpec{
			ClusterIP: ip, ClusterIPs: []string{ip}, IPFamilies: []v1.IPFamily{v1.IPv4Protocol},
			Selector: map[string]string{"app": name},
			Ports:    []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}},
		},
	}
}

func zonedPod(app, node, ip string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: app + "-" + ip, Labels: map[string]string{"app": app}, UID: types.UID("uid-" + ip)},
		Spec:       v1.PodSpec{NodeName: node},
		Status: v1.PodStatus{PodIP: ip, PodIPs: []v1.PodIP{{IP: ip}},
			Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}},
	}
}

// programmed lists, per virtual server address, the real servers an IPVS
// fake holds with a weight (the ones traffic can reach).
func programmed(t *testing.T, h ipvs.Handle) map[string][]string {
	t.Helper()
	vss, err := h.VirtualServers()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, vs := range vss {
		rss, err := h.RealServers(vs)
		if err != nil {
			t.Fatal(err)
		}
		for _, rs := range rss {
			if rs.Weight > 0 {
				out[vs.Address] = append(out[vs.Address], rs.Address)
			}
		}
		sort.Strings(out[vs.Address])
	}
	return out
}

// Two nodes' kube-proxies in different zones program different endpoints
// of the same Services because of the hints the controller writes: web
// (trafficDistribution PreferClose) its own zone's, api (topology-mode
// Auto) its zone's share by CPU. When a third node makes zone-a two
// thirds of the CPU, the topology worker finds api overloaded and requeues
// it: one zone-b endpoint is re-hinted for zone-a. A change of allocatable
// CPU alone is not a topology event; the node going NotReady again is, and
// the shares go back.
func TestNodesInDifferentZonesProgramTheirHintedEndpoints(t *testing.T) {
	clk := vclock.New(vclock.Epoch)
	dpA, hA, _, _ := fakes.Dataplane("6.1.0", clk)
	dpB, hB, _, _ := fakes.Dataplane("6.1.0", clk)
	rc := runner.Config{Generation: runner.Cooldown, MaxInterval: time.Hour}
	w := sim.New(t, sim.Config{Runner: rc, Clock: clk, NodeName: "node-a", Zone: "zone-a", NewBackend: ipvs.Backend(ipvs.Config{}, dpA)})
	if _, err := w.AddNode(sim.NodeSpec{Name: "node-b", Zone: "zone-b", Runner: rc, NewBackend: ipvs.Backend(ipvs.Config{}, dpB)}); err != nil {
		t.Fatal(err)
	}
	c := endpointslice.New(w, endpointslice.Config{})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(w.Subscribe(c))
	must(w.Create(zonedNode("node-a", "zone-a", "4", true)))
	must(w.Create(zonedNode("node-b", "zone-b", "4", true)))
	must(w.Create(zonedNode("node-a2", "zone-a", "4", false)))
	must(w.Start())

	web := zonedService("web", "10.96.0.10")
	web.Spec.TrafficDistribution = ptr.To(v1.ServiceTrafficDistributionPreferClose)
	api := zonedService("api", "10.96.0.20")
	api.Annotations = map[string]string{v1.AnnotationTopologyMode: "Auto"}
	w.At(time.Second, func() {
		must(w.Create(web))
		must(w.Create(api))
		for i, n := range []string{"node-a", "node-a", "node-b", "node-b"} {
			must(w.Create(zonedPod("web", n, fmt.Sprintf("10.244.1.%d", i+1))))
		}
		for i, n := range []string{"node-a", "node-a", "node-a", "node-b", "node-b", "node-b"} {
			must(w.Create(zonedPod("api", n, fmt.Sprintf("10.244.2.%d", i+1))))
		}
	})
	check := func(at string, h ipvs.Handle, want map[string]string) {
		t.Helper()
		got := programmed(t, h)
		for vip, eps := range want {
			if g := strings.Join(got[vip], " "); g != eps {
				t.Errorf("%s: %s programs %s, want %s", at, vip, g, eps)
			}
		}
	}
	w.RunUntil(3 * time.Second)
	check("3s node-a", hA, map[string]string{"10.96.0.10": "10.244.1.1 10.244.1.2", "10.96.0.20": "10.244.2.1 10.244.2.2 10.244.2.3"})
	check("3s node-b", hB, map[string]string{"10.96.0.10": "10.244.1.3 10.244.1.4", "10.96.0.20": "10.244.2.4 10.244.2.5 10.244.2.6"})
	if got := c.Topology().Hinted("default/api")["IPv4"]; got["zone-a"] != 3 || got["zone-b"] != 3 {
		t.Fatalf("api's hinted zones %v, want 3 and 3", got)
	}

	// node-a2 Ready: zone-a has 8 of 12 CPUs; api's 3 for zone-a is
	// under ceil(6 × 2/3 / 1.2) = 4.
	w.At(4*time.Second, func() { must(w.Update(zonedNode("node-a2", "zone-a", "4", true))) })
	w.RunUntil(6 * time.Second)
	a, b := programmed(t, hA)["10.96.0.20"], programmed(t, hB)["10.96.0.20"]
	if len(a) != 4 || len(b) != 2 || strings.Join(a[:3], " ") != "10.244.2.1 10.244.2.2 10.244.2.3" {
		t.Fatalf("6s: api on node-a %v, node-b %v; want zone-a's 3 and one of zone-b's, and the other 2", a, b)
	}
	check("6s node-a", hA, map[string]string{"10.96.0.10": "10.244.1.1 10.244.1.2"})

	// CPU alone: no topology event, no requeue.
	syncs := c.Syncs()
	w.At(7*time.Second, func() { must(w.Update(zonedNode("node-a2", "zone-a", "40", true))) })
	w.RunUntil(8 * time.Second)
	if c.Syncs() != syncs {
		t.Fatalf("a change of allocatable CPU alone synced %d Services", c.Syncs()-syncs)
	}
	// NotReady: back to half and half; api is overloaded in zone-b
	// (2 < ceil(6 × 1/2 / 1.2) = 3) and requeued.
	w.At(9*time.Second, func() { must(w.Update(zonedNode("node-a2", "zone-a", "40", false))) })
	w.RunUntil(11 * time.Second)
	check("11s node-a", hA, map[string]string{"10.96.0.20": "10.244.2.1 10.244.2.2 10.244.2.3"})
	check("11s node-b", hB, map[string]string{"10.96.0.20": "10.244.2.4 10.244.2.5 10.244.2.6"})
	if w.Err() != nil {
		t.Fatal(w.Err())
	}
}

// Auto hints with donations between three zones of unequal CPU come out
// byte-identical on every run, GOMAXPROCS 1 or 2: the zones, slices and
// endpoints are walked in a fixed order where upstream ranges over maps.
func TestAutoHintsAreDeterministic(t *testing.T) {
	run := func() string {
		w := sim.New(t, sim.Config{})
		c := endpointslice.New(w, endpointslice.Config{MaxEndpointsPerSlice: 7})
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		must(w.Subscribe(c))
		must(w.Create(zonedNode("node-a", "zone-a", "7", true)))
		must(w.Create(zonedNode("node-b", "zone-b", "2", true)))
		must(w.Create(zonedNode("node-c", "zone-c", "3500m", true)))
		must(w.Start())
		api := zonedService("api", "10.96.0.20")
		api.Annotations = map[string]string{v1.DeprecatedAnnotationTopologyAwareHints: "auto"}
		w.At(time.Second, func() {
			must(w.Create(api))
			for i := 0; i < 20; i++ {
				must(w.Create(zonedPod("api", []string{"node-a", "node-b", "node-c", "node-b"}[i%4], fmt.Sprintf("10.244.2.%d", i+1))))
			}
		})
		w.RunUntil(5 * time.Second)
		var b strings.Builder
		donated := 0
		for _, s := range c.Slices("default/api") {
			fmt.Fprintf(&b, "%s:", s.Name)
			for _, e := range s.Endpoints {
				if e.Hints == nil {
					t.Fatalf("%s has an endpoint without hints", s.Name)
				}
				fmt.Fprintf(&b, " %s/%s->%s", e.Addresses[0], *e.Zone, e.Hints.ForZones[0].Name)
				if e.Hints.ForZones[0].Name != *e.Zone {
					donated++
				}
			}
			b.WriteString("\n")
		}
		if donated == 0 {
			t.Fatalf("no endpoint was donated to another zone:\n%s", b.String())
		}
		fmt.Fprintf(&b, "%v", c.Topology().Hinted("default/api"))
		return b.String()
	}
	first := run()
	for i := 0; i < 6; i++ {
		prev := runtime.GOMAXPROCS(1 + i%2)
		got := run()
		runtime.GOMAXPROCS(prev)
		if got != first {
			t.Fatalf("run %d differs:\n%s\nfirst:\n%s", i+2, got, first)
		}
	}
	t.Log(first)
}

// A generated cluster's Nodes are Ready with 4 CPUs each, so topology-mode
// Auto shares a generated Service's endpoints by the nodes per zone: 6
// nodes in 3 zones (2 each), 12 pods, 4 hinted for each zone.
func TestAutoHintsInAGeneratedCluster(t *testing.T) {
	c, err := clustergen.Generate(clustergen.Spec{Seed: 1, Services: 1, EndpointsPerService: clustergen.Mix[int]{12: 1}, Nodes: 6, Zones: 3, Pods: true})
	if err != nil {
		t.Fatal(err)
	}
	c.Services[0].Annotations = map[string]string{v1.AnnotationTopologyMode: "Auto"}
	w := sim.New(t, sim.Config{})
	ctl := endpointslice.New(w, endpointslice.Config{})
	if err := w.Subscribe(ctl); err != nil {
		t.Fatal(err)
	}
	for _, o := range c.Objects() {
		if _, ok := o.(*v1.Service); !ok {
			if err := w.Create(o); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	// Created after the topology worker has read the nodes (see the
	// package doc on the startup order).
	w.At(time.Second, func() {
		if err := w.Create(c.Services[0]); err != nil {
			t.Fatal(err)
		}
	})
	w.RunUntil(3 * time.Second)
	svc := c.Services[0].Namespace + "/" + c.Services[0].Name
	if got := ctl.Topology().Hinted(svc)["IPv4"]; len(got) != 3 || got["zone-a"] != 4 || got["zone-b"] != 4 || got["zone-c"] != 4 {
		t.Fatalf("hinted %v, want 4 per zone", got)
	}
	for _, s := range ctl.Slices(svc) {
		for _, e := range s.Endpoints {
			if e.Hints == nil || e.Zone == nil || e.Hints.ForZones[0].Name != *e.Zone {
				t.Fatalf("endpoint %v in zone %v hinted %v", e.Addresses, ptr.Deref(e.Zone, ""), e.Hints)
			}
		}
	}
}
