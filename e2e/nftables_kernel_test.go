package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/knftables"

	"github.com/proxysim/proxysim/netns"
	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/nftablesmode"
	"github.com/proxysim/proxysim/scenarios/replay"
	"github.com/proxysim/proxysim/scenarios/routeexpect"
	"github.com/proxysim/proxysim/sim/ipvs"
	"github.com/proxysim/proxysim/sim/nftables"
	"github.com/proxysim/proxysim/sim/proxy"
	"github.com/proxysim/proxysim/sim/route"
	"github.com/proxysim/proxysim/sim/vclock"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

const howToRunHost = "needs root and nft: run `make e2e-host` (netns/hostdeps.sh installs nftables)"

// nftNode is proxysim's nftables proxier programming the kube-proxy table
// in the node namespace of a topology, through a Mirror whose shadow fake
// the tracer reads.
type nftNode struct {
	topo   *netns.Topology
	real   *netns.NFTables
	mirror *nftables.Mirror
	p      *nftables.Proxier
	local  []net.IP
}

var (
	nftVIP  = net.ParseIP("10.96.0.10")
	nftWeb  = proxy.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "default", Name: "web"}, Port: "http", Protocol: v1.ProtocolTCP}
	nftPort = 80
)

func newNFTNode(backends int) *nftNode {
	topo, err := netns.BuildTopology(backends)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(topo.Destroy)
	Expect(topo.Node.Sysctl().Set("net/ipv4/ip_forward", 1)).To(Succeed())
	// A node has a default route, as every cluster node does: without one
	// the kernel refuses traffic to a ClusterIP it did not DNAT while
	// routing, before the filter hooks (and kube-proxy's drop and reject
	// rules) see it. This one leads back to the client's segment.
	Expect(topo.Node.DefaultRoute("10.0.0.9")).To(Succeed())
	// The node's ICMP rate limit per destination would turn some rejects
	// into silent drops; kube-proxy's reject is what is checked here.
	Expect(topo.Node.Sysctl().Set("net/ipv4/icmp_ratelimit", 0)).To(Succeed())
	real, err := topo.Node.NFTables(knftables.IPv4Family, nftables.Table)
	Expect(err).NotTo(HaveOccurred())
	m := &nftables.Mirror{Real: real, Shadow: knftables.NewFake(knftables.IPv4Family, nftables.Table)}
	n := &nftNode{topo: topo, real: real, mirror: m,
		p: nftables.New(nftables.Config{ClusterCIDR: "10.244.0.0/16"}, m, clocktesting.NewFakeClock(vclock.Epoch), nil)}
	n.local = append(n.local, net.ParseIP("10.0.0.1"))
	for k := range backends {
		n.local = append(n.local, net.ParseIP(fmt.Sprintf("10.244.%d.1", k+1)))
	}
	return n
}

// sync programs web with the given backends (1-based indexes into the
// topology's), local ones marked.
func (n *nftNode) sync(mutate func(*proxy.ServicePort), backends []int, local map[int]bool) {
	sp := &proxy.ServicePort{ClusterIP: nftVIP, Port: int32(nftPort), Protocol: v1.ProtocolTCP}
	if mutate != nil {
		mutate(sp)
	}
	st := &proxy.SyncState{Services: proxy.ServiceMap{nftWeb: sp}, Endpoints: proxy.EndpointsMap{}, NodeName: "node-a",
		ServiceChanges: proxy.ServiceMapResult{Updated: []types.NamespacedName{nftWeb.NamespacedName}}}
	for _, k := range backends {
		st.Endpoints[nftWeb] = append(st.Endpoints[nftWeb], &proxy.Endpoint{IP: n.topo.Backends[k-1].IP, Port: netns.BackendPort,
			Ready: true, Serving: true, IsLocal: local[k]})
	}
	n.syncState(st)
}

func (n *nftNode) syncState(st *proxy.SyncState) {
	Expect(n.p.Sync(st)).To(Succeed())
	Expect(n.real.Verify(n.mirror.Shadow.Dump())).To(Succeed())
}

// traced is the tracer's answer over the shadow, for a client of the
// topology.
func (n *nftNode) traced(client string) route.Shares {
	n.mirror.Shadow.RLock()
	defer n.mirror.Shadow.RUnlock()
	sh, err := nftables.Route(n.mirror.Shadow.Table, n.local, route.Packet{Src: net.ParseIP(client), Dst: nftVIP, DPort: nftPort, Protocol: "tcp"})
	Expect(err).NotTo(HaveOccurred())
	return sh
}

