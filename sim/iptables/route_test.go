package iptables_test

import (
	"fmt"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/proxysim/proxysim/fakes"
	"github.com/proxysim/proxysim/sim/iptables"
	"github.com/proxysim/proxysim/sim/proxy"
)

var web = proxy.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "default", Name: "web"}, Port: "http", Protocol: v1.ProtocolTCP}

// state is one ClusterIP service port, 10.96.0.10:80, with n ready
// endpoints 10.244.0.i:8080.
func state(n int, mutate func(*proxy.ServicePort)) *proxy.SyncState {
	sp := &proxy.ServicePort{ClusterIP: net.ParseIP("10.96.0.10"), Port: 80, Protocol: v1.ProtocolTCP}
	if mutate != nil {
		mutate(sp)
	}
	var eps []*proxy.Endpoint
	for i := 1; i <= n; i++ {
		eps = append(eps, &proxy.Endpoint{IP: fmt.Sprintf("10.244.%d.%d", i/256, i%256), Port: 8080, Ready: true, Serving: true})
	}
	return &proxy.SyncState{
		Services:         proxy.ServiceMap{web: sp},
		Endpoints:        proxy.EndpointsMap{web: eps},
		ServiceChanges:   proxy.ServiceMapResult{Updated: []types.NamespacedName{web.NamespacedName}},
		EndpointsChanges: proxy.EndpointsMapResult{Updated: []types.NamespacedName{web.NamespacedName}},
		NodeName:         "node-1",
	}
}

func synced(t *testing.T, st *proxy.SyncState) *fakes.IPTables {
	t.Helper()
	dp := fakes.NewIPTables()
	if err := iptables.New(iptables.Config{ClusterCIDR: "10.244.0.0/16"}, dp, epoch(), nil).Sync(st); err != nil {
		t.Fatal(err)
	}
	return dp
}

var (
	pod  = net.ParseIP("10.244.9.9")
	node = net.ParseIP("192.168.0.2")
	vip  = net.ParseIP("10.96.0.10")
)

func route(t *testing.T, dp *fakes.IPTables, from net.IP) iptables.Shares {
	t.Helper()
	sh, err := iptables.Route(dp.Ruleset(), []net.IP{node}, iptables.Packet{Src: from, Dst: vip, DPort: 80, Protocol: "tcp"})
	if err != nil {
		t.Fatal(err)
	}
	return sh
}

// Each of n endpoints gets 1/n, to the precision of the ten printed
// decimals, and the shares sum to exactly 1.
func TestEachOfNEndpointsGetsOneNth(t *testing.T) {
	tolerance := big.NewRat(1, 1_000_000_000)
	for n := 1; n <= 7; n++ {
		for _, from := range []net.IP{pod, node} {
			sh := route(t, synced(t, state(n, nil)), from)
			if len(sh) != n {
				t.Fatalf("n=%d from %s: %d outcomes %v", n, from, len(sh), sh)
			}
			sum := new(big.Rat)
			for i := 1; i <= n; i++ {
				got := sh[fmt.Sprintf("10.244.0.%d:8080", i)]
				if got == nil {
					t.Fatalf("n=%d: endpoint %d unreachable: %v", n, i, sh)
				}
				diff := new(big.Rat).Sub(got, big.NewRat(1, int64(n)))
				if diff.Abs(diff).Cmp(tolerance) > 0 {
					t.Errorf("n=%d: endpoint %d gets %s, want 1/%d", n, i, got.FloatString(12), n)
				}
				sum.Add(sum, got)
			}
			if sum.Cmp(big.NewRat(1, 1)) != 0 {
				t.Errorf("n=%d: shares sum to %s", n, sum.RatString())
			}
		}
	}
	// Decimals that are exact give exact shares.
	sh := route(t, synced(t, state(2, nil)), pod)
	if sh["10.244.0.1:8080"].RatString() != "1/2" || sh["10.244.0.2:8080"].RatString() != "1/2" {
		t.Errorf("two endpoints: %v", sh)
	}
}

