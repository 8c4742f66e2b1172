package realcp

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/proxysim/proxysim/e2e/transcript"
	"github.com/proxysim/proxysim/netns"
	"github.com/proxysim/proxysim/scenarios"
	// Every library scenario must load to be sorted by mode.
	_ "github.com/proxysim/proxysim/scenarios/ingressnginx"
	_ "github.com/proxysim/proxysim/scenarios/ipvsmode"
)

// tolerance is how far a real sync's start may be from its predicted
// instant. Measured (docs/realcp.md): kube-proxy's watch delivers a write
// a few milliseconds after the API call, and its runner timers fire late
// by the machine's load; the largest offset seen on a loaded 2-core
// machine is in the verdicts' log.
const tolerance = 250 * time.Millisecond

// realCase is one library scenario in one mode (and iptables backend).
type realCase struct {
	scenario string
	backend  netns.IPTablesBackend // iptables mode only
	// listed says why the scenario is not replayed here (yet).
	listed string
	// long says why the scenario runs only on demand (-realcp-long, make
	// realcp-long): its real length. Its verdict is pinned in
	// testdata/realcp-long.txt.
	long string
	// file, if set, is a scenario of this package's testdata (scenario
	// is its name), not the library's.
	file string
}

// load is the case's scenario.
func (c realCase) load() (*scenarios.Scenario, error) {
	if c.file != "" {
		return scenarios.Load(c.file)
	}
	return scenarios.LoadLibrary(c.scenario)
}

func (c realCase) label(mode string) string {
	if mode == "iptables" && c.backend != "" {
		return c.scenario + " (" + string(c.backend) + ")"
	}
	return c.scenario
}

// realCases are the scenarios compared, in the order run: the short,
// plain stories first.
var realCases = []realCase{
	{scenario: "iptables-probability-spread", backend: netns.NFT},
	{scenario: "iptables-traffic-policies", backend: netns.NFT},
	{scenario: "iptables-pod-label-change", backend: netns.NFT},
	{scenario: "iptables-session-affinity", backend: netns.NFT},
	{scenario: "iptables-terminating-pod-publish-not-ready", backend: netns.NFT},
	{scenario: "iptables-rolling-update-controllers", backend: netns.NFT},
	{scenario: "iptables-restore-failure-retry-v1.34", backend: netns.NFT},
	{scenario: "churn-iptables", backend: netns.NFT},
	{scenario: "iptables-traffic-policies", backend: netns.Legacy},
	{scenario: "churn-iptables", backend: netns.Legacy},
	{scenario: "nftables-traffic-policies"},
	{scenario: "nftables-session-affinity"},
	{scenario: "nftables-source-ranges"},
	{scenario: "nftables-clusterip-spread"},
	{scenario: "nftables-pod-label-change"},
	{scenario: "nftables-terminating-pod-publish-not-ready"},
	{scenario: "nftables-rolling-update-controllers"},
	{scenario: "nftables-transaction-failure-retry"},
	{scenario: "nftables-stale-chain-cleanup-failure"},
	{scenario: "churn-nftables"},
	// The operator's flushes run in kube-proxy's namespace.
	{scenario: "iptables-canary-flush", backend: netns.NFT},
	{scenario: "iptables-canary-flush", backend: netns.Legacy},
	// Restarts: short stories of this package (the library's is an hour).
	{scenario: "restart-iptables", backend: netns.NFT, file: "testdata/scenarios/restart-iptables.yaml"},
	{scenario: "restart-nftables", file: "testdata/scenarios/restart-nftables.yaml"},

	{scenario: "iptables-restore-failure-retry-v1.33", listed: "proxy.version v1.33.0 is the burst runner; this binary is v1.36.3"},
	{scenario: "iptables-partial-sync", backend: netns.NFT, long: "an hour of real time (its last step is at 1h0m35s, after the hourly full sync)"},
	{scenario: "iptables-large-cluster", backend: netns.NFT, long: "an hour of real time (its last step is at 1h0m5s, after the hourly full sync)"},
	{scenario: "generated-cluster-iptables", listed: "a generated cluster (namespace gen, 300 Services): not yet run against the binary; generated clusters' sync durations are measured by TestSyncDurationsAtScale"},
	{scenario: "cluster-pools-iptables", listed: "node pools (cluster.pools): one kube-proxy per pool, not one binary; not yet run"},
	{scenario: "cl2-load-100", listed: "100 nodes in pools (cluster.pools) under a generated churn: one kube-proxy per node, not one binary; not yet run"},
	{scenario: "cl2-load-5000", listed: "5,000 nodes in pools (cluster.pools) under a generated churn: one kube-proxy per node, not one binary; not yet run (make cl2-load-5000 replays it)"},
	{scenario: "nftables-partial-and-full-syncs", long: "an hour of real time (the hourly full sync)"},
}

