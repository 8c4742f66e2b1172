package nftablesmode_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"k8s.io/utils/clock"

	"github.com/proxysim/proxysim/scenarios"
	_ "github.com/proxysim/proxysim/scenarios/controllers" // the library's controller twins
	"github.com/proxysim/proxysim/scenarios/internal/scenariotest"
	_ "github.com/proxysim/proxysim/scenarios/iptablesmode" // for the side-by-side churn
	_ "github.com/proxysim/proxysim/scenarios/ipvsmode"     // for the side-by-side churn
	_ "github.com/proxysim/proxysim/scenarios/nftablesmode"
	"github.com/proxysim/proxysim/scenarios/replay"
)

const (
	library  = "../library"
	testdata = "../testdata/nftables"
)

// Every nftables scenario of the library replays green: its goldens,
// routes and metrics hold.
func TestNFTablesScenariosPass(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(library, "nftables-*.yaml"))
	if len(files) < 5 {
		t.Fatalf("only %d nftables scenarios", len(files))
	}
	scenariotest.Passes(t, files)
}

// The side-by-side churn is the same story in the three modes: the files
// differ only in proxy.mode, minSyncPeriod (each mode's default) and their
// expectations, and each passes in its mode.
func TestSideBySideChurn(t *testing.T) {
	var bodies []string
	for _, m := range []string{"ipvs", "iptables", "nftables"} {
		f := filepath.Join(library, "churn-"+m+".yaml")
		res := scenariotest.Replay(t, f)
		if !res.Passed() || res.Checks != 2 {
			var b strings.Builder
			replay.Report(&b, res, true)
			t.Fatalf("%s:\n%s", m, b.String())
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// The story: everything before the first expectation, less the
		// lines that name the mode.
		body := string(src[:strings.Index(string(src), "    note:")])
		var keep []string
		for _, l := range strings.Split(body, "\n") {
			if !strings.HasPrefix(l, "name:") && !strings.Contains(l, "mode:") && !strings.Contains(l, "minSyncPeriod:") {
				keep = append(keep, l)
			}
		}
		bodies = append(bodies, strings.Join(keep, "\n"))
	}
	if bodies[0] != bodies[1] || bodies[1] != bodies[2] {
		t.Error("the three churn files must tell the same story")
	}
}

// Every scenario under failing/ fails exactly at its "# want-fail: LINE
// WHAT at INSTANT" lines, and nowhere else.
func TestNFTablesFailingScenariosFailWhereDeclared(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(testdata, "failing", "*.yaml"))
	if len(files) < 3 {
		t.Fatalf("only %d failing nftables scenarios", len(files))
	}
	scenariotest.FailsWhereDeclared(t, files)
}

// The same scenario gives a byte-identical trace on every replay.
func TestNFTablesTracesAreDeterministic(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(library, "nftables-*.yaml"))
	for _, f := range files {
		var first string
		for i := 0; i < 3; i++ {
			var b strings.Builder
			replay.Report(&b, scenariotest.Replay(t, f), true)
			got := regexp.MustCompile(`virtual in [^,]+,`).ReplaceAllString(b.String(), "")
			if i == 0 {
				first = got
			} else if got != first {
				t.Fatalf("%s: replay %d differs", f, i)
			}
		}
	}
}

func parse(text string) error {
	_, err := scenarios.Parse("x.yaml", []byte(text), nil)
	return err
}

const proxyLine = "proxy: {mode: nftables, version: v1.36.0}\n"

