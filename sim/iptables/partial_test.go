package iptables_test

import (
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

// two is web (n endpoints) and api (one endpoint), with changed naming
// which services the sync sees as changed.
func two(n int, changed ...types.NamespacedName) *proxy.SyncState {
	st := state(n, nil)
	api := proxy.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "default", Name: "api"}, Port: "grpc", Protocol: v1.ProtocolTCP}
	st.Services[api] = &proxy.ServicePort{ClusterIP: net.ParseIP("10.96.0.20"), Port: 9090, Protocol: v1.ProtocolTCP}
	st.Endpoints[api] = []*proxy.Endpoint{{IP: "10.244.7.7", Port: 9090, Ready: true, Serving: true}}
	st.ServiceChanges.Updated = nil
	st.EndpointsChanges.Updated = changed
	return st
}

var apiName = types.NamespacedName{Namespace: "default", Name: "api"}

// recorder keeps the payloads restored.
type recorder struct {
	*fakes.IPTables
	payloads []string
}

func (r *recorder) Restore(p string) error {
	r.payloads = append(r.payloads, p)
	return r.IPTables.Restore(p)
}

// After the first (full) sync, a sync rewrites the fixed chains and the
// chains of the services that changed, and nothing of the others; the
// rules it leaves alone still count in the rules-total metric.
func TestPartialSyncWritesOnlyChangedServices(t *testing.T) {
	dp := &recorder{IPTables: fakes.NewIPTables()}
	p := iptables.New(iptables.Config{}, dp, epoch(), nil)
	if err := p.Sync(two(3, web.NamespacedName, apiName)); err != nil {
		t.Fatal(err)
	}
	full := p.Metrics()
	if full.FullSyncs != 1 || full.PartialSyncs != 0 {
		t.Fatalf("first sync: %+v, want one full sync", full)
	}
	before := dp.SaveAll()
	if err := p.Sync(two(3, apiName)); err != nil {
		t.Fatal(err)
	}
	partial := dp.payloads[1]
	webSVC := iptables.ServiceChain(iptables.PrefixSVC, web)
	apiSVC := iptables.ServiceChain(iptables.PrefixSVC, proxy.ServicePortName{NamespacedName: apiName, Port: "grpc", Protocol: v1.ProtocolTCP})
	if strings.Contains(partial, ":"+webSVC) || !strings.Contains(partial, ":"+apiSVC) {
		t.Errorf("partial sync payload: want api's chains and not web's:\n%s", partial)
	}
	if !strings.Contains(partial, "-A KUBE-SERVICES -m comment --comment \"default/web:http cluster IP\"") {
		t.Errorf("partial sync must rewrite KUBE-SERVICES whole:\n%s", partial)
	}
	if dp.SaveAll() != before {
		t.Errorf("a partial sync of an unchanged state changed the rules")
	}
	m := p.Metrics()
	if m.FullSyncs != 1 || m.PartialSyncs != 1 {
		t.Errorf("metrics %+v: want 1 full and 1 partial sync", m)
	}
	if m.RulesTotal["nat"] != full.RulesTotal["nat"] || m.RulesLast["nat"] >= full.RulesLast["nat"] {
		t.Errorf("nat rules: total %d (full sync %d), last %d (full sync %d): want the same total and fewer written",
			m.RulesTotal["nat"], full.RulesTotal["nat"], m.RulesLast["nat"], full.RulesLast["nat"])
	}
	// web's 3 endpoints: 3 SVC rules and 2 rules in each of 3 SEP chains
	// were skipped.
	if got := full.RulesLast["nat"] - m.RulesLast["nat"]; got != 9 {
		t.Errorf("the partial sync wrote %d nat rules fewer than the full one, want 9 (web's SVC and SEP rules)", got)
	}
}

// A failed restore fails the sync, counts as a (partial) restore failure
// and makes the next sync full; the rule gauges keep what it tried.
func TestFailedRestoreCountsAndForcesAFullSync(t *testing.T) {
	raw := fakes.NewIPTables()
	dp := iptables.WithFaults(raw)
	p := iptables.New(iptables.Config{}, dp, epoch(), nil)
	for i, c := range []struct {
		fail                                 bool
		full, partial, failures, partialFail int
	}{
		{false, 1, 0, 0, 0}, // start: full
		{true, 1, 1, 1, 1},  // partial, fails
		{false, 2, 1, 1, 1}, // after a failure: full
		{false, 2, 2, 1, 1}, // partial again
		{true, 2, 3, 2, 2},
		{true, 3, 3, 3, 2}, // the full retry fails too: not a partial failure
		{false, 4, 3, 3, 2},
	} {
		if c.fail {
			dp.FailNext(1)
		}
		err := p.Sync(two(2, apiName))
		if (err != nil) != c.fail {
			t.Fatalf("sync %d: error %v, want failure %v", i, err, c.fail)
		}
		m := p.Metrics()
		if m.FullSyncs != c.full || m.PartialSyncs != c.partial || m.RestoreFailures != c.failures || m.PartialRestoreFailures != c.partialFail {
			t.Errorf("sync %d: %+v, want full %d partial %d failures %d partial failures %d", i, m, c.full, c.partial, c.failures, c.partialFail)
		}
	}
}