func TestNoEndpointsRejectsAndLocalPolicyWithoutLocalEndpointsDrops(t *testing.T) {
	if sh := route(t, synced(t, state(0, nil)), pod); sh.String() != "{REJECT: 1}" {
		t.Errorf("no endpoints: %v", sh)
	}
	local := func(sp *proxy.ServicePort) { sp.InternalPolicyLocal = true }
	if sh := route(t, synced(t, state(3, local)), pod); sh.String() != "{DROP: 1}" {
		t.Errorf("internalTrafficPolicy Local, no local endpoint: %v", sh)
	}
}

func TestSecondSyncDeletesStaleChains(t *testing.T) {
	dp := synced(t, state(3, nil))
	p := iptables.New(iptables.Config{}, dp, epoch(), nil)
	if err := p.Sync(state(1, nil)); err != nil {
		t.Fatal(err)
	}
	save := dp.SaveAll()
	if n := strings.Count(save, ":KUBE-SEP-"); n != 1 {
		t.Errorf("%d SEP chains after shrinking to one endpoint:\n%s", n, save)
	}
	if sh := route(t, dp, pod); sh.String() != "{10.244.0.1:8080: 1}" {
		t.Errorf("after shrink: %v", sh)
	}
}

func TestAffinityRulesParseAndFirstConnectionsSpread(t *testing.T) {
	dp := synced(t, state(2, func(sp *proxy.ServicePort) { sp.SessionAffinityClientIP = true }))
	if !strings.Contains(dp.SaveAll(), "--rcheck --seconds 10800 --reap") {
		t.Errorf("no affinity check:\n%s", dp.SaveAll())
	}
	if sh := route(t, dp, pod); sh.String() != "{10.244.0.1:8080: 1/2, 10.244.0.2:8080: 1/2}" {
		t.Errorf("affinity, first connection: %v", sh)
	}
}

// A restore that would delete a chain something else still jumps to fails
// on the fake as in the kernel: the sync fails and the rules stay as they
// were, old endpoints included.
func TestARefusedRestoreFailsTheSyncAndChangesNothing(t *testing.T) {
	dp := synced(t, state(2, nil))
	stale := iptables.EndpointChain(web, "10.244.0.2:8080")
	if err := dp.Restore("*nat\n:KUBE-OTHER - [0:0]\n-A KUBE-OTHER -j " + stale + "\nCOMMIT\n"); err != nil {
		t.Fatal(err)
	}
	before := dp.SaveAll()
	err := iptables.New(iptables.Config{}, dp, epoch(), nil).Sync(state(1, nil))
	if err == nil || !strings.Contains(err.Error(), "jumps to "+stale) {
		t.Fatalf("sync error %v, want the restore refused", err)
	}
	if dp.SaveAll() != before {
		t.Error("a refused restore changed the rules")
	}
	if sh := route(t, dp, pod); sh.String() != "{10.244.0.1:8080: 1/2, 10.244.0.2:8080: 1/2}" {
		t.Errorf("after the refused restore: %v", sh)
	}
}