// TestKubeProxyBinaryAgainstPrediction replays each case against a real
// control plane and kube-proxy's binary, and compares with proxysim's
// prediction; the verdicts are pinned in testdata/realcp.txt.
func TestKubeProxyBinaryAgainstPrediction(t *testing.T) {
	requireRoot(t)
	binary := kubeProxyBinary(t)
	var rows []transcript.Verdict
	for _, c := range realCases {
		if *onlyScenario != "" && !slices.Contains(strings.Split(*onlyScenario, ","), c.scenario) {
			continue
		}
		if c.listed != "" && scenarios.IsLarge(c.scenario) {
			// Minutes to load (scenarios.LargeTag), and listed anyway.
			if *maxLength == 0 && !*runLong {
				rows = append(rows, transcript.Verdict{Scenario: c.label(""), Verdict: "listed: " + c.listed})
			}
			continue
		}
		s, err := c.load()
		if err != nil {
			t.Fatal(err)
		}
		if *maxLength > 0 && (s.Length() > *maxLength || c.listed != "") {
			continue
		}
		label := c.label(s.Proxy.Mode)
		if c.listed != "" {
			if !*runLong {
				rows = append(rows, transcript.Verdict{Scenario: label, Verdict: "listed: " + c.listed})
			}
			continue
		}
		if (c.long != "") != *runLong {
			if c.long != "" {
				rows = append(rows, transcript.Verdict{Scenario: label, Verdict: "on demand: " + c.long + "; make realcp-long, verdict pinned in testdata/realcp-long.txt"})
			}
			continue
		}
		verdict := ""
		t.Run(strings.ReplaceAll(label, " ", "_"), func(t *testing.T) {
			verdict = "DIFFERENT"
			set, err := controllerStory(s)
			if err != nil {
				t.Fatal(err)
			}
			if set != nil {
				cfg, err := configOf(s, c.backend)
				if err != nil {
					t.Fatal(err)
				}
				s = withProxyZone(s, cfg.NodeName)
			}
			tr, err := transcript.RecordWith(s, transcript.Options{Pods: set != nil})
			if err != nil {
				t.Fatalf("proxysim: %v", err)
			}
			r, facts := replayReal(t, s, tr, c.backend, binary)
			t.Logf("kube-proxy's syncs (after its first):\n%s", describe(r))
			diffs, raced, jitter := compareRun(t, r, facts, s.Proxy.Mode, tolerance)
			if len(raced) > 0 {
				t.Logf("accepted: %s", strings.Join(raced, "; "))
			}
			t.Logf("%s: %v in real time (%v of scenario), control plane up in %v, kube-proxy's first sync %v after its start; largest sync offset %v; writes issued late by at most %v",
				label, r.wall.Round(time.Second), s.Length(), r.startup.Round(time.Millisecond), r.proxyUp.Round(time.Millisecond), jitter.Round(time.Millisecond), maxDur(r.writes).Round(time.Millisecond))
			if r.slices != nil {
				t.Logf("upstream's EndpointSlice controller: %d slice writes, largest offset from proxysim's controller's %v; its first write %v after its workers started",
					len(realSliceWrites(r.slices.Events(), r, r.slices.RunAt, r.proxyStart)), r.sliceJitter.Round(time.Millisecond), r.firstSliceWrite().Round(time.Millisecond))
			}
			if len(diffs) > 0 {
				t.Logf("kube-proxy's log, its end:\n%s", r.logTail)
				t.Fatalf("kube-proxy's binary and proxysim differ:\n%s", strings.Join(diffs, "\n"))
			}
			// Races vary from run to run: logged, not pinned.
			verdict = fmt.Sprintf("identical (%d syncs)", len(r.syncs))
		})
		rows = append(rows, transcript.Verdict{Scenario: label, Verdict: verdict})
	}
	golden, title := "testdata/realcp.txt", fmt.Sprintf("kube-proxy v1.36.3's binary on a real API server against proxysim's prediction (sync starts within %v, tables equal after every sync, metrics equal)", tolerance)
	if *runLong {
		golden, title = "testdata/realcp-long.txt", fmt.Sprintf("the long stories (make realcp-long), as %s says", "testdata/realcp.txt")
	}
	if *onlyScenario != "" || *maxLength > 0 {
		switch {
		case *updateVerdicts && *runLong:
			// make realcp-long runs each long story in its own process:
			// each rewrites its own rows.
			updatePinnedRows(t, golden, title, rows)
		case *checkPinned:
			checkPinnedRows(t, golden, rows)
		}
		return
	}
	transcript.CheckVerdicts(t, golden, title, rows, *updateVerdicts)
}

