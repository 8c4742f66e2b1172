package upstream

// kube-proxy v1.36's own code end to end in virtual time: the library's
// iptables, nftables and IPVS scenarios (IPVS in bubble_ipvs_test.go),
// replayed once by proxysim's engine on
// its virtual clock (e2e/transcript records the writes, faults, restarts
// and every sync with the dataplane it left) and once by kube-proxy's
// proxier — fake clientset, real shared informers, kube-proxy's config
// handlers, its SyncLoop and its runner on the real time package — inside
// a testing/synctest bubble, driven by the same writes at the same virtual
// instants. Both must sync at the same instants, fail the same syncs and
// leave the same dataplane after every sync. See
// docs/explanation/bubble.md.

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	sysctltest "k8s.io/component-helpers/node/util/sysctl/testing"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/proxy"
	"k8s.io/kubernetes/pkg/proxy/apis"
	"k8s.io/kubernetes/pkg/proxy/config"
	"k8s.io/kubernetes/pkg/proxy/conntrack"
	"k8s.io/kubernetes/pkg/proxy/healthcheck"
	kiptables "k8s.io/kubernetes/pkg/proxy/iptables"
	kproxynft "k8s.io/kubernetes/pkg/proxy/nftables"
	proxyutil "k8s.io/kubernetes/pkg/proxy/util"
	proxyutiltest "k8s.io/kubernetes/pkg/proxy/util/testing"
	utiliptables "k8s.io/kubernetes/pkg/util/iptables"
	iptablestest "k8s.io/kubernetes/pkg/util/iptables/testing"
	"sigs.k8s.io/knftables"

	"github.com/proxysim/proxysim/e2e/transcript"
	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/iptablesmode"
	"github.com/proxysim/proxysim/scenarios/nftablesmode"
	"github.com/proxysim/proxysim/sim/nftables"

	// Every library scenario must load to be sorted by mode.
	_ "github.com/proxysim/proxysim/scenarios/controllers"
	_ "github.com/proxysim/proxysim/scenarios/ingressnginx"
	_ "github.com/proxysim/proxysim/scenarios/ipvsmode"
	"github.com/proxysim/proxysim/scenarios/replay"
)

var (
	bubbleRuns   = flag.Int("bubble-runs", 1, "times each scenario is replayed in the bubble (the outcome must be the same every time)")
	updateBubble = flag.Bool("update-bubble", false, "rewrite the pinned verdicts (testdata/bubble-*.txt) instead of comparing with them")
)

const bubbleChildEnv = "PROXYSIM_BUBBLE_NETNS_CHILD"

// bubbleCase is one library scenario and how it went.
type bubbleCase struct {
	name, mode, verdict string
	syncs               int
}