// With a history, ClientIP affinity keeps a client on the endpoint of its
// first connection for the affinity timeout; other clients still spread,
// and after the timeout the client spreads again.
func TestAffinityKeepsAClientOnItsEndpoint(t *testing.T) {
	dp := synced(t, state(3, func(sp *proxy.ServicePort) {
		sp.SessionAffinityClientIP = true
		sp.StickyMaxAgeSeconds = 60
	}))
	start := epoch().Now()
	h := iptables.History{Recent: iptables.Recent{}, Now: start}
	pkt := iptables.Packet{Src: pod, Dst: vip, DPort: 80, Protocol: "tcp"}
	first, sets, err := iptables.RouteWith(dp.Ruleset(), []net.IP{node}, pkt, h)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != 3 {
		t.Fatalf("first connection: %v, want three endpoints", first)
	}
	ep := "10.244.0.2:8080"
	sep := iptables.EndpointChain(web, ep)
	if got := sets[ep]; len(got) != 1 || got[0] != sep {
		t.Fatalf("a connection to %s sets %v, want [%s]", ep, got, sep)
	}
	h.Remember(pod, sets[ep])
	for _, c := range []struct {
		after time.Duration
		want  string
	}{
		{0, "{10.244.0.2:8080: 1}"},
		{59 * time.Second, "{10.244.0.2:8080: 1}"},
		// xt_recent's recent_mt skips only stamps older than the window:
		// an entry exactly --seconds old still matches.
		{60 * time.Second, "{10.244.0.2:8080: 1}"},
		{60*time.Second + time.Millisecond, first.String()},
	} {
		h.Now = start.Add(c.after)
		got, _, err := iptables.RouteWith(dp.Ruleset(), []net.IP{node}, pkt, h)
		if err != nil || got.String() != c.want {
			t.Errorf("%v after the first connection: %v %v, want %s", c.after, got, err, c.want)
		}
	}
	h.Now = start.Add(60 * time.Second)
	if live := h.Live(dp.Ruleset()); len(live[sep]) != 1 || live[sep][0] != pod.String() {
		t.Errorf("live lists at the timeout: %v, want %s in %s", live, pod, sep)
	}
	h.Now = start.Add(61 * time.Second)
	if live := h.Live(dp.Ruleset()); len(live[sep]) != 0 {
		t.Errorf("live lists past the timeout: %v, want none", live)
	}
	h.Now = start
	other := pkt
	other.Src = net.ParseIP("10.244.9.10")
	if got, _, _ := iptables.RouteWith(dp.Ruleset(), []net.IP{node}, other, h); got.String() != first.String() {
		t.Errorf("another client: %v, want the spread %v", got, first)
	}
}

// The IPVS proxier's matches parse, refuse what iptables refuses, and
// the walker answers them: ipset matches through Sets, physdev as no
// bridge, `-m ipvs` by the virtual server that took the packet.
func TestIPVSModeMatches(t *testing.T) {
	for _, bad := range []string{
		"--match-set KUBE-CLUSTER-IP dst,dst -j ACCEPT",
		"-m set --match-set KUBE-CLUSTER-IP dst,port -j ACCEPT",
		"-m set --match-set KUBE-CLUSTER-IP",
		"-m ipvs --vport 0 -j DROP",
		"--physdev-is-in -j ACCEPT",
	} {
		if _, err := iptables.ParseRule(bad); err == nil {
			t.Errorf("ParseRule(%q) succeeded", bad)
		}
	}
	rs, err := iptables.Apply(iptables.NewRuleset(), `*filter
:OUTPUT ACCEPT [0:0]
-A OUTPUT -m physdev --physdev-is-in -j DROP
-A OUTPUT -s 203.0.113.10 -m ipvs --vaddr 203.0.113.10 --vproto tcp --vport 80 -j DROP
-A OUTPUT -m set ! --match-set ALLOWED dst,dst -j REJECT
COMMIT
`)
	if err != nil {
		t.Fatal(err)
	}
	sets := func(name, flags string, src net.IP, proto string, p iptables.Path) (bool, error) {
		return name == "ALLOWED" && p.DPort == 80, nil
	}
	for _, tc := range []struct {
		src   string
		vs    iptables.VirtualAddr
		dport int
		want  string
	}{
		{"203.0.113.10", iptables.VirtualAddr{Addr: net.ParseIP("203.0.113.10"), Proto: "tcp", Port: 80}, 80, "DROP"},
		{"203.0.113.10", iptables.VirtualAddr{Addr: net.ParseIP("203.0.113.10"), Proto: "tcp", Port: 443}, 80, "ACCEPT"},
		{"203.0.113.10", iptables.VirtualAddr{}, 80, "ACCEPT"},
		{"10.0.0.1", iptables.VirtualAddr{}, 81, "REJECT"},
	} {
		w := &iptables.Walker{Rules: rs, Packet: iptables.Packet{Src: net.ParseIP(tc.src), Dst: net.ParseIP("10.244.1.2"), DPort: tc.dport, Protocol: "tcp"}, Sets: sets}
		out, err := w.Chain("filter", "OUTPUT", iptables.Path{Dst: w.Packet.Dst, DPort: tc.dport, VS: tc.vs}, big.NewRat(1, 1))
		if err != nil {
			t.Fatal(err)
		}
		if len(out) != 1 || out[0].Verdict != tc.want {
			t.Errorf("%+v: %+v, want %s", tc, out, tc.want)
		}
	}
}
