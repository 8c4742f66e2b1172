package fakes

import (
	"testing"
	"time"

	"github.com/proxysim/proxysim/sim/ipvs"
	"github.com/proxysim/proxysim/sim/vclock"
)

// Each test is a statement about the Linux kernel's IPVS; the privileged
// suite (e2e, label kernel) checks the same statements against a real one.

type kernel struct {
	t   *testing.T
	clk *vclock.Clock
	h   *IPVS
	s   *Sysctls
	vs  ipvs.VirtualServer
}

func newKernel(t *testing.T, version, scheduler string, persistent bool, backends ...string) *kernel {
	t.Helper()
	clk := vclock.New(vclock.Epoch)
	s := NewSysctls(version)
	h := NewIPVS(version, s, clk)
	vs := ipvs.VirtualServer{Address: "10.96.0.10", Protocol: "TCP", Port: 80, Scheduler: scheduler, Persistent: persistent, Timeout: 60}
	if err := h.AddVirtualServer(vs); err != nil {
		t.Fatal(err)
	}
	for _, b := range backends {
		if err := h.AddRealServer(vs, ipvs.RealServer{Address: b, Port: 8080, Weight: 1}); err != nil {
			t.Fatal(err)
		}
	}
	return &kernel{t: t, clk: clk, h: h, s: s, vs: vs}
}

func (k *kernel) connect(name, client string) ipvs.ConnectResult {
	k.t.Helper()
	return k.h.Connect(name, "TCP", client, "10.96.0.10:80")
}

func (k *kernel) server(name, client string) string {
	k.t.Helper()
	r := k.connect(name, client)
	if r.Err != nil {
		k.t.Fatalf("%s: %v", name, r.Err)
	}
	return r.Server
}

func (k *kernel) weight(rs string, w int) {
	k.t.Helper()
	if err := k.h.UpdateRealServer(k.vs, ipvs.RealServer{Address: rs, Port: 8080, Weight: w}); err != nil {
		k.t.Fatal(err)
	}
}

func (k *kernel) counters(rs string) (int, int) {
	list, _ := k.h.RealServers(k.vs)
	for _, r := range list {
		if r.Address == rs {
			return r.ActiveConn, r.InactiveConn
		}
	}
	k.t.Fatalf("no real server %s", rs)
	return 0, 0
}

// The kernel lists destinations newest first, and rr starts at the head.
func TestRoundRobinHandsConnectionsOutInTurnNewestFirst(t *testing.T) {
	k := newKernel(t, "6.1.0", "rr", false, "10.244.1.1", "10.244.1.2", "10.244.1.3")
	var got []string
	for i, c := range []string{"10.0.0.1:1000", "10.0.0.1:1001", "10.0.0.1:1002", "10.0.0.1:1003"} {
		got = append(got, k.server(string(rune('a'+i)), c))
	}
	want := []string{"10.244.1.3:8080", "10.244.1.2:8080", "10.244.1.1:8080", "10.244.1.3:8080"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("rr order %v, want %v", got, want)
		}
	}
}

func TestWeightedRoundRobinFollowsWeights(t *testing.T) {
	k := newKernel(t, "6.1.0", "wrr", false, "10.244.1.1", "10.244.1.2")
	k.weight("10.244.1.1", 3)
	n := map[string]int{}
	for i := 0; i < 8; i++ {
		n[k.server(string(rune('a'+i)), "10.0.0.1:"+string(rune('0'+i))+"000")]++
	}
	if n["10.244.1.1:8080"] != 6 || n["10.244.1.2:8080"] != 2 {
		t.Fatalf("wrr 3:1 over 8 connections: %v", n)
	}
}

func TestSourceHashingSticksToOneServerAndHasNoFallback(t *testing.T) {
	k := newKernel(t, "6.1.0", "sh", false, "10.244.1.1", "10.244.1.2", "10.244.1.3")
	first := k.server("a", "10.0.0.7:1000")
	for i := 1; i < 5; i++ {
		if s := k.server(string(rune('a'+i)), "10.0.0.7:100"+string(rune('0'+i))); s != first {
			t.Fatalf("sh sent the same client to %s and %s", first, s)
		}
	}
	k.weight(first[:len(first)-5], 0)
	if r := k.connect("z", "10.0.0.7:2000"); r.Err != ipvs.ErrRefused {
		t.Fatalf("quiescent sh bucket owner: want refused (no destination), got %v %v", r.Server, r.Err)
	}
}