// libraryOfMode lists the library scenarios whose proxy mode is mode.
func libraryOfMode(t *testing.T, mode string) []*scenarios.Scenario {
	var out []*scenarios.Scenario
	for _, name := range scenarios.LibraryNames() {
		s, err := scenarios.LoadLibrary(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if scenarios.IsLarge(name) {
			// Minutes to replay (scenarios.LargeTag): never compared here,
			// only listed with notCompared's reason, so its objects and
			// steps are let go at once.
			if _, ok := notCompared[name]; !ok {
				t.Fatalf("%s is large: give notCompared its reason", name)
			}
			s = &scenarios.Scenario{Name: s.Name, Proxy: s.Proxy}
		}
		if s.Proxy.Mode == mode {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		t.Fatalf("no library scenario of mode %s", mode)
	}
	return out
}

// burstGeneration reports whether a scenario's proxy.version names a
// burst-runner release (up to v1.33); from v1.34 the cooldown runner,
// which v1.36 has too.
func burstGeneration(s *scenarios.Scenario) bool {
	v := strings.TrimPrefix(s.Proxy.Version, "v")
	var major, minor int
	if _, err := fmt.Sscanf(v, "%d.%d", &major, &minor); err != nil {
		return false
	}
	return major == 1 && minor <= 33
}

// runBubble replays every scenario of mode against the target newTarget
// builds, in a bubble, reports the table, and requires it to be the one
// pinned in testdata/bubble-GOLDEN.txt.
func runBubble(t *testing.T, golden, mode string, list []*scenarios.Scenario, newTarget func(*scenarios.Scenario, *transcript.Transcript) bubbleTarget, canon func(string) (string, error), diff func(a, b string) string) {
	var cases []bubbleCase
	for _, s := range list {
		cases = append(cases, bubbleCase{name: s.Name, mode: mode})
		if burstGeneration(s) {
			cases[len(cases)-1].verdict = "not here: proxy.version " + s.Proxy.Version + " is the burst runner; e2e/upstream133 replays it against kube-proxy v1.33"
			continue
		}
		if why, ok := notCompared[s.Name]; ok {
			cases[len(cases)-1].verdict = "not here: " + why
			continue
		}
		tr, err := transcript.Record(s)
		if err != nil && retold[s] {
			cases[len(cases)-1].verdict = "listed: " + err.Error()
			continue
		}
		if err != nil {
			t.Fatalf("%s: proxysim: %v", s.Name, err)
		}
		if !tr.Result.Passed() {
			t.Fatalf("%s: proxysim's own replay fails its expectations: %v", s.Name, tr.Result.Failures)
		}
		if len(tr.Unsupported) > 0 {
			cases[len(cases)-1].verdict = "listed: " + strings.Join(tr.Unsupported, "; ")
			continue
		}
		races := 0
		ok := t.Run(s.Name, func(t *testing.T) {
			for run := 0; run < *bubbleRuns; run++ {
				var got []transcript.Observed
				synctest.Test(t, func(t *testing.T) {
					target := newTarget(s, tr)
					if err := tr.Drive(target); err != nil {
						t.Fatalf("driving kube-proxy: %v", err)
					}
					got = target.Syncs()
				})
				diffs, raced := tr.Compare(got, canon, diff)
				if len(diffs) > 0 {
					t.Fatalf("run %d: kube-proxy v1.36.3 and proxysim differ:\n%s", run+1, strings.Join(diffs, "\n"))
				}
				if len(raced) > 0 {
					races++
					t.Logf("run %d, accepted (a write and a sync at one instant): %s", run+1, strings.Join(raced, "; "))
				}
			}
			t.Logf("%d syncs at %v: same instants, same failures, same dataplane after each", len(tr.Syncs), syncInstants(tr))
		})
		c := &cases[len(cases)-1]
		c.syncs = len(tr.Syncs)
		switch {
		case !ok:
			c.verdict = "DIFFERENT"
		case races > 0:
			c.verdict = fmt.Sprintf("identical; in %d of %d runs kube-proxy synced before a write at the same instant and programmed it one sync later", races, *bubbleRuns)
		default:
			c.verdict = "identical"
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "kube-proxy v1.36.3 in a synctest bubble against proxysim, mode %s (%d bubble run(s) per scenario):\n", mode, *bubbleRuns)
	var rows []transcript.Verdict
	for _, c := range cases {
		syncs := ""
		if c.syncs > 0 {
			syncs = fmt.Sprintf(" (%d syncs)", c.syncs)
		}
		fmt.Fprintf(&b, "  %-40s %s%s\n", c.name, c.verdict, syncs)
		v := c.verdict
		if strings.HasPrefix(v, "identical") {
			v = "identical" + syncs
		}
		rows = append(rows, transcript.Verdict{Scenario: c.name, Verdict: v})
	}
	t.Log(b.String())
	transcript.CheckVerdicts(t, "testdata/bubble-"+golden+".txt", "kube-proxy v1.36.3 in a synctest bubble against proxysim, mode "+mode, rows, *updateBubble)
}

func syncInstants(tr *transcript.Transcript) []time.Duration {
	var out []time.Duration
	for _, s := range tr.Syncs {
		out = append(out, s.Start)
	}
	return out
}

// bubbleTarget is a transcript.Target that also reports what it observed.
type bubbleTarget interface {
	transcript.Target
	Syncs() []transcript.Observed
}

// kubeProxyNode starts a proxier as cmd/kube-proxy/app/server.go does:
// informer factories with its label and field selectors, the Service and
// EndpointSlice config handlers registered on the proxier, the factories
// started, the handlers' Run, then SyncLoop. Two differences, both about
// when the handlers' Run starts: it starts after the factories' initial
// lists have been delivered (synctest.Wait), so that its cache-sync check
// passes at once instead of on its 100 ms poll; and the EndpointSlice
// handler's Run starts after the Service handler's returned from its
// synced call, because two handlers that become synced at the same
// instant race (both may see the proxier initialized, and sync twice).
// No node, topology or ServiceCIDR handlers: the scenarios have no Node
// objects, and proxysim models no ServiceCIDRs.
func kubeProxyNode(ctx context.Context, client kubernetes.Interface, p proxy.Provider, resync time.Duration) (func(), error) {
	noProxyName, err := labels.NewRequirement(apis.LabelServiceProxyName, selection.DoesNotExist, nil)
	if err != nil {
		return nil, err
	}
	noHeadless, err := labels.NewRequirement(v1.IsHeadlessService, selection.DoesNotExist, nil)
	if err != nil {
		return nil, err
	}
	slices := informers.NewSharedInformerFactoryWithOptions(client, resync, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = labels.NewSelector().Add(*noHeadless).String()
	}))
	services := informers.NewSharedInformerFactoryWithOptions(client, resync, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = labels.NewSelector().Add(*noProxyName).String()
		o.FieldSelector = fields.OneTermNotEqualSelector("spec.clusterIP", v1.ClusterIPNone).String()
	}))
	sc := config.NewServiceConfig(ctx, services.Core().V1().Services(), resync)
	sc.RegisterEventHandler(p)
	ec := config.NewEndpointSliceConfig(ctx, slices.Discovery().V1().EndpointSlices(), resync)
	ec.RegisterEventHandler(p)
	slices.Start(ctx.Done())
	services.Start(ctx.Done())
	synctest.Wait()
	go sc.Run(ctx.Done())
	synctest.Wait()
	go ec.Run(ctx.Done())
	synctest.Wait()
	go p.SyncLoop()
	return func() {
		slices.Shutdown()
		services.Shutdown()
	}, nil
}

