package upstream

// kube-proxy v1.36's own nftables proxier side by side with proxysim's
// (sim/nftables), on the same random sequences of Service and
// EndpointSlice changes, each reading and writing a knftables.Fake.
//
// kube-proxy's exported nftables.NewProxier builds its knftables interface
// itself (knftables.New: `nft` on PATH, `nft --check` of a table) and has
// no seam for a fake, so the test constructs it inside a throwaway user and
// network namespace (it re-executes itself under `unshare -rn`) and then
// swaps the proxier's unexported `nftables` field for a knftables.Fake.
// From then on nothing touches a kernel: both proxiers program fakes.
// Syncs are forced through OnServiceSynced, which calls syncProxyRules
// directly (the runner never runs).
//
// Normalisations before comparing dumps (and nothing else):
//   - elements are sorted within each set and map: the Fake keeps them in
//     insertion order, and kube-proxy ranges over Go maps;
//   - service chains with no rules are dropped: those are stale chains,
//     flushed and waiting to be deleted. kube-proxy deletes them at the
//     first sync that starts more than 1 s (wall clock) after the previous
//     one, proxysim on its virtual clock, which this test never advances;
//     a slow machine would otherwise make the two differ by timing alone.
//
// Inputs are restricted to where kube-proxy's own result is deterministic:
// every service gets addresses and node ports of its own, and a service
// port repeating another's number and protocol (which the API server
// refuses) is dropped. Where two services share a map key (a ClusterIP,
// an external IP, a node port), kube-proxy's element for it is whichever
// service its Go map range met last. Services are also fed without
// healthCheckNodePort: the nftables proxier writes no rule for it, but its
// health-check server would open real listeners in every sequence.

import (
	"context"
	"flag"
	"fmt"
	"math/rand"
	"net"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	kproxynft "k8s.io/kubernetes/pkg/proxy/nftables"
	proxyutil "k8s.io/kubernetes/pkg/proxy/util"
	clocktesting "k8s.io/utils/clock/testing"
	netutils "k8s.io/utils/net"
	"sigs.k8s.io/knftables"

	"github.com/proxysim/proxysim/sim/nftables"
	"github.com/proxysim/proxysim/sim/proxy"
	"github.com/proxysim/proxysim/sim/vclock"
)

const childEnv = "PROXYSIM_NFTABLES_NETNS_CHILD"

// nftSequences is separate from -sequences: each sequence constructs
// kube-proxy's proxier, which execs nft, so a sequence costs ~60 ms here
// against ~1 ms for the trackers' comparison.
var nftSequences = flag.Int("nft-sequences", 0, "random sequences for the nftables comparison (0: skip; make upstream-nftables runs 1,000)")

// nftCoverage counts what the compared tables held, so that a run shows it
// compared something worth comparing.
var nftCoverage = map[string]int{}

var coverageMarks = []struct{ name, text string }{
	{"IPv6 tables", "add table ip6 "},
	{"affinity sets", "add set ip kube-proxy affinity-"},
	{"local- chains", " local-"},
	{"external- chains", "add chain ip kube-proxy external-"},
	{"node ports", "add element ip kube-proxy service-nodeports"},
	{"no-endpoint drops", ": drop }"},
	{"no-endpoint rejects", ": goto reject-chain }"},
	{"hairpin elements", "add element ip kube-proxy hairpin-connections"},
	{"numgen dispatch", "numgen random mod"},
	{"firewall- chain rules", "saddr != {"},
	{"firewall-ips elements", "add element ip kube-proxy firewall-ips"},
	{"source ranges holding the node IP", "192.168.0.0/24"},
}

var nodeIP4, nodeIP6 = net.ParseIP("192.168.0.2"), net.ParseIP("fd00:192::2")

