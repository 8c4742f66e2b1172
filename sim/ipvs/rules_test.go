package ipvs_test

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"

	"github.com/proxysim/proxysim/fakes"
	"github.com/proxysim/proxysim/sim"
	"github.com/proxysim/proxysim/sim/ipvs"
	"github.com/proxysim/proxysim/sim/runner"
	"github.com/proxysim/proxysim/sim/vclock"
)

// pathWorld is a world whose IPVS proxier also writes ipsets and iptables
// rules, into fakes.
type pathWorld struct {
	*sim.World
	dp   ipvs.Dataplane
	h    *fakes.IPVS
	sets *fakes.IPSets
	ipt  *fakes.IPTables
}

func newPathWorld(t *testing.T, cfg ipvs.Config) *pathWorld {
	clk := vclock.New(vclock.Epoch)
	dp, h, _, _ := fakes.Dataplane("6.1.0", clk)
	sets, ipt := fakes.NewIPSets(), fakes.NewIPTables()
	dp.IPSets, dp.IPTables = sets, ipt
	w := sim.New(t, sim.Config{
		Runner:     runner.Config{Generation: runner.Cooldown, MinInterval: time.Second, MaxInterval: 30 * time.Second},
		Clock:      clk,
		NewBackend: ipvs.Backend(cfg, dp),
	})
	return &pathWorld{World: w, dp: dp, h: h, sets: sets, ipt: ipt}
}

// lbLocal is a LoadBalancer service with externalTrafficPolicy Local, a
// source range, node port 30080 and health check node port 30999; one of
// its two endpoints is on this node.
func lbLocal(ranges ...string) *v1.Service {
	svc := fakes.Service("default", "web", "10.96.0.10", 80)
	svc.Spec.Type = v1.ServiceTypeLoadBalancer
	svc.Spec.Ports[0].NodePort = 30080
	svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
	svc.Spec.HealthCheckNodePort = 30999
	svc.Spec.LoadBalancerSourceRanges = ranges
	svc.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "203.0.113.10"}}
	return svc
}

func webSlice() *discovery.EndpointSlice {
	s := fakes.EndpointSlice("default", "web-1", "web", 8080, "10.244.1.2", "10.244.2.3")
	s.Endpoints[0].NodeName = ptr.To("node-a")
	s.Endpoints[1].NodeName = ptr.To("node-b")
	return s
}

func contains(t *testing.T, what, text string, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if !strings.Contains(text, l+"\n") {
			t.Errorf("%s lacks %q:\n%s", what, l, text)
		}
	}
}

func lacks(t *testing.T, what, text string, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if strings.Contains(text, l) {
			t.Errorf("%s holds %q:\n%s", what, l, text)
		}
	}
}