// knownZone gives the proxier its node's zone as if known when it was
// built, as proxysim's proxy.zone is. kube-proxy learns it from the Node
// informer (NodeTopologyConfig → OnTopologyChange), which also asks for a
// full sync: one more run at start-up than proxysim's model has.
func knownZone(p any, zone string) {
	setUnexported(p, "topologyLabels", map[string]string{v1.LabelTopologyZone: zone})
}

// resyncOf is the scenario's configSyncPeriod, or kube-proxy's 15m.
func resyncOf(s *scenarios.Scenario) time.Duration {
	if s.Proxy.ConfigSyncPeriod != nil && s.Proxy.ConfigSyncPeriod.D() > 0 {
		return s.Proxy.ConfigSyncPeriod.D()
	}
	return 15 * time.Minute
}

// --- iptables ---

// faultyIPT is upstream's FakeIPTables behind the recorder of
// iptables_test.go, failing the next fail restores.
type faultyIPT struct {
	*kubeIPT
	fail   int
	charge *transcript.Charge
}

// RestoreAll is the sync's write: it applies (or fails) at the run's
// start, as proxysim's does, and then the run lasts its cost.
func (f *faultyIPT) RestoreAll(data []byte, flush utiliptables.FlushFlag, counters utiliptables.RestoreCountersFlag) error {
	defer f.charge.Sync()
	if f.fail > 0 {
		f.fail--
		f.last = string(data)
		return errInjected
	}
	return f.kubeIPT.RestoreAll(data, flush, counters)
}

type iptTarget struct {
	s       *scenarios.Scenario
	ipt     *faultyIPT
	log     *transcript.SyncLog
	proxier any
}

