package nftables

import (
	"context"
	"fmt"
	"math/big"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/knftables"

	"github.com/proxysim/proxysim/sim/proxy"
	"github.com/proxysim/proxysim/sim/route"
)

var (
	webName = types.NamespacedName{Namespace: "default", Name: "web"}
	web     = proxy.ServicePortName{NamespacedName: webName, Port: "http", Protocol: v1.ProtocolTCP}
	vip     = net.ParseIP("10.96.0.10")
	node    = net.ParseIP("192.168.0.2")
	pod     = net.ParseIP("10.244.9.9")
	outside = net.ParseIP("203.0.113.5")
)

// state is one service port web with n ready endpoints 10.244.0.1..n.
func state(n int, mutate func(*proxy.ServicePort)) *proxy.SyncState {
	sp := &proxy.ServicePort{ClusterIP: vip, Port: 80, Protocol: v1.ProtocolTCP}
	if mutate != nil {
		mutate(sp)
	}
	var eps []*proxy.Endpoint
	for i := 1; i <= n; i++ {
		eps = append(eps, &proxy.Endpoint{IP: fmt.Sprintf("10.244.%d.%d", i/256, i%256), Port: 8080, Ready: true, Serving: true})
	}
	return &proxy.SyncState{
		Services:  proxy.ServiceMap{web: sp},
		Endpoints: proxy.EndpointsMap{web: eps},
		NodeName:  "node-1",
		// Every sync of a test state says web changed, unless cleared.
		ServiceChanges: proxy.ServiceMapResult{Updated: []types.NamespacedName{webName}},
	}
}

var testConfig = Config{ClusterCIDR: "10.244.0.0/16", NodePortIPs: []net.IP{node}}

func newTest(t *testing.T) (*Proxier, *knftables.Fake, *clocktesting.FakeClock) {
	t.Helper()
	nft := knftables.NewFake(knftables.IPv4Family, Table)
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	return New(testConfig, nft, clk, nil), nft, clk
}

func mustSync(t *testing.T, p *Proxier, st *proxy.SyncState) {
	t.Helper()
	if err := p.Sync(st); err != nil {
		t.Fatal(err)
	}
}

func routeOf(t *testing.T, nft *knftables.Fake, from, dst net.IP, port int) string {
	t.Helper()
	sh, err := Route(nft.Table, []net.IP{node}, route.Packet{Src: from, Dst: dst, DPort: port, Protocol: "tcp"})
	if err != nil {
		t.Fatal(err)
	}
	return sh.String()
}

// numgen random mod N gives each of N endpoints exactly 1/N, from a pod,
// from outside and from the node itself.
func TestEachOfNEndpointsGetsExactlyOneNth(t *testing.T) {
	for n := 1; n <= 5; n++ {
		p, nft, _ := newTest(t)
		mustSync(t, p, state(n, nil))
		var want []string
		for i := 1; i <= n; i++ {
			want = append(want, fmt.Sprintf("10.244.0.%d:8080: %s", i, big.NewRat(1, int64(n)).RatString()))
		}
		for _, from := range []net.IP{pod, outside, node} {
			if got := routeOf(t, nft, from, vip, 80); got != "{"+strings.Join(want, ", ")+"}" {
				t.Errorf("n=%d from %s: %s", n, from, got)
			}
		}
	}
}

// No endpoints: the ClusterIP is rejected (no-endpoint-services, goto
// reject-chain); an undefined port of a ClusterIP is rejected by
// cluster-ips-check; an address that is no service is left alone.
func TestNoEndpointsRejects(t *testing.T) {
	p, nft, _ := newTest(t)
	mustSync(t, p, state(0, nil))
	if got := routeOf(t, nft, pod, vip, 80); got != "{REJECT: 1}" {
		t.Errorf("no endpoints: %s", got)
	}
	mustSync(t, p, state(2, nil))
	if got := routeOf(t, nft, pod, vip, 81); got != "{REJECT: 1}" {
		t.Errorf("undefined port: %s", got)
	}
	if got := routeOf(t, nft, pod, net.ParseIP("10.96.0.99"), 80); got != "{ACCEPT: 1}" {
		t.Errorf("not a service: %s", got)
	}
}

