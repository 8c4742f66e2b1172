package ipvs_test

import (
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/proxysim/proxysim/fakes"
	"github.com/proxysim/proxysim/sim/ipvs"
	"github.com/proxysim/proxysim/sim/route"
)

func (w *pathWorld) trace(t *testing.T, from, to string) (route.Shares, route.Shares) {
	t.Helper()
	v, err := ipvs.ReadPath(w.dp, []string{"192.168.0.10"})
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(to)
	n, _ := strconv.Atoi(port)
	sh, masq, err := v.Route(route.Packet{Src: net.ParseIP(from), Dst: net.ParseIP(host), DPort: n, Protocol: "tcp"})
	if err != nil {
		t.Fatal(err)
	}
	return sh, masq
}

func expectRoute(t *testing.T, w *pathWorld, from, to, want, wantMasq string) {
	t.Helper()
	sh, masq := w.trace(t, from, to)
	if sh.String() != want || masq.String() != wantMasq {
		t.Errorf("%s -> %s: %s masqueraded %s; want %s masqueraded %s", from, to, sh, masq, want, wantMasq)
	}
}

func startLB(t *testing.T, cfg ipvs.Config, svc *v1.Service) *pathWorld {
	w := newPathWorld(t, cfg)
	if err := w.Create(svc); err != nil {
		t.Fatal(err)
	}
	if err := w.Create(webSlice()); err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	return w
}

// Where packets go in IPVS mode, entry point by entry point, for a Local
// LoadBalancer service whose source range leaves the node out.
func TestRouteThroughRulesAndIPVS(t *testing.T) {
	w := startLB(t, ipvs.Config{NodeIPs: []string{"192.168.0.10"}, ClusterCIDR: "10.244.0.0/16"}, lbLocal("198.51.100.0/24"))
	const both = "{10.244.1.2:8080: 1/2, 10.244.2.3:8080: 1/2}"
	for _, tc := range []struct{ name, from, to, want, masq string }{
		// ClusterIP: internal policy Cluster, pods keep their source,
		// others are masqueraded (the local-traffic detector).
		{"pod to ClusterIP", "10.244.3.4", "10.96.0.10:80", both, "{}"},
		{"off-cluster to ClusterIP", "10.0.0.5", "10.96.0.10:80", both, both},
		{"hairpin", "10.244.1.2", "10.96.0.10:80", both, "{10.244.1.2:8080: 1/2}"},
		{"ClusterIP, no such port", "10.244.3.4", "10.96.0.10:81", "{REJECT: 1}", "{}"},
		// NodePort, Local policy: only the local endpoint, source kept.
		{"node port from outside", "10.0.0.5", "192.168.0.10:30080", "{10.244.1.2:8080: 1}", "{}"},
		{"node port on localhost", "127.0.0.1", "127.0.0.1:30080", "{ACCEPT: 1}", "{}"},
		{"not a node port", "10.0.0.5", "192.168.0.10:30081", "{ACCEPT: 1}", "{}"},
		// LoadBalancer: the source range lets its clients in, drops
		// others, and the node itself (leaving from the LB IP) too.
		{"LB from the range", "198.51.100.7", "203.0.113.10:80", "{10.244.1.2:8080: 1}", "{}"},
		{"LB from outside the range", "198.51.101.7", "203.0.113.10:80", "{DROP: 1}", "{}"},
		{"LB from the node", "203.0.113.10", "203.0.113.10:80", "{DROP: 1}", "{}"},
		{"health check node port", "10.0.0.5", "192.168.0.10:30999", "{ACCEPT: 1}", "{}"},
	} {
		t.Run(tc.name, func(t *testing.T) { expectRoute(t, w, tc.from, tc.to, tc.want, tc.masq) })
	}
}

// A Cluster-policy service: node ports are masqueraded, the node reaches
// the LB IP when a range holds its IP, and no endpoints means REJECT.
func TestRouteClusterPolicyAndNoEndpoints(t *testing.T) {
	svc := lbLocal("192.168.0.0/24")
	svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyCluster
	svc.Spec.HealthCheckNodePort = 0
	w := startLB(t, ipvs.Config{NodeIPs: []string{"192.168.0.10"}, ClusterCIDR: "10.244.0.0/16"}, svc)
	const both = "{10.244.1.2:8080: 1/2, 10.244.2.3:8080: 1/2}"
	expectRoute(t, w, "10.0.0.5", "192.168.0.10:30080", both, both)
	expectRoute(t, w, "192.168.0.10", "192.168.0.10:30080", both, both)
	expectRoute(t, w, "203.0.113.10", "203.0.113.10:80", both, both)
	expectRoute(t, w, "192.168.0.7", "203.0.113.10:80", both, both)
	expectRoute(t, w, "10.0.0.5", "203.0.113.10:80", "{DROP: 1}", "{}")
	w.At(5*time.Second, func() {
		if err := w.Update(fakes.EndpointSlice("default", "web-1", "web", 8080)); err != nil {
			t.Error(err)
		}
	})
	w.RunUntil(6 * time.Second)
	expectRoute(t, w, "10.244.3.4", "10.96.0.10:80", "{REJECT: 1}", "{}")
}

// Shares follow the scheduler: wrr by weight, and sh as the kernel
// hashes, which the fake's own sh scheduler must agree with client by
// client.
func TestRouteSchedulers(t *testing.T) {
	w := startLB(t, ipvs.Config{NodeIPs: []string{"192.168.0.10"}, Scheduler: "wrr"}, fakes.Service("default", "web", "10.96.0.10", 80))
	vs := ipvs.VirtualServer{Address: "10.96.0.10", Protocol: "TCP", Port: 80, Scheduler: "wrr"}
	if err := w.h.UpdateRealServer(vs, ipvs.RealServer{Address: "10.244.2.3", Port: 8080, Weight: 3}); err != nil {
		t.Fatal(err)
	}
	expectRoute(t, w, "10.244.3.4", "10.96.0.10:80", "{10.244.1.2:8080: 1/4, 10.244.2.3:8080: 3/4}", "{}")

	w = startLB(t, ipvs.Config{NodeIPs: []string{"192.168.0.10"}, Scheduler: "sh"}, fakes.Service("default", "web", "10.96.0.10", 80))
	seen := map[string]bool{}
	for i := 1; i <= 40; i++ {
		client := fmt.Sprintf("10.244.7.%d", i)
		sh, _ := w.trace(t, client, "10.96.0.10:80")
		r := w.h.Connect("", "TCP", client+":40000", "10.96.0.10:80")
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		if want := "{" + r.Server + ": 1}"; sh.String() != want {
			t.Errorf("sh for %s: traced %s, the fake scheduled %s", client, sh, r.Server)
		}
		seen[r.Server] = true
	}
	if len(seen) != 2 {
		t.Errorf("40 clients all hashed to %v", seen)
	}
}

// A client with a live persistence template (ClientIP affinity) goes back
// to its server; others spread.
func TestRoutePersistence(t *testing.T) {
	svc := fakes.Service("default", "web", "10.96.0.10", 80)
	svc.Spec.SessionAffinity = v1.ServiceAffinityClientIP
	w := startLB(t, ipvs.Config{NodeIPs: []string{"192.168.0.10"}}, svc)
	r := w.h.Connect("c1", "TCP", "10.244.3.4:40000", "10.96.0.10:80")
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	expectRoute(t, w, "10.244.3.4", "10.96.0.10:80", "{"+r.Server+": 1}", "{}")
	expectRoute(t, w, "10.244.3.5", "10.96.0.10:80", "{10.244.1.2:8080: 1/2, 10.244.2.3:8080: 1/2}", "{}")
}