// upstreamRunner is the receiver of kube-proxy v1.36's runner, whose
// goroutine makes every sync but the direct initial one
// (pkg/proxy/runner BoundedFrequencyRunner.Loop).
const upstreamRunner = "k8s.io/kubernetes/pkg/proxy/runner.(*BoundedFrequencyRunner)"

// newCharge charges the transcript's sync cost to the proxier *proxier
// will hold: its size is its svcPortMap's length and the endpoints of its
// endpointsMap, as proxysim's Proxier.Size counts its own.
func newCharge(tr *transcript.Transcript, log *transcript.SyncLog, proxier *any) *transcript.Charge {
	if tr == nil {
		return nil
	}
	c := tr.NewCharge(log, upstreamRunner)
	c.Size = func() (int, int) { return proxierSize(*proxier) }
	return c
}

// proxierSize reads the service ports and endpoints a kube-proxy proxier
// (iptables, nftables or IPVS: the same two fields) has applied.
func proxierSize(p any) (servicePorts, endpoints int) {
	v := reflect.ValueOf(p).Elem()
	eps := v.FieldByName("endpointsMap").MapRange()
	for eps.Next() {
		endpoints += eps.Value().Len()
	}
	return v.FieldByName("svcPortMap").Len(), endpoints
}

func newIPTTarget(s *scenarios.Scenario, tr *transcript.Transcript) bubbleTarget {
	// The fake says whether iptables supports --random-fully; proxysim's
	// iptables mode assumes it does, as every iptables since 1.6.2.
	fake := iptablestest.NewFake()
	fake.SetHasRandomFully(true)
	ipt := &faultyIPT{kubeIPT: &kubeIPT{FakeIPTables: fake}}
	t := &iptTarget{s: s, ipt: ipt}
	t.log = transcript.NewSyncLog(time.Now(), func() string {
		var buf bytes.Buffer
		for _, tb := range []utiliptables.Table{utiliptables.TableFilter, utiliptables.TableNAT} {
			if err := ipt.SaveInto(tb, &buf); err != nil {
				return "error: " + err.Error()
			}
		}
		return buf.String()
	})
	ipt.charge = newCharge(tr, t.log, &t.proxier)
	return t
}

func (t *iptTarget) Fail(n int)                   { t.ipt.fail += n }
func (t *iptTarget) Syncs() []transcript.Observed { return t.log.Syncs() }

// minSyncPeriodOf is what proxysim's runner gets: proxy.minSyncPeriod as
// written (0 when unset, as scenarios.RunnerConfig reads it).
func minSyncPeriodOf(s *scenarios.Scenario) time.Duration {
	return replay.RunnerConfig(s.Proxy).MinInterval
}

func syncPeriodOf(s *scenarios.Scenario) time.Duration {
	if s.Proxy.SyncPeriod != nil {
		return s.Proxy.SyncPeriod.D()
	}
	return 30 * time.Second
}

func nodeNameOf(s *scenarios.Scenario) string {
	if s.Proxy.NodeName != "" {
		return s.Proxy.NodeName
	}
	return "node-a"
}

func firstIPv4(ips []string) net.IP {
	for _, s := range ips {
		if ip := net.ParseIP(s); ip != nil && ip.To4() != nil {
			return ip
		}
	}
	return nil
}

func (t *iptTarget) Start(ctx context.Context, client kubernetes.Interface) (func(), error) {
	set := t.s.Proxy.Settings.(*iptablesmode.Settings)
	detector := proxyutil.NewNoOpLocalDetector()
	if set.ClusterCIDR != "" {
		detector = proxyutil.NewDetectLocalByCIDR(set.ClusterCIDR)
	}
	ctx = klog.NewContext(ctx, t.log.Logger())
	p, err := kiptables.NewProxier(ctx, v1.IPv4Protocol, t.ipt, sysctltest.NewFake(), syncPeriodOf(t.s), minSyncPeriodOf(t.s),
		set.MasqueradeAll, true, 14, detector, nodeNameOf(t.s), firstIPv4(set.NodeIPs), nil, nil, nil, false)
	if err != nil {
		return nil, err
	}
	t.proxier = p
	setUnexported(p, "nfacct", nil)
	setUnexported(p, "conntrack", conntrack.NewFake())
	setUnexported(p, "serviceHealthServer", healthcheck.NewFakeServiceHealthServer())
	if t.s.Proxy.Zone != "" {
		knownZone(p, t.s.Proxy.Zone)
	}
	return kubeProxyNode(ctx, client, p, resyncOf(t.s))
}