// External entry points go through the external- chain: NodePort on the
// node's address, external IPs and LoadBalancer IPs.
func TestExternalEntryPoints(t *testing.T) {
	ext := func(sp *proxy.ServicePort) {
		sp.NodePort = 30080
		sp.ExternalIPs = []string{"198.51.100.7"}
		sp.LoadBalancerIPs = []string{"198.51.100.8"}
	}
	p, nft, _ := newTest(t)
	mustSync(t, p, state(2, ext))
	want := "{10.244.0.1:8080: 1/2, 10.244.0.2:8080: 1/2}"
	for _, c := range []struct {
		dst  net.IP
		port int
	}{{node, 30080}, {net.ParseIP("198.51.100.7"), 80}, {net.ParseIP("198.51.100.8"), 80}, {vip, 80}} {
		if got := routeOf(t, nft, outside, c.dst, c.port); got != want {
			t.Errorf("%s:%d: %s, want %s", c.dst, c.port, got, want)
		}
	}
	if !strings.Contains(nft.Dump(), "add element ip kube-proxy service-nodeports { tcp . 30080 : goto external-") {
		t.Errorf("no node port element:\n%s", nft.Dump())
	}
}

// loadBalancerSourceRanges: a client outside the ranges is dropped at the
// LoadBalancer IP and only there, one inside reaches the endpoints; a range
// holding the node IP lets the VIP in as a source; the firewall stays
// without endpoints; removing the ranges flushes the firewall- chain and
// a sync more than a second later deletes it.
func TestLoadBalancerSourceRanges(t *testing.T) {
	lbIP := net.ParseIP("198.51.100.8")
	stranger := net.ParseIP("198.18.0.7")
	guarded := func(sp *proxy.ServicePort) {
		sp.NodePort = 30080
		sp.LoadBalancerIPs = []string{lbIP.String()}
		sp.LoadBalancerSourceRanges = []string{"203.0.113.0/24", "192.168.0.0/24"}
	}
	p, nft, clk := newTest(t)
	p.cfg.NodeIP = node
	mustSync(t, p, state(2, guarded))
	spread := "{10.244.0.1:8080: 1/2, 10.244.0.2:8080: 1/2}"
	for _, c := range []struct {
		from, dst net.IP
		port      int
		want      string
	}{
		{outside, lbIP, 80, spread},
		{stranger, lbIP, 80, "{DROP: 1}"},
		{lbIP, lbIP, 80, spread},
		{stranger, node, 30080, spread},
		{stranger, vip, 80, spread},
	} {
		if got := routeOf(t, nft, c.from, c.dst, c.port); got != c.want {
			t.Errorf("%s -> %s:%d: %s, want %s", c.from, c.dst, c.port, got, c.want)
		}
	}
	fw := ServiceChain(PrefixFirewall, web)
	wantRule := "add rule ip kube-proxy " + fw + " ip saddr != { 203.0.113.0/24 , 192.168.0.0/24 , 198.51.100.8 } drop"
	if !strings.Contains(nft.Dump(), wantRule) {
		t.Errorf("no %q in\n%s", wantRule, nft.Dump())
	}

	mustSync(t, p, state(0, guarded))
	if got := routeOf(t, nft, stranger, lbIP, 80); got != "{DROP: 1}" {
		t.Errorf("without endpoints, outsider: %s", got)
	}
	if got := routeOf(t, nft, outside, lbIP, 80); got != "{REJECT: 1}" {
		t.Errorf("without endpoints, insider: %s", got)
	}

	mustSync(t, p, state(2, func(sp *proxy.ServicePort) { guarded(sp); sp.LoadBalancerSourceRanges = nil }))
	if got := routeOf(t, nft, stranger, lbIP, 80); got != spread {
		t.Errorf("ranges removed: %s", got)
	}
	if ch := nft.Table.Chains[fw]; ch == nil || len(ch.Rules) != 0 {
		t.Errorf("firewall chain after the ranges went: %+v, want it flushed", ch)
	}
	if strings.Contains(nft.Dump(), "add element ip kube-proxy firewall-ips") {
		t.Errorf("firewall-ips still has an element:\n%s", nft.Dump())
	}
	clk.Step(2 * time.Second)
	st := state(2, func(sp *proxy.ServicePort) { guarded(sp); sp.LoadBalancerSourceRanges = nil })
	st.ServiceChanges = proxy.ServiceMapResult{}
	mustSync(t, p, st)
	if nft.Table.Chains[fw] != nil {
		t.Errorf("firewall chain still there a second later")
	}
}

