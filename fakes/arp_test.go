package fakes

import (
	"net/netip"
	"testing"

	"github.com/proxysim/proxysim/sim/ipvs"
)

// A node as the client topology lays it out: lo, c0 on the client's
// segment, b1 towards a backend, and kube-ipvs0 holding a service address.
func arpHost(t *testing.T) *Host {
	t.Helper()
	d := NewDummy()
	if err := d.EnsureDevice("kube-ipvs0"); err != nil {
		t.Fatal(err)
	}
	if err := d.Bind("kube-ipvs0", "10.96.0.10"); err != nil {
		t.Fatal(err)
	}
	return &Host{
		Links: []Link{
			{Name: "lo", Addrs: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/8")}, HostScope: true},
			{Name: "c0", Addrs: []netip.Prefix{netip.MustParsePrefix("10.0.0.1/24")}},
			{Name: "b1", Addrs: []netip.Prefix{netip.MustParsePrefix("10.244.1.1/24")}},
		},
		Binder:  d,
		Sysctls: NewSysctls("6.1.0"),
	}
}

// net/ipv4/arp.c arp_ignore, asked on c0.
func TestARPIgnore(t *testing.T) {
	a := netip.MustParseAddr
	h := arpHost(t)
	const node, backendSide, service, nobody, loopback = "10.0.0.1", "10.244.1.1", "10.96.0.10", "10.0.0.77", "127.0.0.1"
	for _, tc := range []struct {
		ignore   int
		sender   string
		answered []string // of node, backendSide, service, nobody, loopback
	}{
		// 0: any local address on any interface (the MetalLB problem).
		{0, "10.0.0.5", []string{node, backendSide, service}},
		// 1 (strictARP): only c0's own address.
		{1, "10.0.0.5", []string{node}},
		// 2: as 1, with the sender on c0's subnet...
		{2, "10.0.0.5", []string{node}},
		// ... and nothing for a sender off it.
		{2, "192.168.7.7", nil},
		// 3: every address but host-scope ones.
		{3, "10.0.0.5", []string{node, backendSide, service}},
		// 4-7 reserved, as 0; 8: nothing.
		{5, "10.0.0.5", []string{node, backendSide, service}},
		{8, "10.0.0.5", nil},
	} {
		if err := h.Sysctls.Set(ipvs.SysctlArpIgnore, tc.ignore); err != nil {
			t.Fatal(err)
		}
		for _, target := range []string{node, backendSide, service, nobody, loopback} {
			want := false
			for _, w := range tc.answered {
				want = want || w == target
			}
			got, err := h.AnswersARP("c0", a(tc.sender), a(target))
			if err != nil || got != want {
				t.Errorf("arp_ignore %d, %s asks for %s on c0: answered=%v, %v; want %v", tc.ignore, tc.sender, target, got, err, want)
			}
		}
	}
	// kube-ipvs0's addresses come and go with the proxier's binds.
	_ = h.Sysctls.Set(ipvs.SysctlArpIgnore, 0)
	_ = h.Binder.Unbind("kube-ipvs0", service)
	if got, _ := h.AnswersARP("c0", a("10.0.0.5"), a(service)); got {
		t.Error("an unbound service address is no longer local: no answer")
	}
	if _, err := h.AnswersARP("eth9", a("10.0.0.5"), a(node)); err == nil {
		t.Error("asking on an unknown link should fail")
	}
}

// net/ipv4/arp.c arp_solicit: the sender of the node's request to 10.0.0.9
// on c0, for a datagram from a kube-ipvs0 address and from c0's own.
func TestARPAnnounce(t *testing.T) {
	a := netip.MustParseAddr
	h := arpHost(t)
	for _, tc := range []struct {
		announce    int
		src, sender string
	}{
		{0, "10.96.0.10", "10.96.0.10"}, // any local source
		{0, "10.244.1.1", "10.244.1.1"},
		{0, "10.9.9.9", "10.0.0.1"},   // not local: c0's address
		{1, "10.96.0.10", "10.0.0.1"}, // not on the target's subnet
		{1, "10.0.0.1", "10.0.0.1"},
		{2, "10.96.0.10", "10.0.0.1"}, // always c0's address for the target
	} {
		_ = h.Sysctls.Set(ipvs.SysctlArpAnnounce, tc.announce)
		got, err := h.ARPSender("c0", a(tc.src), a("10.0.0.9"))
		if err != nil || got != a(tc.sender) {
			t.Errorf("arp_announce %d, datagram from %s: sender %v, %v; want %s", tc.announce, tc.src, got, err, tc.sender)
		}
	}
	// With 2, a target off every subnet of the link gets the link's first
	// address.
	_ = h.Sysctls.Set(ipvs.SysctlArpAnnounce, 2)
	if got, _ := h.ARPSender("b1", a("10.96.0.10"), a("10.9.9.9")); got != a("10.244.1.1") {
		t.Errorf("off-subnet target on b1: sender %v, want 10.244.1.1", got)
	}
}