func TestQuiescentServerKeepsConnectionsAndGetsNoNewOnes(t *testing.T) {
	k := newKernel(t, "6.1.0", "rr", false, "10.244.1.1", "10.244.1.2")
	k.server("a", "10.0.0.1:1000") // to .2, the newest
	k.weight("10.244.1.2", 0)
	for i := 0; i < 4; i++ {
		if s := k.server(string(rune('b'+i)), "10.0.0.2:200"+string(rune('0'+i))); s != "10.244.1.1:8080" {
			t.Fatalf("new connection went to the quiescent server: %s", s)
		}
	}
	if info, _ := k.h.Conn("a"); info.Server != "10.244.1.2:8080" || info.State != "ESTABLISHED" {
		t.Fatalf("established connection to the quiescent server: %+v", info)
	}
}

func TestCountersAndTimeWaitExpiry(t *testing.T) {
	k := newKernel(t, "6.1.0", "rr", false, "10.244.1.1")
	k.server("a", "10.0.0.1:1000")
	if a, i := k.counters("10.244.1.1"); a != 1 || i != 0 {
		t.Fatalf("ActiveConn/InActConn = %d/%d, want 1/0", a, i)
	}
	_ = k.h.Close("a")
	if a, i := k.counters("10.244.1.1"); a != 0 || i != 1 {
		t.Fatalf("after close %d/%d, want 0/1 (TIME_WAIT)", a, i)
	}
	k.clk.Advance(TimeWaitTimeout - time.Second)
	if _, i := k.counters("10.244.1.1"); i != 1 {
		t.Fatal("TIME_WAIT expired early")
	}
	k.clk.Advance(time.Second)
	if a, i := k.counters("10.244.1.1"); a != 0 || i != 0 {
		t.Fatalf("TIME_WAIT should be gone after 2m: %d/%d", a, i)
	}
}

func TestUDPEntryExpiresAfterUDPTimeout(t *testing.T) {
	k := newKernel(t, "6.1.0", "rr", false)
	vs := ipvs.VirtualServer{Address: "10.96.0.53", Protocol: "UDP", Port: 53, Scheduler: "rr"}
	_ = k.h.AddVirtualServer(vs)
	_ = k.h.AddRealServer(vs, ipvs.RealServer{Address: "10.244.1.9", Port: 53, Weight: 1})
	_ = k.h.SetTimeouts(ipvs.Timeouts{UDP: 30 * time.Second})
	if r := k.h.Connect("u", "UDP", "10.0.0.1:5000", "10.96.0.53:53"); r.Err != nil {
		t.Fatal(r.Err)
	}
	k.clk.Advance(29 * time.Second)
	if info, _ := k.h.Conn("u"); info.State != "UDP" {
		t.Fatalf("UDP entry gone early: %+v", info)
	}
	k.clk.Advance(time.Second)
	if info, _ := k.h.Conn("u"); info.State != "GONE" {
		t.Fatalf("UDP entry should expire after the UDP timeout: %+v", info)
	}
}

// reuse: a server-side close leaves the IPVS entry in TIME_WAIT; the client
// then opens a new connection from the same source port (upstream #81775).
func reuse(t *testing.T, kernel string, mode, conntrack int) (first string, r ipvs.ConnectResult) {
	k := newKernel(t, kernel, "rr", false, "10.244.1.1", "10.244.1.2")
	_ = k.s.Set(ipvs.SysctlConnReuseMode, mode)
	_ = k.s.Set(ipvs.SysctlConntrack, conntrack)
	first = k.server("a", "10.0.0.1:40000")
	_ = k.h.Close("a")
	k.clk.Advance(time.Second)
	return first, k.connect("b", "10.0.0.1:40000")
}

func TestConnReuseModeOneReschedulesWithoutDelayFromKernel59(t *testing.T) {
	first, r := reuse(t, "6.1.0", 1, 1)
	if r.Err != nil || r.Latency != 0 || r.Server == first {
		t.Fatalf("6.1, mode 1: want a new server at once; first %s, got %+v", first, r)
	}
}

func TestConnReuseModeOneDropsFirstSynBeforeKernel59(t *testing.T) {
	first, r := reuse(t, "5.4.0", 1, 1)
	if r.Err != nil || r.Latency != time.Second || r.Server == first {
		t.Fatalf("5.4, mode 1, conntrack 1: want a 1s delay then a new server; first %s, got %+v", first, r)
	}
	_, r = reuse(t, "5.4.0", 1, 0)
	if r.Latency != 0 {
		t.Fatalf("without conntrack there is no old conntrack entry to drop for: %+v", r)
	}
}

func TestConnReuseModeZeroSticksToTheOldServer(t *testing.T) {
	first, r := reuse(t, "5.4.0", 0, 1)
	if r.Err != nil || r.Latency != 0 || r.Server != first {
		t.Fatalf("mode 0: the reused port must stick to %s, got %+v", first, r)
	}
}

