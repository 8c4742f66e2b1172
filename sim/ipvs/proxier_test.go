package ipvs_test

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/proxysim/proxysim/fakes"
	"github.com/proxysim/proxysim/sim"
	"github.com/proxysim/proxysim/sim/ipvs"
	"github.com/proxysim/proxysim/sim/runner"
	"github.com/proxysim/proxysim/sim/vclock"
)

func world(t *testing.T, kernel string, cfg ipvs.Config) (*sim.World, *fakes.IPVS, *fakes.Sysctls, *fakes.Dummy) {
	clk := vclock.New(vclock.Epoch)
	dp, h, s, d := fakes.Dataplane(kernel, clk)
	w := sim.New(t, sim.Config{
		Runner:     runner.Config{Generation: runner.Cooldown, MinInterval: time.Second, MaxInterval: 30 * time.Second},
		Clock:      clk,
		NewBackend: ipvs.Backend(cfg, dp),
	})
	return w, h, s, d
}

func TestStartupSysctlsByKernel(t *testing.T) {
	for _, tc := range []struct {
		kernel    string
		strictARP bool
		reuse     int
		arp       [2]int
	}{
		{"4.19.0", false, 0, [2]int{0, 0}},
		{"5.4.0", true, 0, [2]int{1, 2}},
		{"6.1.0-28-cloud-amd64", false, 1, [2]int{0, 0}},
	} {
		_, _, s, _ := world(t, tc.kernel, ipvs.Config{StrictARP: tc.strictARP})
		get := func(n string) int { v, _ := s.Get(n); return v }
		if get(ipvs.SysctlConnReuseMode) != tc.reuse {
			t.Errorf("%s: conn_reuse_mode = %d, want %d", tc.kernel, get(ipvs.SysctlConnReuseMode), tc.reuse)
		}
		if a := [2]int{get(ipvs.SysctlArpIgnore), get(ipvs.SysctlArpAnnounce)}; a != tc.arp {
			t.Errorf("%s strictARP=%v: arp_ignore/announce = %v, want %v", tc.kernel, tc.strictARP, a, tc.arp)
		}
		for _, n := range []string{ipvs.SysctlConntrack, ipvs.SysctlExpireNodestConn, ipvs.SysctlExpireQuiescentTemplate, ipvs.SysctlIPForward} {
			if get(n) != 1 {
				t.Errorf("%s: %s = %d, want 1", tc.kernel, n, get(n))
			}
		}
	}
}

func TestProgramsClusterIPNodePortAndDrainsGracefully(t *testing.T) {
	w, h, _, d := world(t, "6.1.0", ipvs.Config{NodeIPs: []string{"192.168.0.10"}})
	svc := fakes.Service("default", "web", "10.96.0.10", 80)
	svc.Spec.Type = v1.ServiceTypeNodePort
	svc.Spec.Ports[0].NodePort = 30080
	if err := w.Create(svc); err != nil {
		t.Fatal(err)
	}
	if err := w.Create(fakes.EndpointSlice("default", "web-1", "web", 8080, "10.244.1.2", "10.244.2.3")); err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	table, _ := ipvs.Table(h)
	want := `Prot LocalAddress:Port Scheduler Flags
  -> RemoteAddress:Port           Forward Weight ActiveConn InActConn
TCP  10.96.0.10:80 rr
  -> 10.244.1.2:8080              Masq    1      0          0
  -> 10.244.2.3:8080              Masq    1      0          0
TCP  192.168.0.10:30080 rr
  -> 10.244.1.2:8080              Masq    1      0          0
  -> 10.244.2.3:8080              Masq    1      0          0
`
	if table != want {
		t.Fatalf("table:\n%s\nwant:\n%s", table, want)
	}
	if a, _ := d.Addresses(ipvs.DummyDevice); strings.Join(a, ",") != "10.96.0.10" {
		t.Fatalf("kube-ipvs0 addresses %v", a)
	}
	// One backend has a live connection and then leaves: weight 0 until it drains.
	if err := h.SetConnections("TCP 10.96.0.10:80", "10.244.2.3:8080", 1, 0); err != nil {
		t.Fatal(err)
	}
	w.At(10*time.Second, func() {
		if err := w.Update(fakes.EndpointSlice("default", "web-1", "web", 8080, "10.244.1.2")); err != nil {
			t.Error(err)
		}
	})
	w.RunUntil(11 * time.Second)
	table, _ = ipvs.Table(h)
	if !strings.Contains(table, "10.244.2.3:8080              Masq    0      1") {
		t.Fatalf("draining server should be weight 0:\n%s", table)
	}
	if strings.Count(table, "10.244.2.3") != 1 {
		t.Fatalf("the idle NodePort copy should be gone at once:\n%s", table)
	}
	_ = h.SetConnections("TCP 10.96.0.10:80", "10.244.2.3:8080", 0, 0)
	w.RunUntil(2 * time.Minute)
	table, _ = ipvs.Table(h)
	if strings.Contains(table, "10.244.2.3") {
		t.Fatalf("drained server not deleted by the 1-minute check:\n%s", table)
	}
}

