package naiveproxy_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/proxysim/proxysim/examples/naiveproxy"
	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/bubble"
	_ "github.com/proxysim/proxysim/scenarios/nftablesmode"
)

// run is the example proxy as bubble.Replay starts it.
func run(ctx context.Context, env bubble.ProxyEnv) error {
	return naiveproxy.New(env.Client, env.NFTables).Run(ctx)
}

func load(t *testing.T, file string) *scenarios.Scenario {
	t.Helper()
	s, err := scenarios.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A library scenario of kube-proxy's nftables mode: the example proxy
// spreads connections over a ClusterIP's endpoints as kube-proxy does, and
// rejects a port the Service lacks. Its own table differs from kube-proxy's,
// so the goldens are not checked, and neither are proxysim's runner counts;
// dataplaneOps (5 writes by 8s) holds for it too: one transaction after
// its caches synced, one per slice update.
func TestLibraryScenarioAgreesWithKubeProxy(t *testing.T) {
	s := load(t, "../../scenarios/library/nftables-clusterip-spread.yaml")
	res, err := bubble.Replay(t, s, run, bubble.Options{
		Compare:         bubble.CompareKubeProxy,
		Ignore:          []string{"nftablesFile"},
		SkipUnsupported: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	report := res.Report()
	if !res.Passed() {
		t.Fatalf("the example proxy should pass:\n%s", report)
	}
	if res.Checks != 7 {
		t.Errorf("checked %d expect blocks, want the scenario's 7\n%s", res.Checks, report)
	}
	// Route-wise the two agree at every step; the example proxy's first
	// table comes 100ms after kube-proxy's (WaitForCacheSync polls every
	// 100ms), before the first step: no step differs.
	if res.Compare == nil || res.Compare.Differs() {
		t.Errorf("want no difference from kube-proxy:\n%s", report)
	}
	if len(res.Writes) == 0 || res.Writes[0].String() != "100ms" {
		t.Errorf("first write at %v, want 100ms (after WaitForCacheSync's first poll)", res.Writes)
	}
	for _, key := range []string{"syncs", "nftablesMetrics"} {
		if !strings.Contains(report, key) {
			t.Errorf("the report does not list %q as not checked:\n%s", key, report)
		}
	}
}

// Without SkipUnsupported, a scenario with expectations only proxysim's
// engine can honour is refused, each named with its place and reason.
func TestEngineOnlyExpectationsAreRefused(t *testing.T) {
	s := load(t, "../../scenarios/library/nftables-clusterip-spread.yaml")
	_, err := bubble.Replay(t, s, run, bubble.Options{})
	if err == nil {
		t.Fatal("want an error listing the unsupported expectations")
	}
	for _, want := range []string{"nftables-clusterip-spread.yaml:35:14: timeline[0].expect.syncs", "counts the runs of proxysim's runner", "nftablesMetrics", "SkipUnsupported"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	// A restart restarts proxysim's proxy, not the proxy under test.
	s = load(t, "../../scenarios/library/nftables-partial-and-full-syncs.yaml")
	_, err = bubble.Replay(t, s, run, bubble.Options{})
	if err == nil {
		t.Fatal("want an error listing the unsupported steps and expectations")
	}
	for _, want := range []string{"nftables-partial-and-full-syncs.yaml:98:14: timeline[6].restart: restarts proxysim's proxy, not the proxy under test", "expect.metrics: kube-proxy's metrics"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

// The divergence: once every endpoint is terminating, kube-proxy falls
// back to those still serving and the example proxy sends nowhere. The
// report names the step, the expected and the traced shares, and what
// kube-proxy does at the same step.
func TestTerminatingFallbackDiverges(t *testing.T) {
	res := replayTerminating(t)
	report := res.Report()
	t.Logf("the report a proxy author reads:\n%s", report)
	if res.Passed() {
		t.Fatalf("the example proxy ignores terminating endpoints; the scenario must fail:\n%s", report)
	}
	// timeline[3] and timeline[4]: the example proxy has no ready
	// endpoint left either time.
	if len(res.Failures) != 2 {
		t.Fatalf("want two failures (timeline[3] and [4]), got %d:\n%s", len(res.Failures), report)
	}
	f := res.Failures[0]
	if f.Pos.Path != "timeline[3].expect.route" || f.At.String() != "7s" {
		t.Errorf("failure at %s, %v; want timeline[3].expect.route at 7s (6s + within 1s)", f.Pos.Path, f.At)
	}
	if f.Expected != "{10.244.1.2:8080: 1/3, 10.244.2.3:8080: 1/3, 10.244.3.4:8080: 1/3}" || f.Got != "{ACCEPT: 1}" {
		t.Errorf("expected %s, got %s", f.Expected, f.Got)
	}
	for _, want := range []string{
		"terminating-fallback.yaml:56:9: timeline[3].expect.route at 7s: route: expected {10.244.1.2:8080: 1/3, 10.244.2.3:8080: 1/3, 10.244.3.4:8080: 1/3}, got {ACCEPT: 1}",
		"compared with proxysim's model of kube-proxy v1.36",
		"terminating-fallback.yaml:50:5: timeline[3] at 6s:",
		"route TCP 10.96.0.10:80 from 10.244.9.9: proxy {ACCEPT: 1}, kube-proxy {10.244.1.2:8080: 1/3, 10.244.2.3:8080: 1/3, 10.244.3.4:8080: 1/3}",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("the report lacks %q:\n%s", want, report)
		}
	}
}

func replayTerminating(t *testing.T) *bubble.Result {
	t.Helper()
	s := load(t, "testdata/terminating-fallback.yaml")
	res, err := bubble.Replay(t, s, run, bubble.Options{Compare: bubble.CompareKubeProxy})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// The same scenario gives the same report on every run, with one or two
// Ps.
func TestDeterministic(t *testing.T) {
	old := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(old)
	var first string
	for _, procs := range []int{1, 2, 1, 2} {
		runtime.GOMAXPROCS(procs)
		got := replayTerminating(t).Report()
		if first == "" {
			first = got
			continue
		}
		if got != first {
			t.Fatalf("GOMAXPROCS %d: the report differs:\n%s\nfirst:\n%s", procs, got, first)
		}
	}
}

// Without rate limiting the example proxy programs the second of two quick
// updates at once; kube-proxy waits out its minSyncPeriod. The scenario
// passes (the routes end up the same), and the comparison says by how much
// the example proxy was sooner.
func TestQuickUpdatesShowTheLatencyDifference(t *testing.T) {
	s := load(t, "testdata/quick-updates.yaml")
	res, err := bubble.Replay(t, s, run, bubble.Options{Compare: bubble.CompareKubeProxy})
	if err != nil {
		t.Fatal(err)
	}
	report := res.Report()
	if !res.Passed() {
		t.Fatalf("want a pass:\n%s", report)
	}
	t.Logf("\n%s", report)
	want := "programming TCP 10.96.0.10:80 from 10.244.9.9: proxy +0s, kube-proxy +700ms (proxy 700ms sooner)"
	if !strings.Contains(report, want) {
		t.Errorf("the report lacks %q:\n%s", want, report)
	}
	if c := res.Compare; c == nil || len(c.Steps) != 1 || c.Steps[0].Step != 1 || len(c.Steps[0].Routes) != 1 {
		t.Errorf("want one step that differs (timeline[1], the route right after it):\n%s", report)
	}
}

// With Update, the goldens are rewritten with what the proxy under test
// programmed; the next replay checks against them.
func TestUpdateWritesTheProxysGolden(t *testing.T) {
	dir := t.TempDir()
	scenario := `name: naive-golden
proxy: {mode: nftables, version: v1.36.0, nodeIPs: [192.168.0.2]}
objects:
  - apiVersion: v1
    kind: Service
    metadata: {name: web, namespace: default}
    spec: {clusterIP: 10.96.0.10, ports: [{name: http, port: 80, protocol: TCP}]}
  - apiVersion: discovery.k8s.io/v1
    kind: EndpointSlice
    metadata: {name: web-abc, namespace: default, labels: {kubernetes.io/service-name: web}}
    addressType: IPv4
    ports: [{name: http, port: 8080, protocol: TCP}]
    endpoints: [{addresses: [10.244.1.2]}]
timeline:
  - at: 1s
    expect: {nftablesFile: naive.nft}
`
	file := filepath.Join(dir, "golden.yaml")
	if err := os.WriteFile(file, []byte(scenario), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := bubble.Replay(t, load(t, file), run, bubble.Options{Update: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Updated) != 1 || !strings.HasSuffix(res.Updated[0], "naive.nft") {
		t.Fatalf("updated %v, want naive.nft", res.Updated)
	}
	golden, err := os.ReadFile(filepath.Join(dir, "naive.nft"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`comment "naiveproxy"`, "ip daddr 10.96.0.10 meta l4proto tcp th dport 80 dnat ip addr . port to numgen random mod 1 map { 0 : 10.244.1.2 . 8080 }"} {
		if !strings.Contains(string(golden), want) {
			t.Errorf("the golden lacks %q:\n%s", want, golden)
		}
	}
	res, err = bubble.Replay(t, load(t, file), run, bubble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Passed() || res.Checks != 1 {
		t.Fatalf("want the new golden to hold:\n%s", res.Report())
	}
}

// The mode's fault reaches the proxy under test: its next transaction
// fails, and the example proxy, which does not retry, only catches up at
// its resync, 30s after its caches synced — on the real time package, in
// virtual time.
func TestTransactionFailureWaitsForTheResync(t *testing.T) {
	scenario := `name: naive-fault
proxy: {mode: nftables, version: v1.36.0, nodeIPs: [192.168.0.2]}
objects:
  - apiVersion: v1
    kind: Service
    metadata: {name: web, namespace: default}
    spec: {clusterIP: 10.96.0.10, ports: [{name: http, port: 80, protocol: TCP}]}
  - apiVersion: discovery.k8s.io/v1
    kind: EndpointSlice
    metadata: {name: web-abc, namespace: default, labels: {kubernetes.io/service-name: web}}
    addressType: IPv4
    ports: [{name: http, port: 8080, protocol: TCP}]
    endpoints: [{addresses: [10.244.1.2]}]
timeline:
  - at: 2s
    fault: {transactionFailures: 1}
  - at: 3s
    patch: {kind: EndpointSlice, name: web-abc, endpoint: 10.244.1.2, conditions: {ready: false}}
    expect:
      dataplaneOps: {count: 2}
      route: {from: 10.244.9.9, to: 10.96.0.10:80, shares: {10.244.1.2:8080: 1}}
  - at: 30.1s
    expect:
      dataplaneOps: {count: 1, between: [30.1s, 30.1s]}
      route: {from: 10.244.9.9, to: 10.96.0.10:80, shares: {ACCEPT: 1}}
`
	s, err := scenarios.Parse("fault.yaml", []byte(scenario), nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := bubble.Replay(t, s, run, bubble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Passed() || res.Checks != 2 {
		t.Fatalf("want both checks to pass:\n%s", res.Report())
	}
	if got := fmt.Sprint(res.Writes); got != "[100ms 3s 30.1s]" {
		t.Errorf("writes at %s, want [100ms 3s 30.1s]", got)
	}
}