// The sets' members and the rules that read them, for a Local
// LoadBalancer with a source range that leaves the node out, as
// kube-proxy's syncProxyRules and writeIptablesRules write them.
func TestWritesIPSetsAndRules(t *testing.T) {
	w := newPathWorld(t, ipvs.Config{NodeIPs: []string{"192.168.0.10"}, ClusterCIDR: "10.244.0.0/16"})
	if err := w.Create(lbLocal("198.51.100.0/24")); err != nil {
		t.Fatal(err)
	}
	if err := w.Create(webSlice()); err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	sets, _ := ipvs.SaveIPSets(w.sets)
	contains(t, "ipsets", sets,
		"create KUBE-NODE-PORT-TCP bitmap:port range 0-65535",
		"create KUBE-LOOP-BACK hash:ip,port,ip family inet",
		"add KUBE-CLUSTER-IP 10.96.0.10,tcp:80",
		"add KUBE-HEALTH-CHECK-NODE-PORT 30999",
		"add KUBE-IPVS-IPS 10.96.0.10",
		"add KUBE-IPVS-IPS 203.0.113.10",
		"add KUBE-LOAD-BALANCER 203.0.113.10,tcp:80",
		"add KUBE-LOAD-BALANCER-FW 203.0.113.10,tcp:80",
		"add KUBE-LOAD-BALANCER-LOCAL 203.0.113.10,tcp:80",
		"add KUBE-LOAD-BALANCER-SOURCE-CIDR 203.0.113.10,tcp:80,198.51.100.0/24",
		"add KUBE-LOOP-BACK 10.244.1.2,tcp:8080,10.244.1.2", // the local endpoint only
		"add KUBE-NODE-PORT-LOCAL-TCP 30080",
		"add KUBE-NODE-PORT-TCP 30080")
	lacks(t, "ipsets", sets, "add KUBE-LOOP-BACK 10.244.2.3", "add KUBE-LOAD-BALANCER-SOURCE-IP", "add KUBE-EXTERNAL-IP")
	rules := w.ipt.SaveAll()
	contains(t, "rules", rules,
		// the jumps, each prepended: the last ensured comes first
		"-A INPUT -m comment --comment \"kubernetes ipvs access filter\" -j KUBE-IPVS-FILTER\n-A INPUT -m comment --comment \"kube-proxy firewall rules\" -j KUBE-PROXY-FIREWALL",
		"-A KUBE-IPVS-OUT-FILTER -s 203.0.113.10 -m ipvs --vaddr 203.0.113.10 --vproto tcp --vport 80 -j DROP",
		"-A KUBE-LOAD-BALANCER -m comment --comment \"Kubernetes service load balancer ip + port with externalTrafficPolicy=local\" -m set --match-set KUBE-LOAD-BALANCER-LOCAL dst,dst -j RETURN\n-A KUBE-LOAD-BALANCER -j KUBE-MARK-MASQ",
		"-A KUBE-SERVICES -m comment --comment \"Kubernetes service cluster ip + port for masquerade purpose\" -m set --match-set KUBE-CLUSTER-IP dst,dst ! -s 10.244.0.0/16 -j KUBE-MARK-MASQ",
		"-A KUBE-SOURCE-RANGES-FIREWALL -m comment --comment \"Kubernetes service load balancer ip + port + source cidr for packet filter purpose\" -m set --match-set KUBE-LOAD-BALANCER-SOURCE-CIDR dst,dst,src -j RETURN\n-A KUBE-SOURCE-RANGES-FIREWALL -j DROP",
		"-A KUBE-POSTROUTING -j MARK --xor-mark 0x00004000",
		"-A KUBE-SERVICES -m set --match-set KUBE-LOAD-BALANCER dst,dst -j ACCEPT")
	lacks(t, "rules", rules, "--match-set KUBE-EXTERNAL-IP dst,dst -j KUBE-MARK-MASQ", "KUBE-NODE-PORT-UDP")

	// A range holding the node IP lets the node in: a SOURCE-IP entry
	// instead of the OUTPUT drop. Deleting the service empties the sets.
	w.At(5*time.Second, func() {
		if err := w.Update(lbLocal("192.168.0.0/24")); err != nil {
			t.Error(err)
		}
	})
	w.RunUntil(6 * time.Second)
	sets, _ = ipvs.SaveIPSets(w.sets)
	contains(t, "ipsets", sets, "add KUBE-LOAD-BALANCER-SOURCE-IP 203.0.113.10,tcp:80,203.0.113.10")
	lacks(t, "rules", w.ipt.SaveAll(), "KUBE-IPVS-OUT-FILTER -s")
	w.At(10*time.Second, func() {
		if err := w.Delete("Service", "default", "web"); err != nil {
			t.Error(err)
		}
	})
	w.RunUntil(12 * time.Second)
	sets, _ = ipvs.SaveIPSets(w.sets)
	lacks(t, "ipsets", sets, "add ")
	rules = w.ipt.SaveAll()
	lacks(t, "rules", rules, "KUBE-LOAD-BALANCER dst,dst -j KUBE-LOAD-BALANCER", "KUBE-CLUSTER-IP dst,dst ! -s")
	contains(t, "rules", rules, "-A KUBE-IPVS-FILTER -m conntrack --ctstate NEW -m set --match-set KUBE-IPVS-IPS dst -j REJECT")
}

// With ipsets and iptables, each sync reports their work: every set
// listed, the members added and deleted, the chains and jumps ensured, and
// one restore counted by section (rules counted by hand from the
// payload TestWritesIPSetsAndRules shows: nat 15, filter 13).
func TestIPSetsAndRulesWork(t *testing.T) {
	w := newPathWorld(t, ipvs.Config{NodeIPs: []string{"192.168.0.10"}, ClusterCIDR: "10.244.0.0/16"})
	if err := w.Create(lbLocal("198.51.100.0/24")); err != nil {
		t.Fatal(err)
	}
	if err := w.Create(webSlice()); err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	syncs := worked(w.World)
	first := syncs[len(syncs)-1].Work.IPVS
	// 17 sets; 11 members (see TestWritesIPSetsAndRules), none listed yet.
	if got, want := *first.IPSets, (sim.IPSetWork{Listings: 17, EntriesAdded: 11}); got != want {
		t.Errorf("ipset work %+v, want %+v", got, want)
	}
	ipt := first.IPTables
	if ipt.Restores != 1 || ipt.EnsureChains != 11 || ipt.EnsureRules != 9 || ipt.Filter.Chains != 6 || ipt.NAT.Chains != 5 ||
		ipt.NAT.Rules != 15 || ipt.Filter.Rules != 13 {
		t.Errorf("iptables work %+v", ipt)
	}
}