// nextPort gives every connection of a spec a source port of its own: a
// connection reset by the client leaves its conntrack entry behind for a
// while, and the kernel would reuse an ephemeral port at once, so that a
// "new" connection would meet the old entry (and its NAT binding).
var nextPort = 20000

// connect opens count connections from client to the VIP and counts
// where they went: a backend's ip:port, "refused" or "timeout".
func (n *nftNode) connect(client string, count int) map[string]int {
	return n.connectTo(client, net.JoinHostPort(nftVIP.String(), fmt.Sprint(nftPort)), count)
}

// connectTo is connect to any ip:port.
func (n *nftNode) connectTo(client, target string, count int) map[string]int {
	got := map[string]int{}
	for range count {
		nextPort++
		name := fmt.Sprintf("c%d", nextPort)
		res := n.topo.Connect(name, "TCP", fmt.Sprintf("%s:%d", client, nextPort), target)
		var ne net.Error
		switch {
		case res.Err == nil:
			got[res.Server]++
			Expect(n.topo.Reset(name)).To(Succeed())
		case errors.Is(res.Err, ipvs.ErrRefused):
			got["refused"]++
		case errors.Is(res.Err, ipvs.ErrTimeout), errors.As(res.Err, &ne) && ne.Timeout():
			got["timeout"]++
		default:
			got["error: "+res.Err.Error()]++
		}
	}
	return got
}

// withinChiSquare checks a measured spread at netns.Significance the way
// netns.MeasureWith does: a sample that is off is followed by a fresh one,
// which decides, so a right prediction fails by chance once in a million
// checks rather than once in a thousand, and a wrong one (off in every
// sample) still fails. sample returns the counts, the statistic and its
// degrees of freedom.
func withinChiSquare(what string, sample func() (map[string]int, float64, int)) {
	for try := 1; ; try++ {
		got, stat, df := sample()
		bound := netns.ChiSquareCritical(df)
		report("spread %s (sample %d): %v; chi-square %.3f, df %d, bound %.3f", what, try, got, stat, df, bound)
		if stat < bound || try == 2 {
			Expect(stat).To(BeNumerically("<", bound), "%s: %v", what, got)
			return
		}
	}
}

// chiSquare is Pearson's statistic of the observed counts against the
// traced shares, and its degrees of freedom.
func chiSquare(got map[string]int, shares route.Shares, total int) (float64, int) {
	stat := 0.0
	for _, k := range shares.Keys() {
		exp, _ := new(big.Rat).Mul(shares[k], big.NewRat(int64(total), 1)).Float64()
		d := float64(got[k]) - exp
		stat += d * d / exp
	}
	return stat, len(shares) - 1
}