// updatePinnedRows rewrites rows' verdicts in golden, keeping the others,
// under an exclusive lock on the file (the long stories run side by side,
// one process each).
func updatePinnedRows(t *testing.T, golden, title string, rows []transcript.Verdict) {
	t.Helper()
	f, err := os.OpenFile(golden, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	var kept []transcript.Verdict
	for _, l := range strings.Split(string(data), "\n") {
		if label, verdict, ok := strings.Cut(l, "\t"); ok && !strings.HasPrefix(l, "#") {
			kept = append(kept, transcript.Verdict{Scenario: label, Verdict: verdict})
		}
	}
	for _, r := range rows {
		i := slices.IndexFunc(kept, func(k transcript.Verdict) bool { return k.Scenario == r.Scenario })
		if i < 0 {
			kept = append(kept, r)
		} else {
			kept[i] = r
		}
	}
	// Rows in realCases' order, whichever process wrote first.
	order := func(label string) int {
		for i, c := range realCases {
			if label == c.scenario || strings.HasPrefix(label, c.scenario+" (") {
				return i
			}
		}
		return len(realCases)
	}
	slices.SortStableFunc(kept, func(a, b transcript.Verdict) int { return order(a.Scenario) - order(b.Scenario) })
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n", title)
	for _, r := range kept {
		fmt.Fprintf(&b, "%s\t%s\n", r.Scenario, r.Verdict)
	}
	if err := f.Truncate(0); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte(b.String()), 0); err != nil {
		t.Fatal(err)
	}
}

// checkPinnedRows checks a subset's verdicts against the rows pinned by a
// full run (CI's subset: a verdict that changes fails there too, not only
// a story that stops passing).
func checkPinnedRows(t *testing.T, golden string, rows []transcript.Verdict) {
	t.Helper()
	data, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	pinned := map[string]string{}
	for _, l := range strings.Split(string(data), "\n") {
		if label, verdict, ok := strings.Cut(l, "\t"); ok && !strings.HasPrefix(l, "#") {
			pinned[label] = verdict
		}
	}
	if len(rows) == 0 {
		t.Fatalf("no scenario of %q was run", *onlyScenario)
	}
	for _, r := range rows {
		want, ok := pinned[r.Scenario]
		switch {
		case !ok:
			t.Errorf("%s: no verdict pinned in %s", r.Scenario, golden)
		case want != r.Verdict:
			t.Errorf("%s: %s, pinned in %s: %s", r.Scenario, r.Verdict, golden, want)
		default:
			t.Logf("%s: %s, as pinned", r.Scenario, r.Verdict)
		}
	}
}

func maxDur(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}

// TestEveryScenarioHasACase: every library scenario of the iptables and
// nftables modes is compared here or listed with its reason, so a new one
// cannot be forgotten.
func TestEveryScenarioHasACase(t *testing.T) {
	have := map[string]bool{}
	for _, c := range realCases {
		have[c.scenario] = true
	}
	for _, name := range scenarios.LibraryNames() {
		if scenarios.IsLarge(name) {
			// Minutes to load and replay (scenarios.LargeTag): listed
			// whatever its mode, without loading it here.
			if !have[name] {
				t.Errorf("large library scenario %s is not listed in realCases", name)
			}
			continue
		}
		s, err := scenarios.LoadLibrary(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if (s.Proxy.Mode == "iptables" || s.Proxy.Mode == "nftables") && !have[name] {
			t.Errorf("library scenario %s (mode %s) is neither compared nor listed in realCases", name, s.Proxy.Mode)
		}
	}
}