// kube-proxy's IPVS proxier logs a failed operation and reports success;
// with SyncFailsOnError the sync fails, as in the iptables proxier.
func TestFailedOperationFailsTheSyncOnlyWhenAsked(t *testing.T) {
	for _, failSync := range []bool{false, true} {
		faults := &ipvs.Faults{}
		clk := vclock.New(vclock.Epoch)
		dp, _, _, _ := fakes.Dataplane("6.1.0", clk)
		w := sim.New(t, sim.Config{
			Runner:     runner.Config{Generation: runner.Cooldown, MinInterval: time.Second, MaxInterval: 30 * time.Second},
			Clock:      clk,
			NewBackend: ipvs.Backend(ipvs.Config{SyncFailsOnError: failSync}, ipvs.WithFaults(dp, faults)),
		})
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		faults.FailNext(1)
		w.At(time.Second, func() {
			if err := w.Create(fakes.Service("default", "a", "10.96.0.1", 80)); err != nil {
				t.Error(err)
			}
		})
		w.RunUntil(5 * time.Second)
		var opFailed, runFailed bool
		for _, e := range w.Trace.Events() {
			opFailed = opFailed || (e.Kind == "dataplane" && strings.Contains(e.Err, "injected"))
			runFailed = runFailed || (e.Kind == "run.end" && strings.Contains(e.Err, "injected"))
		}
		if !opFailed || runFailed != failSync {
			t.Fatalf("SyncFailsOnError=%v: operation failed %v, run failed %v\n%s", failSync, opFailed, runFailed, w.Trace.JSONL())
		}
		if a, _ := dp.Addresses.Addresses(ipvs.DummyDevice); len(a) != 0 {
			t.Fatalf("address bound although its virtual server failed: %v", a)
		}
	}
}

// The scheduler and ClientIP affinity reach every virtual server. With a
// Local internal policy and no local endpoint, a service that has no
// external entry point uses no cluster endpoints either (kube-proxy's rule):
// its virtual server is empty.
func TestSchedulerAffinityAndLocalFallback(t *testing.T) {
	w, h, _, _ := world(t, "6.1.0", ipvs.Config{Scheduler: "wrr"})
	svc := fakes.Service("default", "web", "10.96.0.10", 80)
	svc.Spec.SessionAffinity = v1.ServiceAffinityClientIP
	svc.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To(int32(300))}}
	local := v1.ServiceInternalTrafficPolicyLocal
	svc.Spec.InternalTrafficPolicy = &local
	if err := w.Create(svc); err != nil {
		t.Fatal(err)
	}
	// On no node: not local.
	if err := w.Create(fakes.EndpointSlice("default", "web-1", "web", 8080, "10.244.9.9")); err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	table, _ := ipvs.Table(h)
	want := `Prot LocalAddress:Port Scheduler Flags
  -> RemoteAddress:Port           Forward Weight ActiveConn InActConn
TCP  10.96.0.10:80 wrr persistent 300
`
	if table != want {
		t.Fatalf("table:\n%s\nwant:\n%s", table, want)
	}
}