// externalTrafficPolicy Local: no local endpoint drops outside clients at
// the node port, pods still reach every endpoint (short-circuit); with a
// local endpoint, outside clients reach only it.
func TestExternalPolicyLocal(t *testing.T) {
	local := func(sp *proxy.ServicePort) { sp.NodePort = 30080; sp.ExternalPolicyLocal = true }
	p, nft, _ := newTest(t)
	mustSync(t, p, state(2, local))
	if got := routeOf(t, nft, outside, node, 30080); got != "{DROP: 1}" {
		t.Errorf("no local endpoint, outside client: %s", got)
	}
	if got := routeOf(t, nft, pod, node, 30080); got != "{10.244.0.1:8080: 1/2, 10.244.0.2:8080: 1/2}" {
		t.Errorf("no local endpoint, pod: %s", got)
	}
	if m := p.Metrics(); m.NoLocalEndpointsExternal != 1 || m.NoLocalEndpointsInternal != 0 {
		t.Errorf("no-local-endpoints gauges: %+v", m)
	}
	st := state(2, local)
	st.Endpoints[web][1].IsLocal = true
	mustSync(t, p, st)
	if got := routeOf(t, nft, outside, node, 30080); got != "{10.244.0.2:8080: 1}" {
		t.Errorf("one local endpoint, outside client: %s", got)
	}
	if !strings.Contains(nft.Dump(), "add element ip kube-proxy hairpin-connections { 10.244.0.2 . 10.244.0.2 . tcp . 8080 }") {
		t.Errorf("a local endpoint must be in hairpin-connections:\n%s", nft.Dump())
	}
}

// internalTrafficPolicy Local with no local endpoint drops ClusterIP
// traffic; with one, all of it goes there.
func TestInternalPolicyLocal(t *testing.T) {
	local := func(sp *proxy.ServicePort) { sp.InternalPolicyLocal = true }
	p, nft, _ := newTest(t)
	mustSync(t, p, state(3, local))
	if got := routeOf(t, nft, pod, vip, 80); got != "{DROP: 1}" {
		t.Errorf("no local endpoint: %s", got)
	}
	st := state(3, local)
	st.Endpoints[web][2].IsLocal = true
	mustSync(t, p, st)
	if got := routeOf(t, nft, pod, vip, 80); got != "{10.244.0.3:8080: 1}" {
		t.Errorf("one local endpoint: %s", got)
	}
}