// TestKubeProxyIPTablesInBubble replays every iptables scenario of the
// library through kube-proxy v1.36.3's iptables proxier in a bubble.
func TestKubeProxyIPTablesInBubble(t *testing.T) {
	runBubble(t, "iptables", iptablesmode.Name, libraryOfMode(t, iptablesmode.Name), newIPTTarget, canonical, lineDiff)
}

// notCompared are library scenarios the bubble leaves out, and why.
var notCompared = map[string]string{
	"cl2-load-100":  "a 100-node cluster under 5 minutes of generated churn, too long for this step; its steps (podReady, rollingUpdate, graceful delete, apply, Service delete) are compared in the scenarios above, and its first node's kube-proxy is the same code as cluster-pools-iptables'",
	"cl2-load-5000": "a 5,000-node cluster of 150,000 pods under generated churn (tagged large: make cl2-load-5000 replays it), far too long for this step; its step kinds are cl2-load-100's, compared in the scenarios above",
}

// retold marks the scenarios TestKubeProxyRetoldInBubble retold.
var retold = map[*scenarios.Scenario]bool{}

// TestKubeProxyRetoldInBubble retells every library scenario of the IPVS
// mode (the default) for the iptables mode (transcript.AsIPTables: same
// objects, writes and runner fields, no expectations) and replays it
// through kube-proxy v1.36.3's iptables proxier in a bubble: the runner
// stories (cooldown, minSyncPeriod 0s/1s/10s, initial-sync gating,
// A→B→A), the endpoint stories (service types, terminating fallback,
// traffic policies, topology hints, resync) and the controllers' stories
// (the writes of the EndpointSlice controller) meet kube-proxy's own code.
// Burst-runner releases are e2e/upstream133's.
func TestKubeProxyRetoldInBubble(t *testing.T) {
	var list []*scenarios.Scenario
	for _, s := range libraryOfMode(t, "ipvs") {
		r := transcript.AsIPTables(s)
		retold[r] = true
		list = append(list, r)
	}
	runBubble(t, "retold", "ipvs, retold for iptables", list, newIPTTarget, canonical, lineDiff)
}

// --- nftables ---

// faultyNFT is a knftables.Fake failing the next fail transactions.
type faultyNFT struct {
	*knftables.Fake
	fail   int
	charge *transcript.Charge
}

// Run is a sync's write; the sync's first one charges its cost.
func (f *faultyNFT) Run(ctx context.Context, tx *knftables.Transaction) error {
	defer f.charge.Sync()
	if f.fail > 0 {
		f.fail--
		return fmt.Errorf("injected transaction failure")
	}
	return f.Fake.Run(ctx, tx)
}

type nftTarget struct {
	s       *scenarios.Scenario
	nft     *faultyNFT
	log     *transcript.SyncLog
	proxier any
}

func newNFTTarget(s *scenarios.Scenario, tr *transcript.Transcript) bubbleTarget {
	nft := &faultyNFT{Fake: knftables.NewFake(knftables.IPv4Family, nftables.Table)}
	t := &nftTarget{s: s, nft: nft}
	t.log = transcript.NewSyncLog(time.Now(), func() string { return nft.Dump() })
	nft.charge = newCharge(tr, t.log, &t.proxier)
	return t
}

func (t *nftTarget) Fail(n int)                   { t.nft.fail += n }
func (t *nftTarget) Syncs() []transcript.Observed { return t.log.Syncs() }