func TestConnReuseModeZeroStuckOnDeletedServer(t *testing.T) {
	for _, nodest := range []int{0, 1} {
		k := newKernel(t, "5.4.0", "rr", false, "10.244.1.1", "10.244.1.2")
		_ = k.s.Set(ipvs.SysctlConnReuseMode, 0)
		_ = k.s.Set(ipvs.SysctlExpireNodestConn, nodest)
		first := k.server("a", "10.0.0.1:40000")
		_ = k.h.Close("a")
		_ = k.h.DeleteRealServer(k.vs, ipvs.RealServer{Address: first[:len(first)-5], Port: 8080})
		r := k.connect("b", "10.0.0.1:40000")
		switch nodest {
		case 1:
			// the entry is expired on the first SYN, which is dropped; the
			// retransmission 1s later is scheduled afresh
			if r.Err != nil || r.Latency != time.Second || r.Server == first {
				t.Fatalf("expire_nodest_conn 1: %+v", r)
			}
		case 0:
			// SYNs are dropped while the TIME_WAIT entry lives (2m); the
			// client's six retransmissions (1s, 2s, ... 32s apart) all fall
			// inside it, and connect gives up at 127s
			if r.Err != ipvs.ErrTimeout || r.Latency != 127*time.Second {
				t.Fatalf("expire_nodest_conn 0: %+v", r)
			}
		}
	}
}

func TestPersistenceAndExpireQuiescentTemplate(t *testing.T) {
	for _, eqt := range []int{0, 1} {
		k := newKernel(t, "6.1.0", "rr", true, "10.244.1.1", "10.244.1.2")
		_ = k.s.Set(ipvs.SysctlExpireQuiescentTemplate, eqt)
		first := k.server("a", "10.0.0.1:1000")
		if s := k.server("b", "10.0.0.1:1001"); s != first {
			t.Fatalf("persistence: same client went to %s then %s", first, s)
		}
		k.weight(first[:len(first)-5], 0)
		s := k.server("c", "10.0.0.1:1002")
		if (eqt == 1) == (s == first) {
			t.Fatalf("expire_quiescent_template %d: new connection went to %s (quiescent server %s)", eqt, s, first)
		}
	}
}

func TestTemplateLivesWhileItControlsConnections(t *testing.T) {
	k := newKernel(t, "6.1.0", "rr", true, "10.244.1.1", "10.244.1.2")
	first := k.server("a", "10.0.0.1:1000") // template timeout 60s
	_ = k.h.Close("a")                      // TIME_WAIT for 2m
	k.clk.Advance(100 * time.Second)
	if s := k.server("b", "10.0.0.1:1001"); s != first {
		t.Fatalf("past its timeout, the template still controls a's entry: want %s, got %s", first, s)
	}
	_ = k.h.Close("b")
	k.clk.Advance(5 * time.Minute)
	if s := k.server("c", "10.0.0.1:1002"); s == first {
		t.Fatalf("with every controlled entry gone, the template expires: c should be scheduled afresh, got %s", s)
	}
}

// From 5.9, deleting a real server with expire_nodest_conn 1 drops its
// entries at once (ip_vs_expire_nodest_conn_flush), and a SYN whose entry
// points at a gone server is scheduled afresh without a drop; before 5.9 the
// entry waits for its next packet, and that SYN is dropped with it.
func TestDeletionDropsEntriesFromKernel59(t *testing.T) {
	for _, tc := range []struct {
		kernel  string
		gone    bool
		latency time.Duration
	}{{"5.4.0", false, time.Second}, {"6.1.0", true, 0}} {
		k := newKernel(t, tc.kernel, "rr", false, "10.244.1.1", "10.244.1.2")
		_ = k.s.Set(ipvs.SysctlConnReuseMode, 0)
		_ = k.s.Set(ipvs.SysctlExpireNodestConn, 1)
		first := k.server("a", "10.0.0.1:40000")
		_ = k.h.Close("a")
		_ = k.h.DeleteRealServer(k.vs, ipvs.RealServer{Address: first[:len(first)-5], Port: 8080})
		if info, _ := k.h.Conn("a"); (info.State == "GONE") != tc.gone {
			t.Fatalf("%s: entry after deletion: %+v, want gone=%v", tc.kernel, info, tc.gone)
		}
		r := k.connect("b", "10.0.0.1:40000")
		if r.Err != nil || r.Latency != tc.latency || r.Server == first {
			t.Fatalf("%s: reconnect after deletion: %+v, want another server after %v", tc.kernel, r, tc.latency)
		}
	}
}