// ClientIP affinity: endpoint chains and affinity sets with the timeout; a
// first connection spreads 1/N; a second one within the timeout goes where
// the first went, one after the timeout spreads again.
func TestAffinity(t *testing.T) {
	aff := func(sp *proxy.ServicePort) { sp.SessionAffinityClientIP = true; sp.StickyMaxAgeSeconds = 10 }
	p, nft, _ := newTest(t)
	mustSync(t, p, state(2, aff))
	dump := nft.Dump()
	for _, want := range []string{
		"add set ip kube-proxy affinity-",
		"flags dynamic,timeout ; timeout 10s ; }",
		"numgen random mod 2 vmap { 0 : goto endpoint-",
		"update @affinity-",
	} {
		if !strings.Contains(dump, want) {
			t.Errorf("missing %q in\n%s", want, dump)
		}
	}
	if got := routeOf(t, nft, pod, vip, 80); got != "{10.244.0.1:8080: 1/2, 10.244.0.2:8080: 1/2}" {
		t.Errorf("first connection: %s", got)
	}
	pkt := route.Packet{Src: pod, Dst: vip, DPort: 80, Protocol: "tcp"}
	sh, err := RouteAgain(nft.Table, []net.IP{node}, pkt, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got := sh.String(); got != "{10.244.0.1:8080 -> 10.244.0.1:8080: 1/2, 10.244.0.2:8080 -> 10.244.0.2:8080: 1/2}" {
		t.Errorf("second connection within the timeout: %s", got)
	}
	sh, _ = RouteAgain(nft.Table, []net.IP{node}, pkt, 10*time.Second)
	if len(sh) != 4 {
		t.Errorf("second connection after the timeout must spread again: %s", sh)
	}
	// A kernel measuring these routes empties both sets before each trial,
	// and between a pair's connections only once the gap reaches the
	// timeout, as the tracer judges.
	for _, c := range []struct {
		again  *time.Duration
		expire int
	}{{nil, 0}, {ptr(5 * time.Second), 0}, {ptr(10 * time.Second), 2}} {
		pr := ProbeFor(nft.Table, c.again)
		if len(pr.Forget) != 2 || !strings.HasPrefix(pr.Forget[0], PrefixAffinity) || pr.Again != (c.again != nil) || len(pr.Expire) != c.expire {
			t.Errorf("again %v: probe %+v", c.again, pr)
		}
	}
	// Without affinity the second connection is independent of the first.
	p2, nft2, _ := newTest(t)
	mustSync(t, p2, state(2, nil))
	if sh, _ := RouteAgain(nft2.Table, []net.IP{node}, pkt, time.Second); len(sh) != 4 {
		t.Errorf("no affinity: %s", sh)
	}
	// Removing affinity deletes the sets at once and leaves the endpoint
	// chains flushed until a later sync.
	mustSync(t, p, state(2, nil))
	if d := nft.Dump(); strings.Contains(d, "add set ip kube-proxy affinity-") {
		t.Errorf("affinity sets must go at once:\n%s", d)
	}
	if len(p.StaleChains()) != 2 {
		t.Errorf("stale endpoint chains: %v", p.StaleChains())
	}
}

// two services, web and api; changed lists the services a sync is told
// changed.
func twoServices(webEPs, apiEPs int, changed ...string) *proxy.SyncState {
	st := state(webEPs, nil)
	apiName := types.NamespacedName{Namespace: "default", Name: "api"}
	api := proxy.ServicePortName{NamespacedName: apiName, Port: "http", Protocol: v1.ProtocolTCP}
	st.Services[api] = &proxy.ServicePort{ClusterIP: net.ParseIP("10.96.0.11"), Port: 80, Protocol: v1.ProtocolTCP}
	for i := 1; i <= apiEPs; i++ {
		st.Endpoints[api] = append(st.Endpoints[api], &proxy.Endpoint{IP: fmt.Sprintf("10.245.0.%d", i), Port: 9090, Ready: true, Serving: true})
	}
	st.ServiceChanges.Updated = nil
	for _, c := range changed {
		st.ServiceChanges.Updated = append(st.ServiceChanges.Updated, types.NamespacedName{Namespace: "default", Name: c})
	}
	return st
}

func lastTx(nft *knftables.Fake) string {
	nft.RLock()
	defer nft.RUnlock()
	return nft.LastTransaction.String()
}

// A partial sync rewrites only the changed service's chain and writes
// element diffs; the first sync and one after FullSyncPeriod are full.
func TestPartialAndFullSyncs(t *testing.T) {
	p, nft, clk := newTest(t)
	mustSync(t, p, twoServices(2, 2, "web", "api"))
	if tx := lastTx(nft); !strings.Contains(tx, "add table") {
		t.Fatalf("first sync must be full:\n%s", tx)
	}
	clk.Step(time.Second)
	mustSync(t, p, twoServices(3, 2, "web"))
	tx := lastTx(nft)
	if strings.Contains(tx, "add table") || strings.Contains(tx, "default/api") || !strings.Contains(tx, "flush chain ip kube-proxy service-SUSTUHLJ-default/web/tcp/http") {
		t.Errorf("partial sync must rewrite web only:\n%s", tx)
	}
	clk.Step(time.Second)
	mustSync(t, p, twoServices(3, 2))
	if tx := lastTx(nft); tx != "" {
		t.Errorf("nothing changed, nothing to write, got:\n%s", tx)
	}
	clk.Step(FullSyncPeriod)
	mustSync(t, p, twoServices(3, 2))
	if tx := lastTx(nft); !strings.Contains(tx, "add table") || !strings.Contains(tx, "default/api") {
		t.Errorf("a sync more than FullSyncPeriod after the last full one is full:\n%s", tx)
	}
	if m := p.Metrics(); m.FullSyncs != 2 || m.PartialSyncs != 2 {
		t.Errorf("metrics: %+v", m)
	}
}

// A removed service's chain is flushed at once (its map element goes in
// the same transaction) and deleted only by a sync starting more than
// StaleChainDelay after the previous one: every sync that still finds the
// chain flushes it again and stamps it with its own start (kube-proxy's
// syncProxyRules), so under syncs less than a second apart it stays.
func TestStaleChainsWaitASecond(t *testing.T) {
	p, nft, clk := newTest(t)
	mustSync(t, p, twoServices(2, 2, "web", "api"))
	st := twoServices(2, 0, "api")
	delete(st.Services, proxy.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "default", Name: "api"}, Port: "http", Protocol: v1.ProtocolTCP})
	mustSync(t, p, st)
	apiChain := "service-"
	for _, c := range p.StaleChains() {
		apiChain = c
	}
	if !strings.Contains(apiChain, "default/api") || nft.Table.Chains[apiChain] == nil || len(nft.Table.Chains[apiChain].Rules) != 0 {
		t.Fatalf("api's chain must be stale, flushed and still there: %v", p.StaleChains())
	}
	st.ServiceChanges.Updated = nil
	for i := 0; i < 5; i++ {
		clk.Step(999 * time.Millisecond)
		mustSync(t, p, st)
		if nft.Table.Chains[apiChain] == nil {
			t.Fatalf("deleted by a sync %d 999ms after the previous one", i)
		}
	}
	clk.Step(time.Second)
	mustSync(t, p, st)
	if nft.Table.Chains[apiChain] == nil {
		t.Fatal("deleted exactly 1s after, want more than 1s")
	}
	clk.Step(time.Second + time.Nanosecond)
	mustSync(t, p, st)
	if nft.Table.Chains[apiChain] != nil || len(p.StaleChains()) != 0 {
		t.Errorf("a sync more than 1s after the previous one must delete it: %v", p.StaleChains())
	}
}