func TestNFTablesMatchesKubeProxy(t *testing.T) {
	if *nftSequences == 0 {
		if os.Getenv("PROXYSIM_NFTABLES_REQUIRED") != "" {
			t.Fatal("PROXYSIM_NFTABLES_REQUIRED is set, but -nft-sequences is 0: nothing would be compared")
		}
		t.Skip("-nft-sequences is 0: run make upstream-nftables")
	}
	if os.Getenv(childEnv) == "" {
		runInNetns(t)
		return
	}
	var syncs, lines int
	for i := 0; i < *nftSequences; i++ {
		seed := *seed0 + int64(i)
		s, l, err := runNFTSequence(seed)
		syncs += s
		lines += l
		if err != nil {
			t.Fatalf("seed %d: %v\n(replay: make upstream-nftables NFT_SEQUENCES=1 SEED=%d)", seed, err, seed)
		}
	}
	t.Logf("%d random sequences, %d syncs, %d table lines compared: proxysim's nftables proxier and kube-proxy's leave identical tables after every sync",
		*nftSequences, syncs, lines)
	for _, m := range coverageMarks {
		t.Logf("  syncs whose table had %s: %d", m.name, nftCoverage[m.name])
		if nftCoverage[m.name] == 0 && *nftSequences >= 100 {
			t.Errorf("no compared table had %s", m.name)
		}
	}
	if syncs == 0 || lines == 0 {
		t.Fatal("nothing was compared")
	}
}

// runInNetns re-executes this test in a new user and network namespace,
// where kube-proxy's proxier may be constructed without touching the
// host's nftables.
//
// make upstream-nftables sets PROXYSIM_NFTABLES_REQUIRED: there a missing
// tool or a refused namespace fails the test instead of skipping it, so
// that CI cannot pass without comparing.
func runInNetns(t *testing.T) {
	skip := t.Skipf
	if os.Getenv("PROXYSIM_NFTABLES_REQUIRED") != "" {
		skip = t.Fatalf
	}
	for _, bin := range []string{"nft", "unshare"} {
		if _, err := exec.LookPath(bin); err != nil {
			skip("%s not found: run netns/hostdeps.sh (installs nftables) to compare with kube-proxy's nftables proxier", bin)
		}
	}
	args := []string{"-rn", os.Args[0], "-test.run=^TestNFTablesMatchesKubeProxy$",
		fmt.Sprintf("-nft-sequences=%d", *nftSequences), fmt.Sprintf("-steps=%d", *steps), fmt.Sprintf("-seed=%d", *seed0)}
	if testing.Verbose() {
		args = append(args, "-test.v")
	}
	cmd := exec.Command("unshare", args...)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	out, err := cmd.CombinedOutput()
	t.Logf("in a new user+network namespace:\n%s", out)
	if err != nil {
		if strings.Contains(string(out), "unshare failed") || strings.Contains(string(out), "Operation not permitted") {
			skip("cannot create a user+network namespace here: %s", strings.TrimSpace(string(out)))
		}
		t.Fatalf("the comparison failed: %v", err)
	}
}

// nftPair is the two proxiers fed identically.
type nftPair struct {
	family          v1.IPFamily
	kube            *kproxynft.Proxier
	kubeFake        *knftables.Fake
	ours            *proxy.Proxier
	ourFake         *knftables.Fake
	ourProxier      *nftables.Proxier
	kubeInitialized bool
}