// A quiescent server's entry is rescheduled under expire_nodest_conn
// whatever conn_reuse_mode says from 5.16 ("ipvs: Fix reuse connection if
// RS weight is 0"), and in each stable series from the release that took the
// backport; before, only under conn_reuse_mode != 0. The version is the
// upstream one: Debian's release name alone (patch 0) reads as unpatched.
func TestQuiescentRescheduleWithConnReuseModeZeroByFullVersion(t *testing.T) {
	for _, tc := range []struct {
		kernel string
		sticks bool
	}{
		{"4.14.256", true}, {"4.14.257", false},
		{"4.19.218", true}, {"4.19.219", false},
		{"5.4.162", true}, {"5.4.163", false},
		{"5.10.82", true}, {"5.10.83", false},
		{"5.10.0-46-cloud-amd64", true},
		{"5.10.0-46-cloud-amd64 (5.10.262)", false},
		{"5.10.0-46-cloud-amd64 (Debian 5.10.262-1)", false},
		{"5.14.21", true}, // ended before the fix
		{"5.15.5", true}, {"5.15.6", false},
		{"5.16.0", false}, {"6.1.0", false}, {"6.12.117", false},
	} {
		k := newKernel(t, tc.kernel, "rr", false, "10.244.1.1", "10.244.1.2")
		_ = k.s.Set(ipvs.SysctlConnReuseMode, 0)
		_ = k.s.Set(ipvs.SysctlExpireNodestConn, 1)
		first := k.server("a", "10.0.0.1:40000")
		_ = k.h.Close("a")
		k.weight(first[:len(first)-5], 0)
		if s := k.server("b", "10.0.0.1:40000"); (s == first) != tc.sticks {
			t.Errorf("%s: reconnect went to %s (quiescent %s), want sticking=%v", tc.kernel, s, first, tc.sticks)
		}
	}
}

// Under vs/conntrack 1, a SYN reusing a port drops once (1 s) for the old
// confirmed conntrack entry until "ipvs: allow connection reuse for
// unconfirmed conntrack": mainline 5.9, stable 5.7.16 and 5.8.2.
func TestFirstSynDropByFullVersion(t *testing.T) {
	for _, tc := range []struct {
		kernel string
		drops  bool
	}{
		{"5.4.300", true},
		{"5.7.15", true}, {"5.7.16", false},
		{"5.8.1", true}, {"5.8.2", false},
		{"5.9.0", false},
	} {
		first, r := reuse(t, tc.kernel, 1, 1)
		want := time.Duration(0)
		if tc.drops {
			want = time.Second
		}
		if r.Err != nil || r.Latency != want || r.Server == first {
			t.Errorf("%s, mode 1, conntrack 1: want a new server after %v; first %s, got %+v", tc.kernel, want, first, r)
		}
	}
}

// Deleting a real server drops its entries at once only with "ipvs: queue
// delayed work to expire no destination connections" (mainline 5.9, never
// backported): 5.8.2, which has the unconfirmed-conntrack fix, still keeps
// them until their next packet.
func TestDeletionFlushByFullVersion(t *testing.T) {
	for _, tc := range []struct {
		kernel string
		gone   bool
	}{{"5.8.2", false}, {"5.8.18", false}, {"5.9.0", true}, {"5.10.0-46-cloud-amd64 (5.10.262)", true}} {
		k := newKernel(t, tc.kernel, "rr", false, "10.244.1.1", "10.244.1.2")
		_ = k.s.Set(ipvs.SysctlExpireNodestConn, 1)
		first := k.server("a", "10.0.0.1:40000")
		_ = k.h.Close("a")
		_ = k.h.DeleteRealServer(k.vs, ipvs.RealServer{Address: first[:len(first)-5], Port: 8080})
		if info, _ := k.h.Conn("a"); (info.State == "GONE") != tc.gone {
			t.Errorf("%s: entry after deletion: %+v, want gone=%v", tc.kernel, info, tc.gone)
		}
	}
}

// An ESTABLISHED entry expires the TCP timeout after the last packet IPVS
// forwarded; a packet it drops does not re-arm it.
func TestEstablishedEntryIdleTimeout(t *testing.T) {
	k := newKernel(t, "6.1.0", "rr", false, "10.244.1.1", "10.244.1.2")
	_ = k.h.SetTimeouts(ipvs.Timeouts{TCP: 10 * time.Second})
	_ = k.s.Set(ipvs.SysctlExpireNodestConn, 0)
	first := k.server("a", "10.0.0.1:40000")
	k.clk.Advance(6 * time.Second)
	if err := k.h.Ping("a", time.Second); err != nil {
		t.Fatal(err)
	}
	k.clk.Advance(6 * time.Second)
	if info, _ := k.h.Conn("a"); info.State != "ESTABLISHED" {
		t.Fatalf("a forwarded packet re-arms the entry: %+v", info)
	}
	_ = k.h.DeleteRealServer(k.vs, ipvs.RealServer{Address: first[:len(first)-5], Port: 8080})
	if err := k.h.Ping("a", time.Second); err != ipvs.ErrTimeout {
		t.Fatalf("packets to a deleted server are dropped: %v", err)
	}
	k.clk.Advance(4 * time.Second)
	if info, _ := k.h.Conn("a"); info.State != "GONE" {
		t.Fatalf("a dropped packet does not re-arm the entry: %+v", info)
	}
}
