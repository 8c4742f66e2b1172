// Package upstream133 replays the library's burst-generation scenarios
// through kube-proxy v1.33's own iptables proxier — the last release with
// the BoundedFrequencyRunner of pkg/util/async (token bucket, burst 2,
// RetryAfter) — inside a testing/synctest bubble, and compares every sync
// with proxysim's replay of the same scenario. It is the v1.33 half of
// e2e/upstream's bubble comparison (bubble_test.go there), in a module of
// its own because k8s.io/kubernetes v1.33.13 needs the v0.33 staging
// modules. See docs/explanation/bubble.md.
package upstream133

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net"
	"os"
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
	proxyutil "k8s.io/kubernetes/pkg/proxy/util"
	utiliptables "k8s.io/kubernetes/pkg/util/iptables"
	iptablestest "k8s.io/kubernetes/pkg/util/iptables/testing"

	"github.com/proxysim/proxysim/e2e/transcript"
	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/iptablesmode"

	// Every library scenario must load to be sorted by mode and version.
	_ "github.com/proxysim/proxysim/scenarios/controllers"
	_ "github.com/proxysim/proxysim/scenarios/ingressnginx"
	_ "github.com/proxysim/proxysim/scenarios/ipvsmode"
	_ "github.com/proxysim/proxysim/scenarios/nftablesmode"
	"github.com/proxysim/proxysim/scenarios/replay"
)

var (
	bubbleRuns   = flag.Int("bubble-runs", 1, "times each scenario is replayed in the bubble")
	updateBubble = flag.Bool("update-bubble", false, "rewrite the pinned verdicts (testdata/bubble-v1.33.txt) instead of comparing with them")
)

// TestMain silences klog: kube-proxy's proxier logs through the context's
// logger (transcript.SyncLog), everything else through klog's globals.
func TestMain(m *testing.M) {
	transcript.SilenceKlog()
	flag.Parse()
	os.Exit(m.Run())
}

// burst reports whether proxy.version names a release with the burst
// runner (up to v1.33).
func burst(s *scenarios.Scenario) bool {
	var major, minor int
	if _, err := fmt.Sscanf(strings.TrimPrefix(s.Proxy.Version, "v"), "%d.%d", &major, &minor); err != nil {
		return false
	}
	return major == 1 && minor <= 33
}

type bubbleCase struct{ name, how, verdict string }