// A failed transaction fails the sync, changes nothing, forgets the stale
// chains and makes the next sync full; a failed cleanup is counted and
// makes its sync full.
func TestFailedTransactions(t *testing.T) {
	nft := knftables.NewFake(knftables.IPv4Family, Table)
	faults := WithFaults(nft)
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	p := New(testConfig, faults, clk, nil)
	mustSync(t, p, twoServices(2, 2, "web", "api"))
	before := nft.Dump()
	faults.FailNext(1)
	if err := p.Sync(twoServices(3, 2, "web")); err == nil {
		t.Fatal("want the sync to fail")
	}
	if nft.Dump() != before {
		t.Error("a failed transaction must change nothing")
	}
	if m := p.Metrics(); m.SyncFailures != 1 {
		t.Errorf("metrics: %+v", m)
	}
	mustSync(t, p, twoServices(3, 2))
	if tx := lastTx(nft); !strings.Contains(tx, "add table") {
		t.Errorf("the sync after a failure must be full:\n%s", tx)
	}
	if got := routeOf(t, nft, pod, vip, 80); !strings.Contains(got, "10.244.0.3:8080: 1/3") {
		t.Errorf("the retry must program the change: %s", got)
	}

	// A stale chain whose deletion fails.
	st := twoServices(3, 0)
	delete(st.Services, proxy.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "default", Name: "api"}, Port: "http", Protocol: v1.ProtocolTCP})
	mustSync(t, p, st)
	clk.Step(2 * time.Second)
	faults.FailNext(1)
	full := p.Metrics().FullSyncs
	mustSync(t, p, st)
	if m := p.Metrics(); m.CleanupFailures != 1 || m.FullSyncs != full+1 {
		t.Errorf("a failed cleanup is counted and makes the sync full: %+v", m)
	}
}

// Property: partial syncs with element diffs leave exactly the table that
// a full sync of the same state leaves, after every step of random churn.
func TestPartialSyncsEqualFullSyncs(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for seq := 0; seq < 50; seq++ {
		pPart, nftPart, clkPart := newTest(t)
		st := &proxy.SyncState{Services: proxy.ServiceMap{}, Endpoints: proxy.EndpointsMap{}, NodeName: "node-1"}
		for step := 0; step < 20; step++ {
			changed := randomChange(rng, st)
			st.ServiceChanges.Updated = changed
			clkPart.Step(time.Duration(rng.IntN(1500)) * time.Millisecond)
			mustSync(t, pPart, st)
			pFull, nftFull, _ := newTest(t)
			mustSync(t, pFull, st)
			if got, want := liveDump(nftPart, pPart), liveDump(nftFull, pFull); got != want {
				t.Fatalf("seq %d step %d: partial and full differ\npartial:\n%s\nfull:\n%s", seq, step, got, want)
			}
		}
	}
}