var _ = Describe("nftables on this host's kernel", Label("host-kernel"), func() {
	BeforeEach(func() {
		requireNFT()
	})

	It("spreads new connections as the tracer says, within chi-square at p = 0.001", func() {
		n := newNFTNode(3)
		n.sync(nil, []int{1, 2, 3}, nil)
		shares := n.traced("10.0.0.5")
		Expect(shares.String()).To(Equal("{10.244.1.2:8080: 1/3, 10.244.2.2:8080: 1/3, 10.244.3.2:8080: 1/3}"))
		const total = 600
		withinChiSquare("three endpoints", func() (map[string]int, float64, int) {
			got := n.connect("10.0.0.5", total)
			Expect(len(got)).To(Equal(3), fmt.Sprint(got))
			stat, df := chiSquare(got, shares, total)
			return got, stat, df
		})

		// Two endpoints: the same rule with mod 2.
		n.sync(nil, []int{2, 3}, nil)
		shares = n.traced("10.0.0.5")
		withinChiSquare("two endpoints", func() (map[string]int, float64, int) {
			got := n.connect("10.0.0.5", total)
			Expect(len(got)).To(Equal(2), fmt.Sprint(got))
			stat, df := chiSquare(got, shares, total)
			return got, stat, df
		})
	})

	It("keeps a client on one endpoint with ClientIP affinity, as the tracer says", func() {
		n := newNFTNode(3)
		n.sync(func(sp *proxy.ServicePort) { sp.SessionAffinityClientIP = true; sp.StickyMaxAgeSeconds = 60 }, []int{1, 2, 3}, nil)
		n.mirror.Shadow.RLock()
		again, err := nftables.RouteAgain(n.mirror.Shadow.Table, n.local, route.Packet{Src: net.ParseIP("10.0.0.6"), Dst: nftVIP, DPort: nftPort, Protocol: "tcp"}, time.Second)
		n.mirror.Shadow.RUnlock()
		Expect(err).NotTo(HaveOccurred())
		Expect(again).To(HaveLen(3)) // only "X -> X" pairs
		for _, client := range []string{"10.0.0.6", "10.0.0.7"} {
			got := n.connect(client, 30)
			GinkgoWriter.Printf("affinity, client %s: %v\n", client, got)
			Expect(got).To(HaveLen(1), "every connection of one client to one endpoint")
		}
		out, err := n.real.ListTable(knftables.IPv4Family, nftables.Table)
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(ContainSubstring("10.0.0.6"), "the kernel's affinity set holds the client")
	})

	It("honours internalTrafficPolicy Local: only the local endpoint, or a drop", func() {
		n := newNFTNode(3)
		local := func(sp *proxy.ServicePort) { sp.InternalPolicyLocal = true }
		n.sync(local, []int{1, 2, 3}, map[int]bool{2: true})
		Expect(n.traced("10.0.0.5").String()).To(Equal("{10.244.2.2:8080: 1}"))
		Expect(n.connect("10.0.0.5", 20)).To(Equal(map[string]int{"10.244.2.2:8080": 20}))

		n.sync(local, []int{1, 3}, nil)
		Expect(n.traced("10.0.0.5").String()).To(Equal("{DROP: 1}"))
		n.topo.ConnectTimeout = 500 * time.Millisecond
		Expect(n.connect("10.0.0.5", 2)).To(Equal(map[string]int{"timeout": 2}))
	})

	It("serves a NodePort on the node's address as the tracer says; externalTrafficPolicy Local keeps outside clients local", func() {
		n := newNFTNode(3)
		np := func(local bool) func(*proxy.ServicePort) {
			return func(sp *proxy.ServicePort) { sp.NodePort = 30080; sp.ExternalPolicyLocal = local }
		}
		n.sync(np(false), []int{1, 2, 3}, nil)
		n.mirror.Shadow.RLock()
		shares, err := nftables.Route(n.mirror.Shadow.Table, n.local, route.Packet{Src: net.ParseIP("10.0.0.5"), Dst: net.ParseIP("10.0.0.1"), DPort: 30080, Protocol: "tcp"})
		n.mirror.Shadow.RUnlock()
		Expect(err).NotTo(HaveOccurred())
		Expect(shares).To(HaveLen(3))
		const total = 300
		withinChiSquare("node port", func() (map[string]int, float64, int) {
			got := n.connectTo("10.0.0.5", "10.0.0.1:30080", total)
			Expect(got).To(HaveLen(3), fmt.Sprint(got))
			stat, df := chiSquare(got, shares, total)
			return got, stat, df
		})

		n.sync(np(true), []int{1, 2, 3}, map[int]bool{3: true})
		Expect(n.connectTo("10.0.0.5", "10.0.0.1:30080", 20)).To(Equal(map[string]int{"10.244.3.2:8080": 20}))
	})

	It("drops clients outside loadBalancerSourceRanges at the LoadBalancer IP, as the tracer says", func() {
		n := newNFTNode(2)
		lb := net.ParseIP("198.51.100.8")
		n.sync(func(sp *proxy.ServicePort) {
			sp.LoadBalancerIPs = []string{lb.String()}
			sp.LoadBalancerSourceRanges = []string{"10.0.0.5/32"}
		}, []int{1, 2}, nil)
		traced := func(client string) string {
			n.mirror.Shadow.RLock()
			defer n.mirror.Shadow.RUnlock()
			sh, err := nftables.Route(n.mirror.Shadow.Table, n.local, route.Packet{Src: net.ParseIP(client), Dst: lb, DPort: nftPort, Protocol: "tcp"})
			Expect(err).NotTo(HaveOccurred())
			return sh.String()
		}
		target := net.JoinHostPort(lb.String(), fmt.Sprint(nftPort))
		Expect(traced("10.0.0.5")).To(Equal("{10.244.1.2:8080: 1/2, 10.244.2.2:8080: 1/2}"))
		got := n.connectTo("10.0.0.5", target, 20)
		Expect(got).To(HaveLen(2), fmt.Sprint(got))
		Expect(got["10.244.1.2:8080"] + got["10.244.2.2:8080"]).To(Equal(20))

		Expect(traced("10.0.0.6")).To(Equal("{DROP: 1}"))
		n.topo.ConnectTimeout = 500 * time.Millisecond
		Expect(n.connectTo("10.0.0.6", target, 2)).To(Equal(map[string]int{"timeout": 2}))
		cip := n.connect("10.0.0.6", 10)
		Expect(cip["10.244.1.2:8080"]+cip["10.244.2.2:8080"]).To(Equal(10), "the ClusterIP is not guarded: %v", cip)
	})

	It("rejects a service whose endpoints are gone, and forgets a deleted one", func() {
		n := newNFTNode(2)
		n.sync(nil, []int{1, 2}, nil)
		Expect(n.connect("10.0.0.5", 10)).To(HaveLen(2))

		n.sync(nil, nil, nil)
		Expect(n.traced("10.0.0.5").String()).To(Equal("{REJECT: 1}"))
		Expect(n.connect("10.0.0.5", 3)).To(Equal(map[string]int{"refused": 3}))

		n.syncState(&proxy.SyncState{Services: proxy.ServiceMap{}, Endpoints: proxy.EndpointsMap{}, NodeName: "node-a",
			ServiceChanges: proxy.ServiceMapResult{Updated: []types.NamespacedName{nftWeb.NamespacedName}}})
		Expect(n.traced("10.0.0.5").String()).To(Equal("{ACCEPT: 1}"), "no rule takes it: forwarded unchanged")
		n.topo.ConnectTimeout = 500 * time.Millisecond
		got := n.connect("10.0.0.5", 2)
		for k := range got {
			Expect(k).NotTo(HavePrefix("10.244."), "no endpoint may answer a deleted service")
		}
	})
})