// TestKubeProxy133InBubble replays every library scenario that names a
// burst-runner release: those of mode iptables as they are, those of the
// IPVS mode retold for iptables (transcript.AsIPTables) when they have no IPVS-only
// step or proxy field.
func TestKubeProxy133InBubble(t *testing.T) {
	var cases []bubbleCase
	for _, name := range scenarios.TestedLibraryNames() {
		s, err := scenarios.LoadLibrary(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !burst(s) {
			continue
		}
		c := bubbleCase{name: name, how: "as written"}
		switch s.Proxy.Mode {
		case iptablesmode.Name:
		case "", "ipvs":
			if s.Proxy.SyncFailsOnError || s.Proxy.RetryInterval != nil {
				c.verdict = "listed: syncFailsOnError/retryInterval model a failing IPVS sync; kube-proxy's IPVS proxier never fails a sync, and the iptables story of RetryAfter is iptables-restore-failure-retry-v1.33"
				cases = append(cases, c)
				continue
			}
			s = transcript.AsIPTables(s)
			c.how = "retold for iptables"
		default:
			c.verdict = "listed: mode " + s.Proxy.Mode + " has no v1.33 counterpart here"
			cases = append(cases, c)
			continue
		}
		tr, err := transcript.Record(s)
		if err != nil {
			t.Fatalf("%s: proxysim: %v", name, err)
		}
		if !tr.Result.Passed() {
			t.Fatalf("%s: proxysim's own replay fails its expectations: %v", name, tr.Result.Failures)
		}
		if len(tr.Unsupported) > 0 {
			c.verdict = "listed: " + strings.Join(tr.Unsupported, "; ")
			cases = append(cases, c)
			continue
		}
		races := 0
		ok := t.Run(name, func(t *testing.T) {
			for run := 0; run < *bubbleRuns; run++ {
				var got []transcript.Observed
				synctest.Test(t, func(t *testing.T) {
					target := newIPTTarget(s, tr)
					if err := tr.Drive(target); err != nil {
						t.Fatalf("driving kube-proxy: %v", err)
					}
					got = target.log.Syncs()
				})
				diffs, raced := tr.Compare(got, transcript.CanonicalIPTables, transcript.LineDiff)
				if len(diffs) > 0 {
					t.Fatalf("run %d: kube-proxy v1.33.13 and proxysim differ:\n%s", run+1, strings.Join(diffs, "\n"))
				}
				if len(raced) > 0 {
					races++
					t.Logf("run %d, accepted (a write and a sync at one instant): %s", run+1, strings.Join(raced, "; "))
				}
			}
			var at []time.Duration
			for _, s := range tr.Syncs {
				at = append(at, s.Start)
			}
			t.Logf("%d syncs at %v: same instants, same failures, same dataplane after each", len(tr.Syncs), at)
		})
		switch {
		case !ok:
			c.verdict = "DIFFERENT"
		case races > 0:
			c.verdict = fmt.Sprintf("identical (%d syncs); in %d of %d runs kube-proxy synced before a write at the same instant and programmed it one sync later", len(tr.Syncs), races, *bubbleRuns)
		default:
			c.verdict = fmt.Sprintf("identical (%d syncs)", len(tr.Syncs))
		}
		cases = append(cases, c)
	}
	if len(cases) == 0 {
		t.Fatal("no library scenario names a burst-runner release")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "kube-proxy v1.33.13 (burst runner) in a synctest bubble against proxysim, iptables mode (%d bubble run(s) per scenario):\n", *bubbleRuns)
	var rows []transcript.Verdict
	for _, c := range cases {
		fmt.Fprintf(&b, "  %-38s %-20s %s\n", c.name, c.how, c.verdict)
		v := c.verdict
		if strings.HasPrefix(v, "identical") {
			v, _, _ = strings.Cut(v, ";")
		}
		rows = append(rows, transcript.Verdict{Scenario: c.name + " (" + c.how + ")", Verdict: v})
	}
	t.Log(b.String())
	transcript.CheckVerdicts(t, "testdata/bubble-v1.33.txt", "kube-proxy v1.33.13 (burst runner) in a synctest bubble against proxysim, iptables mode", rows, *updateBubble)
}

// kubeIPT is upstream's FakeIPTables failing the next fail restores; it
// quotes an EnsureRule argument with a space as iptables-save prints it
// (the fake joins the argv with spaces).
type kubeIPT struct {
	*iptablestest.FakeIPTables
	fail   int
	charge *transcript.Charge
}

// RestoreAll is the sync's write: applied (or failed) at the run's start,
// as proxysim's is; then the run lasts the cost proxysim charged.
func (f *kubeIPT) RestoreAll(data []byte, flush utiliptables.FlushFlag, counters utiliptables.RestoreCountersFlag) error {
	defer f.charge.Sync()
	if f.fail > 0 {
		f.fail--
		return fmt.Errorf("injected restore failure")
	}
	return f.FakeIPTables.RestoreAll(data, flush, counters)
}

func (f *kubeIPT) EnsureRule(pos utiliptables.RulePosition, table utiliptables.Table, chain utiliptables.Chain, args ...string) (bool, error) {
	quoted := make([]string, len(args))
	for i, a := range args {
		if strings.Contains(a, " ") {
			a = `"` + a + `"`
		}
		quoted[i] = a
	}
	return f.FakeIPTables.EnsureRule(pos, table, chain, quoted...)
}

type iptTarget struct {
	s       *scenarios.Scenario
	ipt     *kubeIPT
	log     *transcript.SyncLog
	proxier any
}

// upstreamRunner is the receiver of kube-proxy v1.33's runner, whose
// goroutine makes every sync but the direct initial one
// (pkg/util/async BoundedFrequencyRunner.Loop).
const upstreamRunner = "k8s.io/kubernetes/pkg/util/async.(*BoundedFrequencyRunner)"

func newIPTTarget(s *scenarios.Scenario, tr *transcript.Transcript) *iptTarget {
	fake := iptablestest.NewFake()
	fake.SetHasRandomFully(true) // proxysim's iptables mode assumes --random-fully
	t := &iptTarget{s: s, ipt: &kubeIPT{FakeIPTables: fake}}
	t.log = transcript.NewSyncLog(time.Now(), func() string {
		var buf bytes.Buffer
		for _, tb := range []utiliptables.Table{utiliptables.TableFilter, utiliptables.TableNAT} {
			if err := fake.SaveInto(tb, &buf); err != nil {
				return "error: " + err.Error()
			}
		}
		return buf.String()
	})
	t.ipt.charge = tr.NewCharge(t.log, upstreamRunner)
	t.ipt.charge.Size = func() (int, int) { return proxierSize(t.proxier) }
	return t
}

// proxierSize reads the service ports and endpoints kube-proxy's proxier
// has applied, as proxysim's Proxier.Size counts its own.
func proxierSize(p any) (servicePorts, endpoints int) {
	v := reflect.ValueOf(p).Elem()
	eps := v.FieldByName("endpointsMap").MapRange()
	for eps.Next() {
		endpoints += eps.Value().Len()
	}
	return v.FieldByName("svcPortMap").Len(), endpoints
}

func (t *iptTarget) Fail(n int) { t.ipt.fail += n }

// setUnexported replaces an unexported field of upstream's Proxier: the
// exported NewProxier wires a real nfacct client, conntrack handle and
// health-check server.
func setUnexported(p any, field string, v any) {
	f := reflect.ValueOf(p).Elem().FieldByName(field)
	if !f.IsValid() {
		panic("upstream Proxier has no field " + field)
	}
	w := reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
	if v == nil {
		w.Set(reflect.Zero(f.Type()))
		return
	}
	w.Set(reflect.ValueOf(v))
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
	syncPeriod := 30 * time.Second
	if t.s.Proxy.SyncPeriod != nil {
		syncPeriod = t.s.Proxy.SyncPeriod.D()
	}
	nodeName := t.s.Proxy.NodeName
	if nodeName == "" {
		nodeName = "node-a"
	}
	ctx = klog.NewContext(ctx, t.log.Logger())
	p, err := kiptables.NewProxier(ctx, v1.IPv4Protocol, t.ipt, sysctltest.NewFake(), syncPeriod, replay.RunnerConfig(t.s.Proxy).MinInterval,
		set.MasqueradeAll, true, 14, detector, nodeName, firstIPv4(set.NodeIPs), nil, nil, nil, false)
	if err != nil {
		return nil, err
	}
	t.proxier = p
	setUnexported(p, "nfacct", nil)
	setUnexported(p, "conntrack", conntrack.NewFake())
	setUnexported(p, "serviceHealthServer", healthcheck.NewFakeServiceHealthServer())
	if t.s.Proxy.Zone != "" {
		// As if known when the proxier was built, as proxysim's
		// proxy.zone is; v1.33 learns it from the Node informer
		// (OnNodeAdd), which also asks for a full sync.
		setUnexported(p, "nodeLabels", map[string]string{v1.LabelTopologyZone: t.s.Proxy.Zone})
	}
	resync := 15 * time.Minute
	if t.s.Proxy.ConfigSyncPeriod != nil && t.s.Proxy.ConfigSyncPeriod.D() > 0 {
		resync = t.s.Proxy.ConfigSyncPeriod.D()
	}
	return kubeProxyNode(ctx, client, p, resync)
}

// kubeProxyNode starts the proxier as v1.33's cmd/kube-proxy/app/server.go
// does (one label selector for both informer factories, the Service
// factory also dropping headless services by field), with the two
// documented differences of e2e/upstream's kubeProxyNode: the handlers'
// Run starts after the initial lists were delivered, the EndpointSlice
// one after the Service one.
func kubeProxyNode(ctx context.Context, client kubernetes.Interface, p proxy.Provider, resync time.Duration) (func(), error) {
	noProxyName, err := labels.NewRequirement(apis.LabelServiceProxyName, selection.DoesNotExist, nil)
	if err != nil {
		return nil, err
	}
	noHeadless, err := labels.NewRequirement(v1.IsHeadlessService, selection.DoesNotExist, nil)
	if err != nil {
		return nil, err
	}
	selector := labels.NewSelector().Add(*noProxyName, *noHeadless)
	slices := informers.NewSharedInformerFactoryWithOptions(client, resync, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = selector.String()
	}))
	services := informers.NewSharedInformerFactoryWithOptions(client, resync, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = selector.String()
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

// TestBurstRunnerCostInBubble tells sync-cost-v1.34 for kube-proxy v1.33
// (its burst runner, whose minSyncPeriod counts from a run's start) and
// for the iptables mode, and replays it through kube-proxy v1.33.13 with
// each runner run charged the scenario's cost: the runs must start and end
// at the instants proxysim's burst runner gives them. Uncharged, the runs
// end at their start, and the comparison must say so.
func TestBurstRunnerCostInBubble(t *testing.T) {
	s, err := scenarios.LoadLibrary("sync-cost-v1.34")
	if err != nil {
		t.Fatal(err)
	}
	told := *transcript.AsIPTables(s)
	told.Proxy.Version = "v1.33.0"
	tr, err := transcript.Record(&told)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Unsupported) > 0 {
		t.Fatalf("listed: %v", tr.Unsupported)
	}
	for _, charged := range []bool{true, false} {
		var got []transcript.Observed
		synctest.Test(t, func(t *testing.T) {
			target := newIPTTarget(&told, tr)
			target.ipt.charge.Off = !charged
			if err := tr.Drive(target); err != nil {
				t.Fatalf("driving kube-proxy: %v", err)
			}
			got = target.log.Syncs()
		})
		diffs, raced := tr.Compare(got, transcript.CanonicalIPTables, transcript.LineDiff)
		switch {
		case charged && len(diffs) > 0:
			t.Errorf("kube-proxy v1.33.13 and proxysim differ:\n%s", strings.Join(diffs, "\n"))
		case charged:
			var spans []string
			for _, x := range tr.Syncs {
				spans = append(spans, fmt.Sprintf("%v-%v", x.Start, x.End))
			}
			t.Logf("%d syncs %v: same starts and ends in kube-proxy v1.33.13 (raced: %v)", len(tr.Syncs), spans, raced)
		case !strings.Contains(strings.Join(diffs, "\n"), "proxysim ended at 1.45s, kube-proxy at 1s"):
			t.Errorf("uncharged, the comparison should report the first run's end, got %q", diffs)
		}
	}
}