// mode: nftables is accepted once the mode is registered, and its keys
// are checked at load time.
func TestNFTablesModeLoadsAndChecksItsKeys(t *testing.T) {
	if err := parse("name: x\n" + proxyLine + "timeline: [{at: 0s, note: n}]\n"); err != nil {
		t.Fatalf("mode nftables rejected: %v", err)
	}
	step := func(s string) string { return proxyLine + "timeline: [{at: 0s, " + s + "}]\n" }
	for _, c := range []struct{ text, want string }{
		{"proxy: {mode: nftables, version: v1.36.0, clusterCIDR: nope}\ntimeline: [{at: 0s, note: n}]\n", `"nope" is not a CIDR`},
		{"proxy: {mode: nftables, version: v1.36.0, nodeIPs: [x]}\ntimeline: [{at: 0s, note: n}]\n", `"x" is not an IPv4 address`},
		{"proxy: {mode: nftables, version: v1.36.0, nodePortAddresses: primary}\ntimeline: [{at: 0s, note: n}]\n", "primary needs nodeIPs"},
		{"proxy: {mode: nftables, version: v1.36.0, nodePortAddresses: all}\ntimeline: [{at: 0s, note: n}]\n", "want primary"},
		{"proxy: {mode: nftables, version: v1.36.0, serviceCIDRs: [10.96.0.0/12, fd00::/108]}\ntimeline: [{at: 0s, note: n}]\n", `serviceCIDRs[1]: "fd00::/108" is not an IPv4 CIDR`},
		{step("fault: {transactionFailures: 0}"), "want at least 1 failing transaction"},
		{step("expect: {nftablesMetrics: {}}"), "say which metric"},
		{step("expect: {nftablesMetrics: {syncFailures: -1}}"), "must not be negative"},
		{step("expect: {route: {from: 10.0.0.1, to: 10.96.0.1:80, shares: {DROP: 1/2}}}"), "shares sum to 1/2, not 1"},
		{step("expect: {route: {from: 10.0.0.1, to: 10.96.0.1, shares: {DROP: 1}}}"), "want ip:port"},
		{step("expect: {route: {from: 10.0.0.1, to: 10.96.0.1:80, again: 1s, shares: {DROP: 1}}}"), "a pair FIRST -> SECOND"},
		{step("expect: {route: {from: 10.0.0.1, to: 10.96.0.1:80, again: 1s, shares: {DROP -> nowhere: 1}}}"), `got "nowhere"`},
		{step("expect: {nftables: x, nftablesFile: y}"), "not both"},
		{step("expect: {iptables: x}"), "iptables"},
		{step("fault: {restoreFailures: 1}"), "restoreFailures"},
	} {
		err := parse("name: x\n" + c.text)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want an error containing %q", c.text, err, c.want)
		}
	}
}

// serviceCIDRs gives cluster-ips-check its drop of unallocated ClusterIPs,
// as kube-proxy writes it once it has seen the cluster's ServiceCIDRs;
// without them there is no such rule.
func TestServiceCIDRsDropUnallocatedClusterIPs(t *testing.T) {
	for _, c := range []struct {
		cidrs string
		want  bool
	}{{"", false}, {"serviceCIDRs: [10.96.0.0/12, 10.100.0.0/16], ", true}} {
		s, err := scenarios.Parse("x.yaml", []byte("name: x\nproxy: {mode: nftables, version: v1.36.0, "+c.cidrs+"minSyncPeriod: 1s}\ntimeline: [{at: 1s, note: n}]\n"), nil)
		if err != nil {
			t.Fatal(err)
		}
		mode, _ := scenarios.LookupMode("nftables")
		var dp scenarios.Dataplane
		_, err = replay.Replay(s, replay.Options{Dataplane: func(s *scenarios.Scenario, clk clock.PassiveClock) (scenarios.Dataplane, error) {
			d, err := mode.Fake(s, clk)
			dp = d
			return d, err
		}})
		if err != nil {
			t.Fatal(err)
		}
		dump, err := dp.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		rule := `add rule ip kube-proxy cluster-ips-check ip daddr { 10.96.0.0/12,10.100.0.0/16 } drop comment "Drop traffic to unallocated ClusterIPs"`
		if got := strings.Contains(dump, rule); got != c.want {
			t.Errorf("%q: the drop rule is there: %v, want %v\n%s", c.cidrs, got, c.want, dump)
		}
	}
}

// A slice write whose sync starts at once (cooldown over) is checked out
// by that sync: kube-proxy's tracker counts it pending before its handler
// asks for the sync, and the sync resets the gauge. nftables-clusterip-
// spread ends with every write synced, so nothing is pending at its end
// (the real kube-proxy reports 0 there: e2e/realcp).
func TestImmediateSyncLeavesNoPendingChange(t *testing.T) {
	res := scenariotest.Replay(t, filepath.Join(library, "nftables-clusterip-spread.yaml"))
	for _, want := range []string{
		"kubeproxy_sync_proxy_rules_endpoint_changes_pending 0\n",
		"kubeproxy_sync_proxy_rules_endpoint_changes_total 5\n",
		"kubeproxy_sync_proxy_rules_service_changes_pending 0\n",
	} {
		if !strings.Contains(string(res.Metrics), want) {
			t.Errorf("want %q in\n%s", want, res.Metrics)
		}
	}
}