// nftOnKernel is the nftables mode on this kernel; each dataplane it opens
// is handed to opened and removed when the spec ends.
func nftOnKernel(opened func(*netns.NFTablesDataplane)) scenarios.DataplaneFactory {
	return nftablesmode.OnKernel(func(nodeIPs []string) (nftablesmode.Kernel, error) {
		d, err := netns.OpenNFTablesDataplane(nodeIPs)
		if err != nil {
			return nil, err
		}
		DeferCleanup(func() { Expect(d.Close()).To(Succeed()) })
		opened(d)
		return keepNFTOpen{d}, nil
	})
}

// keepNFTOpen leaves the namespaces in place when the replay ends (the
// spec removes them), so a spec can measure the table the replay left.
type keepNFTOpen struct{ *netns.NFTablesDataplane }

func (keepNFTOpen) Close() error { return nil }

// routeExpectations lists a scenario's route expectations, in timeline
// order: each is measured once on a kernel.
func routeExpectations(s *scenarios.Scenario) []*routeexpect.Route {
	var out []*routeexpect.Route
	for _, st := range s.Timeline {
		if st.Expect == nil {
			continue
		}
		for _, c := range st.Expect.Checks {
			if r, ok := c.(*routeexpect.Expect); ok && r.Route != nil {
				out = append(out, r.Route)
			}
		}
	}
	return out
}

// unmeasuredNFTRoutes are the route expectations of the nftables library
// that the kernel half does not measure, keyed "scenario from -> to", with
// the reason the measurement must give. Any other route unmeasured, or
// one of these measured or unmeasured for another reason, fails.
var unmeasuredNFTRoutes = map[string]string{
	// A node reaching a LoadBalancer IP it holds, as kube-proxy lets in
	// when a source range holds the node IP: the tracer starts it at
	// prerouting like any outside client, but a client namespace that
	// owns the address would deliver it to itself.
	"nftables-source-ranges 198.51.100.10 -> 198.51.100.10:80": netns.SameAddress,
}

// nftLibrary lists the library's scenarios of mode nftables when the
// suite is built, so scenarios added later are included.
func nftLibrary() []string {
	var names []string
	for _, n := range scenarios.TestedLibraryNames() {
		if s, err := scenarios.LoadLibrary(n); err == nil && s.Proxy.Mode == nftablesmode.Name {
			names = append(names, n)
		}
	}
	return names
}

