package upstream

// The IPVS proxiers' ipsets and iptables rules compared on the host, where
// there is no IPVS: kube-proxy v1.36's IPVS proxier runs over upstream's
// own fake IPVS and netlink handle (pkg/proxy/ipvs/util/testing,
// pkg/proxy/ipvs/testing, swapped in with setUnexported), proxysim's over
// fakes/. IPVS itself is compared on the kernel (TestIPVSMatchesKubeProxy,
// in the VM); the ipsets and iptables rules, a pure function of the
// services, endpoints and node addresses, are compared here after every
// sync of random sequences, as there.

import (
	"context"
	"flag"
	"fmt"
	"math/rand"
	"net"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	sysctltest "k8s.io/component-helpers/node/util/sysctl/testing"
	"k8s.io/kubernetes/pkg/proxy/conntrack"
	"k8s.io/kubernetes/pkg/proxy/healthcheck"
	kipvs "k8s.io/kubernetes/pkg/proxy/ipvs"
	ipsettest "k8s.io/kubernetes/pkg/proxy/ipvs/ipset/testing"
	ipvsnltest "k8s.io/kubernetes/pkg/proxy/ipvs/testing"
	ipvstest "k8s.io/kubernetes/pkg/proxy/ipvs/util/testing"
	proxyutil "k8s.io/kubernetes/pkg/proxy/util"
	iptablestest "k8s.io/kubernetes/pkg/util/iptables/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/proxysim/proxysim/fakes"
	"github.com/proxysim/proxysim/sim/ipvs"
	"github.com/proxysim/proxysim/sim/proxy"
	"github.com/proxysim/proxysim/sim/vclock"
)

var ipvsRuleSequences = flag.Int("ipvs-rule-sequences", 200, "random sequences for the IPVS ipsets and iptables comparison on the host")

// ruleEntries counts, per set, the members compared.
var ruleEntries = map[string]int{}

func TestIPVSRulesMatchKubeProxy(t *testing.T) {
	syncs := 0
	for i := 0; i < *ipvsRuleSequences; i++ {
		seed := *seed0 + int64(i)
		n, err := runIPVSRuleSequence(seed)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		syncs += n
	}
	t.Logf("%d random sequences of %d changes, %d syncs: kube-proxy's IPVS proxier and proxysim's wrote the same ipsets and iptables rules after every sync", *ipvsRuleSequences, *steps, syncs)
	for _, name := range sortedKeys(ruleEntries) {
		t.Logf("  %s: %d members compared", name, ruleEntries[name])
	}
	for _, name := range []string{"KUBE-CLUSTER-IP", "KUBE-LOAD-BALANCER-SOURCE-CIDR", "KUBE-NODE-PORT-LOCAL-TCP", "KUBE-LOOP-BACK", "KUBE-EXTERNAL-IP"} {
		if *ipvsRuleSequences >= 20 && ruleEntries[name] == 0 {
			t.Errorf("no member of %s was ever compared: the sequences compared too little", name)
		}
	}
}

func runIPVSRuleSequence(seed int64) (int, error) {
	r := rand.New(rand.NewSource(seed))
	cfg := randomIPVSConfig(r)
	isV6 := cfg.family == v1.IPv6Protocol
	kf := iptablestest.NewFake()
	if isV6 {
		kf = iptablestest.NewIPv6Fake()
	}
	kIPT, kSets := &kubeIPT{FakeIPTables: kf.SetHasRandomFully(true)}, ipsettest.NewFake("v7.1")
	oIPT, oSets := &ourIPT{IPTables: fakes.NewIPTables()}, fakes.NewIPSets()
	nl := ipvsnltest.NewFakeNetlinkHandle(isV6)
	if err := nl.SetLocalAddresses("eth0", cfg.nodeAddrs...); err != nil {
		return 0, err
	}
	var nodeIP net.IP
	if a := cfg.familyAddrs(); len(a) > 0 {
		nodeIP = net.ParseIP(a[0])
	}
	k, err := kipvs.NewProxier(context.Background(), cfg.family, kIPT, ipvstest.NewFake(), kSets, sysctltest.NewFake(),
		30*time.Second, 0, nil, cfg.strictARP, 0, 0, 0, false, 14, proxyutil.NewNoOpLocalDetector(), nodeName, nodeIP,
		nil, nil, cfg.scheduler, nil, false)
	if err != nil {
		return 0, err
	}
	setUnexported(k, "netlinkHandle", nl)
	setUnexported(k, "conntrack", conntrack.NewFake())
	setUnexported(k, "serviceHealthServer", healthcheck.NewFakeServiceHealthServer())
	if cfg.zone != "" {
		k.OnTopologyChange(map[string]string{v1.LabelTopologyZone: cfg.zone})
	}
	clk := clocktesting.NewFakeClock(vclock.Epoch)
	dp, _, _, _ := fakes.Dataplane("6.1.0", clk)
	dp.IPSets, dp.IPTables = oSets, oIPT
	back, err := ipvs.New(ipvs.Config{Family: cfg.family, Scheduler: cfg.scheduler, StrictARP: cfg.strictARP, NodeIPs: cfg.familyAddrs()}, dp, clk, nil)
	if err != nil {
		return 0, err
	}
	defer back.Stop()
	o := proxy.NewProxier(cfg.family, nodeName, cfg.zone, back, proxy.EndpointSliceTrackerOptions{})
	g := &gen{iptables: true, r: r, services: map[string]*v1.Service{}, slices: map[string]*discovery.EndpointSlice{}}
	seen := map[*discovery.EndpointSlice]bool{}
	kSynced, syncs := false, 0
	for step := 0; step < *steps; step++ {
		what := ""
		if g.r.Intn(10) < 3 {
			prev, cur := g.serviceChange()
			prev, cur = deterministic(prev), deterministic(cur)
			switch {
			case prev == nil:
				k.OnServiceAdd(cur)
				o.OnServiceAdd(cur)
			case cur == nil:
				k.OnServiceDelete(prev)
				o.OnServiceDelete(prev)
			default:
				k.OnServiceUpdate(prev, cur)
				o.OnServiceUpdate(prev, cur)
			}
			what = "service " + describeSvc(prev, cur)
		} else {
			s, remove := g.sliceChange()
			if !remove && !seen[s] {
				matchPorts(g, s)
				seen[s] = true
			}
			if remove {
				k.OnEndpointSliceDelete(s)
				_ = o.OnEndpointSliceDelete(s)
			} else {
				k.OnEndpointSliceUpdate(nil, s)
				_ = o.OnEndpointSliceUpdate(nil, s)
			}
			what = fmt.Sprintf("slice %s/%s remove=%v", s.Namespace, s.Name, remove)
		}
		if r.Intn(4) != 0 && step != *steps-1 {
			continue
		}
		if !kSynced {
			k.OnEndpointSlicesSynced()
			kSynced = true
		}
		k.OnServiceSynced()
		clk.Step(time.Second)
		if !o.Initialized() {
			_ = o.OnServicesSynced()
			err = o.OnEndpointSlicesSynced()
		} else {
			err = o.SyncProxyRules()
		}
		if err != nil {
			return syncs, fmt.Errorf("%s: proxysim's sync after step %d: %w", cfg, step, err)
		}
		syncs++
		for name, e := range kSets.Entries {
			ruleEntries[name] += e.Len()
		}
		if err := compareIPVSRules(kIPT, kSets, oIPT, oSets); err != nil {
			return syncs, fmt.Errorf("%s: after step %d (%s): %w", cfg, step, what, err)
		}
	}
	return syncs, nil
}