func (t *nftTarget) Start(ctx context.Context, client kubernetes.Interface) (func(), error) {
	set := t.s.Proxy.Settings.(*nftablesmode.Settings)
	detector := proxyutil.NewNoOpLocalDetector()
	if set.ClusterCIDR != "" {
		detector = proxyutil.NewDetectLocalByCIDR(set.ClusterCIDR)
	}
	// nodePortAddresses "primary" is resolved by kube-proxy's server to the
	// node IP as a /32 (cmd/kube-proxy/app/server.go), which the proxier
	// then matches against the host's interface addresses: here a fake
	// network holding the scenario's nodeIPs.
	var npa []string
	var network *proxyutiltest.FakeNetwork
	if set.NodePortAddresses == "primary" {
		if ip := firstIPv4(set.NodeIPs); ip != nil {
			npa = []string{ip.String() + "/32"}
		}
		network = proxyutiltest.NewFakeNetwork()
		var addrs []net.Addr
		for _, s := range set.NodeIPs {
			addrs = append(addrs, &net.IPNet{IP: net.ParseIP(s), Mask: net.CIDRMask(32, 32)})
		}
		network.AddInterfaceAddr(&net.Interface{Name: "eth0", Index: 2, Flags: net.FlagUp}, addrs)
	} else if set.NodePortAddresses != "" {
		return nil, fmt.Errorf("nodePortAddresses %q has no kube-proxy counterpart here", set.NodePortAddresses)
	}
	ctx = klog.NewContext(ctx, t.log.Logger())
	p, err := kproxynft.NewProxier(ctx, v1.IPv4Protocol, syncPeriodOf(t.s), minSyncPeriodOf(t.s), set.MasqueradeAll, 14,
		detector, nodeNameOf(t.s), firstIPv4(set.NodeIPs), nil, nil, npa, false)
	if err != nil {
		return nil, fmt.Errorf("kube-proxy's nftables NewProxier: %w", err)
	}
	t.proxier = p
	f := reflect.ValueOf(p).Elem().FieldByName("nftables")
	reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Set(reflect.ValueOf(knftables.Interface(t.nft)))
	setUnexported(p, "conntrack", conntrack.NewFake())
	setUnexported(p, "serviceHealthServer", healthcheck.NewFakeServiceHealthServer())
	if network != nil {
		setUnexported(p, "networkInterfacer", proxyutil.NetworkInterfacer(network))
	}
	if t.s.Proxy.Zone != "" {
		knownZone(p, t.s.Proxy.Zone)
	}
	return kubeProxyNode(ctx, client, p, resyncOf(t.s))
}

// canonNFT sorts the elements of every set and map (the Fake keeps
// insertion order; kube-proxy ranges over Go maps). Unlike the random
// comparison (nftables_test.go), flushed stale chains stay: both sides
// delete them on the same virtual clock here.
func canonNFT(d string) (string, error) { return nftables.SortElements(d), nil }

// TestKubeProxyNFTablesInBubble replays every nftables scenario of the
// library through kube-proxy v1.36.3's nftables proxier in a bubble. Its
// NewProxier needs nft and CAP_NET_ADMIN, so the test re-executes itself
// in a new user and network namespace, as TestNFTablesMatchesKubeProxy
// does.
func TestKubeProxyNFTablesInBubble(t *testing.T) {
	if os.Getenv(bubbleChildEnv) == "" {
		// make upstream-bubble sets PROXYSIM_BUBBLE_REQUIRED: there a
		// missing tool or namespace fails instead of skipping.
		skip := t.Skipf
		if os.Getenv("PROXYSIM_BUBBLE_REQUIRED") != "" {
			skip = t.Fatalf
		}
		for _, bin := range []string{"nft", "unshare"} {
			if _, err := exec.LookPath(bin); err != nil {
				skip("%s not found: run netns/hostdeps.sh (installs nftables)", bin)
			}
		}
		args := []string{"-rn", os.Args[0], "-test.run=^TestKubeProxyNFTablesInBubble$", fmt.Sprintf("-bubble-runs=%d", *bubbleRuns), fmt.Sprintf("-update-bubble=%v", *updateBubble)}
		if testing.Verbose() {
			args = append(args, "-test.v")
		}
		cmd := exec.Command("unshare", args...)
		cmd.Env = append(os.Environ(), bubbleChildEnv+"=1")
		out, err := cmd.CombinedOutput()
		t.Logf("in a new user+network namespace:\n%s", out)
		if err != nil {
			if strings.Contains(string(out), "unshare failed") || strings.Contains(string(out), "Operation not permitted") {
				skip("cannot create a user+network namespace here: %s", strings.TrimSpace(string(out)))
			}
			t.Fatalf("the comparison failed: %v", err)
		}
		return
	}
	runBubble(t, "nftables", nftablesmode.Name, libraryOfMode(t, nftablesmode.Name), newNFTTarget, canonNFT, nftLineDiff)
}