func newNFTPair(family v1.IPFamily) (*nftPair, error) {
	nodeIP, cidr, nf := nodeIP4, "10.244.0.0/16", knftables.IPv4Family
	if family == v1.IPv6Protocol {
		nodeIP, cidr, nf = nodeIP6, "fd00:244::/64", knftables.IPv6Family
	}
	kube, err := kproxynft.NewProxier(context.Background(), family, 30e9, 1e9, false, 14,
		proxyutil.NewDetectLocalByCIDR(cidr), nodeName, nodeIP, nil, nil, nil, false)
	if err != nil {
		return nil, fmt.Errorf("kube-proxy's NewProxier: %w", err)
	}
	p := &nftPair{family: family, kube: kube, kubeFake: knftables.NewFake(nf, nftables.Table), ourFake: knftables.NewFake(nf, nftables.Table)}
	// The swap: kube-proxy's proxier keeps its interface in an unexported
	// field, set once by NewProxier.
	f := reflect.ValueOf(kube).Elem().FieldByName("nftables")
	reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Set(reflect.ValueOf(knftables.Interface(p.kubeFake)))

	clk := clocktesting.NewFakeClock(vclock.Epoch)
	p.ourProxier = nftables.New(nftables.Config{IPv6: family == v1.IPv6Protocol, ClusterCIDR: cidr, NodeIP: nodeIP}, p.ourFake, clk, nil)
	p.ours = proxy.NewProxier(family, nodeName, "", p.ourProxier, proxy.EndpointSliceTrackerOptions{})
	return p, nil
}

// deterministic rewrites a generated service as the comment above says:
// addresses and node ports derived from the service's own key, no
// duplicate port, no healthCheckNodePort.
func deterministic(s *v1.Service) *v1.Service {
	if s == nil {
		return nil
	}
	c := s.DeepCopy()
	idx := 0
	for i, ns := range namespaces {
		if ns == c.Namespace {
			idx = i * len(serviceNames)
		}
	}
	for i, n := range serviceNames {
		if n == c.Name {
			idx += i
		}
	}
	// own replaces an address the trackers would accept (leading zeros
	// included) with one of the service's own; "" drops it.
	own := func(ip string, block, i int) string {
		p := netutils.ParseIPSloppy(strings.TrimSpace(ip))
		switch {
		case p == nil:
			return ip // refused by the trackers anyway
		case p.To4() != nil:
			return fmt.Sprintf("10.%d.%d.%d", block, idx, i+1)
		default:
			return fmt.Sprintf("fd00:%d::%x:%x", block, idx, i+1)
		}
	}
	if c.Spec.ClusterIP != "" && c.Spec.ClusterIP != v1.ClusterIPNone {
		c.Spec.ClusterIP = own(c.Spec.ClusterIP, 96, 0)
		for i := range c.Spec.ClusterIPs {
			c.Spec.ClusterIPs[i] = own(c.Spec.ClusterIPs[i], 96, 0)
		}
	}
	for i := range c.Spec.ExternalIPs {
		c.Spec.ExternalIPs[i] = own(c.Spec.ExternalIPs[i], 100, i)
	}
	for i := range c.Status.LoadBalancer.Ingress {
		if c.Status.LoadBalancer.Ingress[i].IP != "" {
			c.Status.LoadBalancer.Ingress[i].IP = own(c.Status.LoadBalancer.Ingress[i].IP, 101, i)
		}
	}
	seen := map[string]bool{}
	var ports []v1.ServicePort
	for i, p := range c.Spec.Ports {
		k := fmt.Sprint(p.Port, p.Protocol)
		if seen[k] {
			continue
		}
		seen[k] = true
		if p.NodePort != 0 {
			p.NodePort = int32(30000 + 10*idx + i)
		}
		ports = append(ports, p)
	}
	c.Spec.Ports = ports
	c.Spec.HealthCheckNodePort = 0
	return c
}

func (p *nftPair) service(prev, cur *v1.Service) {
	prev, cur = deterministic(prev), deterministic(cur)
	switch {
	case prev == nil:
		p.kube.OnServiceAdd(cur)
		p.ours.OnServiceAdd(cur)
	case cur == nil:
		p.kube.OnServiceDelete(prev)
		p.ours.OnServiceDelete(prev)
	default:
		p.kube.OnServiceUpdate(prev, cur)
		p.ours.OnServiceUpdate(prev, cur)
	}
}