// An external IP that is one of the node's own addresses gets its virtual
// server but is not bound to kube-ipvs0 (kube-proxy's shouldBind), on the
// first (full) sync and on a later partial one; another external IP is.
func TestExternalIPOnTheNodeIsNotBound(t *testing.T) {
	w, h, _, d := world(t, "6.1.0", ipvs.Config{NodeIPs: []string{"192.168.0.10", "fd00::a"}})
	svc := fakes.Service("default", "web", "10.96.0.10", 80)
	svc.Spec.ExternalIPs = []string{"192.168.0.10"}
	if err := w.Create(svc); err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	if a, _ := d.Addresses(ipvs.DummyDevice); strings.Join(a, ",") != "10.96.0.10" {
		t.Fatalf("full sync: kube-ipvs0 addresses %v, want only the cluster IP", a)
	}
	w.At(time.Second, func() {
		svc := svc.DeepCopy()
		svc.Spec.ExternalIPs = []string{"192.168.0.10", "203.0.113.7"}
		if err := w.Update(svc); err != nil {
			t.Error(err)
		}
	})
	w.RunUntil(2 * time.Second)
	if a, _ := d.Addresses(ipvs.DummyDevice); strings.Join(a, ",") != "10.96.0.10,203.0.113.7" {
		t.Fatalf("partial sync: kube-ipvs0 addresses %v", a)
	}
	table, _ := ipvs.Table(h)
	if !strings.Contains(table, "TCP  192.168.0.10:80 rr") || !strings.Contains(table, "TCP  203.0.113.7:80 rr") {
		t.Fatalf("both external IPs need a virtual server:\n%s", table)
	}
}

// A full sync removes stale virtual servers and kube-ipvs0 addresses of
// its own family only: the other family's belong to the other proxier of a
// dual-stack node (kube-proxy's cleanLegacyService and its family-filtered
// address listing).
func TestFullSyncLeavesTheOtherFamilyAlone(t *testing.T) {
	w, h, _, d := world(t, "6.1.0", ipvs.Config{})
	for _, vs := range []ipvs.VirtualServer{
		{Address: "10.99.0.1", Protocol: "TCP", Port: 1234, Scheduler: "rr"},
		{Address: "fd00:99::1", Protocol: "TCP", Port: 1234, Scheduler: "rr"},
	} {
		if err := h.AddVirtualServer(vs); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.EnsureDevice(ipvs.DummyDevice); err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"10.99.0.1", "fd00:99::1"} {
		if err := d.Bind(ipvs.DummyDevice, a); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	table, _ := ipvs.Table(h)
	if strings.Contains(table, "10.99.0.1") || !strings.Contains(table, "[fd00:99::1]:1234") {
		t.Fatalf("an IPv4 proxier deletes its stale virtual server and keeps the IPv6 one:\n%s", table)
	}
	if a, _ := d.Addresses(ipvs.DummyDevice); strings.Join(a, ",") != "fd00:99::1" {
		t.Fatalf("kube-ipvs0 addresses %v, want only the IPv6 one", a)
	}
}

// A stale virtual server goes at a full sync whatever its address,
// loopback included (kube-proxy's cleanLegacyService deletes every stale
// one of its family), but a loopback address bound to kube-ipvs0 stays:
// kube-proxy's listing of bound addresses leaves loopback out, so it never
// unbinds one. Found by the side-by-side comparison on the kernel
// (e2e/upstream/ipvs_test.go).
func TestStaleLoopbackVirtualServerGoesBoundLoopbackStays(t *testing.T) {
	w, h, _, d := world(t, "6.1.0", ipvs.Config{})
	if err := h.AddVirtualServer(ipvs.VirtualServer{Address: "127.0.0.1", Protocol: "TCP", Port: 1234, Scheduler: "rr"}); err != nil {
		t.Fatal(err)
	}
	if err := d.EnsureDevice(ipvs.DummyDevice); err != nil {
		t.Fatal(err)
	}
	if err := d.Bind(ipvs.DummyDevice, "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	if table, _ := ipvs.Table(h); strings.Contains(table, "127.0.0.1") {
		t.Fatalf("the stale loopback virtual server must go:\n%s", table)
	}
	if a, _ := d.Addresses(ipvs.DummyDevice); strings.Join(a, ",") != "127.0.0.1" {
		t.Fatalf("kube-ipvs0 addresses %v, want the bound loopback address kept", a)
	}
}