// liveDump is the dump without stale chains (flushed, awaiting deletion)
// and with elements sorted: the two proxiers reach the same state by
// different histories, so element order differs.
func liveDump(nft *knftables.Fake, p *Proxier) string {
	stale := map[string]bool{}
	for _, c := range p.StaleChains() {
		stale[c] = true
	}
	var keep []string
	for _, l := range strings.Split(nft.Dump(), "\n") {
		f := strings.Fields(l)
		if len(f) >= 5 && f[1] == "chain" && stale[f[4]] {
			continue
		}
		keep = append(keep, l)
	}
	return SortElements(strings.Join(keep, "\n"))
}

var services = []string{"a", "b", "c", "d"}

// randomChange changes one or two services of st at random: endpoints
// added, removed or made local, the service added or removed, its
// policies and affinity flipped. It returns the services it changed.
func randomChange(rng *rand.Rand, st *proxy.SyncState) []types.NamespacedName {
	var out []types.NamespacedName
	for k := 0; k < 1+rng.IntN(2); k++ {
		name := services[rng.IntN(len(services))]
		nn := types.NamespacedName{Namespace: "ns", Name: name}
		spn := proxy.ServicePortName{NamespacedName: nn, Port: "p", Protocol: v1.ProtocolTCP}
		out = append(out, nn)
		idx := int(name[0] - 'a')
		switch rng.IntN(6) {
		case 0:
			delete(st.Services, spn)
			delete(st.Endpoints, spn)
			continue
		case 1:
			st.Endpoints[spn] = nil
		}
		sp := st.Services[spn]
		if sp == nil {
			sp = &proxy.ServicePort{ClusterIP: net.ParseIP(fmt.Sprintf("10.96.0.%d", 10+idx)), Port: 80, Protocol: v1.ProtocolTCP}
		}
		cp := *sp
		switch rng.IntN(5) {
		case 0:
			cp.SessionAffinityClientIP = !cp.SessionAffinityClientIP
			cp.StickyMaxAgeSeconds = 60
		case 1:
			if cp.NodePort == 0 {
				cp.NodePort = int32(30000 + idx)
			} else {
				cp.NodePort = 0
			}
		case 2:
			cp.ExternalPolicyLocal = !cp.ExternalPolicyLocal && cp.NodePort != 0
		case 3:
			cp.InternalPolicyLocal = !cp.InternalPolicyLocal
		case 4:
			if cp.LoadBalancerSourceRanges == nil {
				cp.LoadBalancerIPs = []string{fmt.Sprintf("198.51.100.%d", 10+idx)}
				cp.LoadBalancerSourceRanges = []string{"203.0.113.0/24"}
			} else {
				cp.LoadBalancerIPs, cp.LoadBalancerSourceRanges = nil, nil
			}
		}
		st.Services[spn] = &cp
		var eps []*proxy.Endpoint
		for i := 1; i <= 4; i++ {
			if rng.IntN(2) == 0 {
				eps = append(eps, &proxy.Endpoint{IP: fmt.Sprintf("10.244.%d.%d", idx, i), Port: 8080, Ready: true, Serving: true, IsLocal: rng.IntN(3) == 0})
			}
		}
		st.Endpoints[spn] = eps
	}
	return out
}

// Mirror runs a transaction on the real interface, then on the shadow;
// one the real interface refuses reaches neither.
func TestMirrorKeepsTheShadowInStep(t *testing.T) {
	real := knftables.NewFake(knftables.IPv4Family, Table)
	m := &Mirror{Real: real, Shadow: knftables.NewFake(knftables.IPv4Family, Table)}
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	p := New(testConfig, m, clk, nil)
	mustSync(t, p, state(3, nil))
	if real.Dump() != m.Shadow.Dump() {
		t.Fatal("the shadow must hold what the real one holds")
	}
	// A transaction the real one refuses reaches neither.
	before := m.Shadow.Dump()
	tx := m.NewTransaction()
	tx.Add(&knftables.Rule{Chain: "no-such-chain", Rule: "drop"})
	if m.Run(context.Background(), tx) == nil || m.Shadow.Dump() != before {
		t.Error("a refused transaction must fail and leave the shadow alone")
	}
}

func ptr[T any](v T) *T { return &v }