func (p *nftPair) slice(s *discovery.EndpointSlice, remove bool) {
	if remove {
		p.kube.OnEndpointSliceDelete(s)
		_ = p.ours.OnEndpointSliceDelete(s)
	} else {
		p.kube.OnEndpointSliceUpdate(nil, s)
		_ = p.ours.OnEndpointSliceUpdate(nil, s)
	}
}

// sync syncs both and compares their tables; it returns the number of
// lines compared.
func (p *nftPair) sync() (int, error) {
	// OnServiceSynced calls syncProxyRules directly, every time; the first
	// pair of calls also initializes the proxier.
	if !p.kubeInitialized {
		p.kube.OnEndpointSlicesSynced()
		p.kubeInitialized = true
	}
	p.kube.OnServiceSynced()
	var err error
	if !p.ours.Initialized() {
		_ = p.ours.OnServicesSynced()
		err = p.ours.OnEndpointSlicesSynced()
	} else {
		err = p.ours.SyncProxyRules()
	}
	if err != nil {
		return 0, fmt.Errorf("proxysim's sync failed: %w", err)
	}
	k, o := normalizeDump(p.kubeFake.Dump()), normalizeDump(p.ourFake.Dump())
	if k != o {
		return 0, fmt.Errorf("tables differ:\n%s", nftLineDiff(k, o))
	}
	for _, m := range coverageMarks {
		if strings.Contains(o, m.text) {
			nftCoverage[m.name]++
		}
	}
	return strings.Count(o, "\n"), nil
}

// normalizeDump drops flushed service chains and sorts elements.
func normalizeDump(d string) string {
	hasRules := map[string]bool{}
	for _, l := range strings.Split(d, "\n") {
		if f := strings.Fields(l); len(f) > 4 && f[0] == "add" && f[1] == "rule" {
			hasRules[f[4]] = true
		}
	}
	var keep []string
	for _, l := range strings.Split(d, "\n") {
		f := strings.Fields(l)
		if len(f) == 5 && f[1] == "chain" && strings.Contains(f[4], "/") && !hasRules[f[4]] {
			continue
		}
		keep = append(keep, l)
	}
	return nftables.SortElements(strings.Join(keep, "\n"))
}

// nftLineDiff lists the lines only one side has.
func nftLineDiff(kube, ours string) string {
	set := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	k, o := set(kube), set(ours)
	var b strings.Builder
	for _, l := range strings.Split(kube, "\n") {
		if !o[l] {
			fmt.Fprintf(&b, "- kube-proxy: %s\n", l)
		}
	}
	for _, l := range strings.Split(ours, "\n") {
		if !k[l] {
			fmt.Fprintf(&b, "+ proxysim:   %s\n", l)
		}
	}
	return b.String()
}

func runNFTSequence(seed int64) (syncs, lines int, err error) {
	r := rand.New(rand.NewSource(seed))
	family := v1.IPv4Protocol
	if r.Intn(5) == 0 {
		family = v1.IPv6Protocol
	}
	p, err := newNFTPair(family)
	if err != nil {
		return 0, 0, err
	}
	g := &gen{iptables: true, r: r, services: map[string]*v1.Service{}, slices: map[string]*discovery.EndpointSlice{}}
	for step := 0; step < *steps; step++ {
		what := ""
		if g.r.Intn(10) < 3 {
			prev, cur := g.serviceChange()
			p.service(prev, cur)
			what = "service " + describeSvc(prev, cur)
		} else {
			s, remove := g.sliceChange()
			p.slice(s, remove)
			what = fmt.Sprintf("slice %s/%s remove=%v", s.Namespace, s.Name, remove)
		}
		if r.Intn(4) == 0 || step == *steps-1 {
			syncs++
			n, err := p.sync()
			if err != nil {
				return syncs, lines, fmt.Errorf("%s, sync after step %d (%s): %w", family, step, what, err)
			}
			lines += n
		}
	}
	return syncs, lines, nil
}