var _ = Describe("nftables scenarios on this host's kernel", Label("host-kernel"), func() {
	names := nftLibrary()
	It("has scenarios to replay", func() { Expect(len(names)).To(BeNumerically(">=", 8)) })
	for _, name := range names {
		It("replays "+name+": the kernel's table means the fake's at every golden and route, and every route's connections go where the tracer says", func() {
			requireNFT()
			s, err := scenarios.LoadLibrary(name)
			Expect(err).NotTo(HaveOccurred())
			var opened []*netns.NFTablesDataplane
			res, err := replay.Replay(s, replay.Options{Dataplane: nftOnKernel(func(d *netns.NFTablesDataplane) { opened = append(opened, d) })})
			Expect(err).NotTo(HaveOccurred())
			Expect(res.Failures).To(BeEmpty(), describe(res))
			Expect(res.Checks).To(BeNumerically(">", 0))
			Expect(opened).To(HaveLen(1))
			// Every route expectation was measured, in timeline order,
			// except those listed with their reason.
			routes := routeExpectations(s)
			ms := opened[0].Measurements()
			Expect(ms).To(HaveLen(len(routes)), "one measurement per route expectation")
			for i, rt := range routes {
				m := ms[i]
				report("route nftables %s: %s", name, m)
				Expect(m.From + " -> " + m.To).To(Equal(rt.From + " -> " + rt.To))
				key := name + " " + rt.From + " -> " + rt.To
				Expect(m.Skipped).To(Equal(unmeasuredNFTRoutes[key]), "route %s", key)
				if m.Skipped == "" {
					Expect(m.N).To(BeNumerically(">", 0))
					Expect(m.Agrees()).To(Succeed())
				}
			}
		})
	}
	It("lists as unmeasured only routes of the library", func() {
		known := map[string]bool{}
		for _, name := range names {
			s, err := scenarios.LoadLibrary(name)
			Expect(err).NotTo(HaveOccurred())
			for _, rt := range routeExpectations(s) {
				known[name+" "+rt.From+" -> "+rt.To] = true
			}
		}
		for k := range unmeasuredNFTRoutes {
			Expect(known).To(HaveKey(k))
		}
	})

	It("catches a wrong prediction: a spread over three endpoints is not 1/2, 1/4, 1/4, and pairs within the affinity timeout are not independent", func() {
		requireNFT()
		var d *netns.NFTablesDataplane
		s, err := scenarios.Parse("wrong.yaml", []byte(nftWrongScenario), nil)
		Expect(err).NotTo(HaveOccurred())
		res, err := replay.Replay(s, replay.Options{Dataplane: nftOnKernel(func(o *netns.NFTablesDataplane) { d = o })})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Failures).To(BeEmpty(), describe(res))
		eps := []string{"10.244.1.2:8080", "10.244.2.3:8080", "10.244.3.4:8080"}
		client := net.ParseIP("10.244.9.9")
		web := route.Packet{Src: client, Dst: nftVIP, DPort: 80, Protocol: "tcp"}
		wrong := route.Shares{eps[0]: big.NewRat(1, 2), eps[1]: big.NewRat(1, 4), eps[2]: big.NewRat(1, 4)}
		Expect(d.CheckRoute(web, wrong, nftables.Probe{})).To(MatchError(ContainSubstring("the spread is off")))
		right := route.Shares{eps[0]: big.NewRat(1, 3), eps[1]: big.NewRat(1, 3), eps[2]: big.NewRat(1, 3)}
		Expect(d.CheckRoute(web, right, nftables.Probe{})).To(Succeed())

		// Pairs of connections to sticky (ClientIP affinity, two
		// endpoints): within the timeout the second follows the first
		// (X -> X, 1/2 each), so claiming four independent pairs fails;
		// the same claim holds once the sets are emptied between the two.
		sets, err := d.NFTables.List(context.Background(), "set")
		Expect(err).NotTo(HaveOccurred())
		var aff []string
		for _, n := range sets {
			if strings.HasPrefix(n, nftables.PrefixAffinity) {
				aff = append(aff, n)
			}
		}
		Expect(aff).To(HaveLen(2))
		sticky := route.Packet{Src: client, Dst: net.ParseIP("10.96.0.11"), DPort: 80, Protocol: "tcp"}
		independent := route.Shares{}
		for _, a := range eps[:2] {
			for _, b := range eps[:2] {
				independent[a+" -> "+b] = big.NewRat(1, 4)
			}
		}
		kept := nftables.Probe{Forget: aff, Again: true}
		Expect(d.CheckRoute(sticky, independent, kept)).To(MatchError(ContainSubstring("the spread is off")))
		expired := nftables.Probe{Forget: aff, Again: true, Expire: aff}
		Expect(d.CheckRoute(sticky, independent, expired)).To(Succeed())
		for _, m := range d.Measurements() {
			report("wrong prediction: %s", m)
		}
	})
})