// Outside large-cluster mode a sync more than FullSyncPeriod after the
// last full one is full; in large-cluster mode (as the previous sync
// found it) it is not.
func TestHourlyFullSyncOnlyOutsideLargeClusterMode(t *testing.T) {
	for _, large := range []bool{false, true} {
		clk := epoch()
		p := iptables.New(iptables.Config{SyncPeriod: 30 * time.Second}, fakes.NewIPTables(), clk, nil)
		st := func() *proxy.SyncState {
			if large {
				return bigState(1001, 1)
			}
			return two(2)
		}
		if err := p.Sync(st()); err != nil {
			t.Fatal(err)
		}
		clk.SetTime(clk.Now().Add(iptables.FullSyncPeriod))
		_ = p.Sync(st())
		clk.SetTime(clk.Now().Add(time.Second))
		_ = p.Sync(st())
		want := 2
		if large {
			want = 1
		}
		if m := p.Metrics(); m.FullSyncs != want {
			t.Errorf("large=%v: %d full syncs after 1h and 1h1s, want %d", large, m.FullSyncs, want)
		}
	}
}

// loadBalancerSourceRanges: a KUBE-FW chain lets sources in a range on to
// the endpoints; the rest are dropped by KUBE-PROXY-FIREWALL.
func TestSourceRangesGuardTheLoadBalancerIP(t *testing.T) {
	lb := net.ParseIP("198.51.100.8")
	dp := synced(t, state(2, func(sp *proxy.ServicePort) {
		sp.LoadBalancerIPs = []string{lb.String()}
		sp.LoadBalancerSourceRanges = []string{"203.0.113.0/24"}
	}))
	in, out := net.ParseIP("203.0.113.5"), net.ParseIP("192.0.2.9")
	if got := routeTo(t, dp, in, lb, 80); got != "{10.244.0.1:8080: 1/2, 10.244.0.2:8080: 1/2}" {
		t.Errorf("from inside the range: %s", got)
	}
	if got := routeTo(t, dp, out, lb, 80); got != "{DROP: 1}" {
		t.Errorf("from outside the range: %s, want DROP", got)
	}
	// The ClusterIP is not guarded.
	if got := routeTo(t, dp, out, vip, 80); got != "{10.244.0.1:8080: 1/2, 10.244.0.2:8080: 1/2}" {
		t.Errorf("ClusterIP from outside the range: %s", got)
	}
}

// no_local_endpoints_total counts Local-policy ports with endpoints
// elsewhere only.
func TestNoLocalEndpointsMetric(t *testing.T) {
	st := state(2, func(sp *proxy.ServicePort) {
		sp.InternalPolicyLocal = true
		sp.ExternalPolicyLocal = true
		sp.NodePort = 30080
	})
	p := iptables.New(iptables.Config{}, fakes.NewIPTables(), epoch(), nil)
	if err := p.Sync(st); err != nil {
		t.Fatal(err)
	}
	if m := p.Metrics(); m.NoLocalEndpoints["internal"] != 1 || m.NoLocalEndpoints["external"] != 1 {
		t.Errorf("no local endpoints: %v, want internal 1, external 1", m.NoLocalEndpoints)
	}
	st.Endpoints[web][0].IsLocal = true
	if err := p.Sync(st); err != nil {
		t.Fatal(err)
	}
	if m := p.Metrics(); m.NoLocalEndpoints["internal"] != 0 || m.NoLocalEndpoints["external"] != 0 {
		t.Errorf("with a local endpoint: %v, want 0 and 0", m.NoLocalEndpoints)
	}
}

// IPv6: no localnet guard, node ports refuse ::1, addresses as IPv6.
func TestIPv6Rules(t *testing.T) {
	sp := &proxy.ServicePort{ClusterIP: net.ParseIP("fd00:96::10"), Port: 80, Protocol: v1.ProtocolTCP, NodePort: 30080}
	st := &proxy.SyncState{
		Services:  proxy.ServiceMap{web: sp},
		Endpoints: proxy.EndpointsMap{web: {{IP: "fd00:244::1", Port: 8080, Ready: true, Serving: true}}},
	}
	dp := fakes.NewIPTables()
	if err := iptables.New(iptables.Config{Family: v1.IPv6Protocol}, dp, epoch(), nil).Sync(st); err != nil {
		t.Fatal(err)
	}
	save := dp.SaveAll()
	for _, want := range []string{"! -d ::1/128 -j KUBE-NODEPORTS", "-d fd00:96::10 --dport 80", "--to-destination [fd00:244::1]:8080"} {
		if !strings.Contains(save, want) {
			t.Errorf("missing %q in:\n%s", want, save)
		}
	}
	if strings.Contains(save, "-A KUBE-FIREWALL") {
		t.Errorf("IPv6 has no localnet guard rule:\n%s", save)
	}
	sh, err := iptables.Route(dp.Ruleset(), nil, iptables.Packet{Src: net.ParseIP("fd00:1::1"), Dst: sp.ClusterIP, DPort: 80, Protocol: "tcp"})
	if err != nil || sh.String() != "{[fd00:244::1]:8080: 1}" {
		t.Errorf("route: %v %v", sh, err)
	}
}