// noFaults is a target whose injected failures never happen.
type noFaults struct{ bubbleTarget }

func (noFaults) Fail(int) {}

// uncharged is a target whose syncs take no virtual time.
func uncharged(t bubbleTarget) bubbleTarget {
	switch t := t.(type) {
	case *iptTarget:
		t.ipt.charge.Off = true
	case *ipvsTarget:
		t.charge.Off = true
	}
	return t
}

// TestBubbleComparisonCatchesDifferences shows that the comparison can
// fail: kube-proxy given minSyncPeriod 2s where proxysim had 1s syncs at
// other instants; kube-proxy whose restores never fail keeps a
// dataplane proxysim's failed restores did not write; kube-proxy whose
// syncs are not charged their cost syncs earlier (from v1.34 the cooldown
// counts from a sync's end) and ends its syncs at their start.
func TestBubbleComparisonCatchesDifferences(t *testing.T) {
	for _, c := range []struct {
		scenario, want string
		retell         bool
		target         func(s *scenarios.Scenario, tr *transcript.Transcript) bubbleTarget
	}{
		{"sync-cost-v1.34", "sync 3: proxysim at 2.45s (request), kube-proxy at 2s", false, func(s *scenarios.Scenario, tr *transcript.Transcript) bubbleTarget {
			return uncharged(newIPVSTarget(s, tr))
		}},
		{"sync-cost-v1.34", "sync 3: proxysim at 2.45s (request), kube-proxy at 2s", true, func(s *scenarios.Scenario, tr *transcript.Transcript) bubbleTarget {
			return uncharged(newIPTTarget(s, tr))
		}},
		{"ingress-vs-kube-proxy", "sync 2 at 10.5s: proxysim ended at 10.55s, kube-proxy at 10.5s", true, func(s *scenarios.Scenario, tr *transcript.Transcript) bubbleTarget {
			return uncharged(newIPTTarget(s, tr))
		}},
		{"churn-iptables", "kube-proxy at", false, func(s *scenarios.Scenario, tr *transcript.Transcript) bubbleTarget {
			slower := *s
			d := scenarios.Duration(2 * time.Second)
			slower.Proxy.MinSyncPeriod = &d
			return newIPTTarget(&slower, tr)
		}},
		{"iptables-partial-sync", "kube-proxy failed=false", false, func(s *scenarios.Scenario, tr *transcript.Transcript) bubbleTarget {
			return noFaults{newIPTTarget(s, tr)}
		}},
	} {
		s, err := scenarios.LoadLibrary(c.scenario)
		if err != nil {
			t.Fatal(err)
		}
		if c.retell {
			s = transcript.AsIPTables(s)
		}
		tr, err := transcript.Record(s)
		if err != nil {
			t.Fatal(err)
		}
		var got []transcript.Observed
		canon := canonical
		synctest.Test(t, func(t *testing.T) {
			target := c.target(s, tr)
			if _, ok := target.(*ipvsTarget); ok {
				canon = identity
			}
			if err := tr.Drive(target); err != nil {
				t.Fatal(err)
			}
			got = target.Syncs()
		})
		diffs, _ := tr.Compare(got, canon, lineDiff)
		if !strings.Contains(strings.Join(diffs, "\n"), c.want) {
			t.Errorf("%s: the comparison should report %q, got %q", c.scenario, c.want, diffs)
		}
	}
}