// nftWrongScenario programs web over three endpoints and sticky, with
// ClientIP affinity, over two of them; the spec measures wrong predictions
// against them.
const nftWrongScenario = `name: nft-wrong-prediction
description: a scenario the host-kernel suite generates
proxy: {mode: nftables, version: v1.36.0, minSyncPeriod: 1s, nodeName: node-a, nodeIPs: [192.168.0.2], clusterCIDR: 10.244.0.0/16}
objects:
  - apiVersion: v1
    kind: Service
    metadata: {name: web, namespace: default}
    spec:
      clusterIP: 10.96.0.10
      ports: [{name: http, port: 80, targetPort: 8080, protocol: TCP}]
  - apiVersion: discovery.k8s.io/v1
    kind: EndpointSlice
    metadata: {name: web-abc, namespace: default, labels: {kubernetes.io/service-name: web}}
    addressType: IPv4
    ports: [{name: http, port: 8080, protocol: TCP}]
    endpoints:
      - {addresses: [10.244.1.2], nodeName: node-b}
      - {addresses: [10.244.2.3], nodeName: node-c}
      - {addresses: [10.244.3.4], nodeName: node-d}
  - apiVersion: v1
    kind: Service
    metadata: {name: sticky, namespace: default}
    spec:
      clusterIP: 10.96.0.11
      ports: [{name: http, port: 80, targetPort: 8080, protocol: TCP}]
      sessionAffinity: ClientIP
      sessionAffinityConfig: {clientIP: {timeoutSeconds: 60}}
  - apiVersion: discovery.k8s.io/v1
    kind: EndpointSlice
    metadata: {name: sticky-abc, namespace: default, labels: {kubernetes.io/service-name: sticky}}
    addressType: IPv4
    ports: [{name: http, port: 8080, protocol: TCP}]
    endpoints:
      - {addresses: [10.244.1.2], nodeName: node-b}
      - {addresses: [10.244.2.3], nodeName: node-c}
timeline:
  - at: 1s
    expect: {syncs: {at: [0s]}}
`

var _ = Describe("a netns replay of the nftables library from the command line", Label("host-kernel"), func() {
	It("passes every nftables library scenario with `proxysim replay --dataplane netns`, on this kernel's nft", func() {
		requireNFT()
		names := nftLibrary()
		Expect(len(names)).To(BeNumerically(">=", 8))
		replayFromCLI(names, nil, `nftables v[0-9.]+ dataplane`)
	})
})

// replayFromCLI builds proxysim and replays the named library scenarios
// with `proxysim replay --dataplane netns` and the extra flags: each must
// pass on this kernel, on a dataplane the report names as dataplane says
// (a regular expression), and the run must leave no namespace behind.
func replayFromCLI(names, flags []string, dataplane string) {
	bin := filepath.Join(GinkgoT().TempDir(), "proxysim")
	out, err := exec.Command("go", "build", "-o", bin, "../cmd/proxysim").CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), string(out))
	start := time.Now()
	args := append(append([]string{"replay", "--dataplane", "netns"}, flags...), names...)
	cmd := exec.Command(bin, args...)
	out, err = cmd.CombinedOutput()
	report("proxysim %s of %d scenarios: %v", strings.Join(args[:len(args)-len(names)], " "), len(names), time.Since(start).Round(time.Second))
	Expect(err).NotTo(HaveOccurred(), string(out))
	for _, name := range names {
		Expect(string(out)).To(MatchRegexp(`(?m)^PASS %s \(.*netns, kernel [^,]+, %s\)`, regexp.QuoteMeta(name), dataplane), "%s", out)
	}
	Expect(namespacesOf(cmd.Process.Pid)).To(BeEmpty(), "the run removes its namespaces")
}

// requireNFT skips a spec that cannot run here (not root, no nft), or
// fails it under PROXYSIM_HOST_KERNEL_REQUIRED=1 (make e2e-host), as the
// iptables specs do.
func requireNFT() {
	why := ""
	if !netns.Privileged() {
		why = "not root"
	} else if _, err := exec.LookPath("nft"); err != nil {
		why = "no nft"
	}
	hostKernelGate(why, howToRunHost)
}
