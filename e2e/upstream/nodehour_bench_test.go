package upstream

// One node's virtual hour, three ways, in one benchmark run (issue 25's
// "per node, against the peer"): kube-proxy v1.36.3's own code in a
// testing/synctest bubble (what a cluster simulator built on kube-proxy's
// code would pay per node), proxysim's engine with the node materialised
// (rules rendered and restored into the fake dataplane), and proxysim's
// engine per light node of a cluster (syncs, samples and pod latencies,
// no dataplane: what 5,000 nodes cost). See docs/explanation/performance.md.

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/proxysim/proxysim/e2e/transcript"
	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/replay"
)

const (
	nodeHourEnv    = "PROXYSIM_NODEHOUR"     // the bubble child's mode
	nodeHourSrcEnv = "PROXYSIM_NODEHOUR_SRC" // the bubble child's scenario file
)

// nodeHourScenario is a ClusterLoader2-like load on nodes nodes (the
// first is the scenario's own proxy; the others are light): services
// generated Services of 3 or 8 pods each, written by the EndpointSlice
// controller, and rate pod readiness flips per second for length, each
// node's CPU speed drawn between 70 % and 130 % with 200 ms of sync jitter.
func nodeHourScenario(mode string, nodes, services int, rate float64, length time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, `name: node-hour-%s-%d
proxy: {mode: %s, version: v1.36.0, minSyncPeriod: 1s, syncPeriod: 30s, syncCost: {fixed: 200ms, perEndpoint: 20us}}
controllers:
  endpointSlice: {batchPeriod: 1s}
cluster:
  seed: 1
  pools:
    - {name: main, count: %d, zone: zone-a, cpuSpeed: {min: 70%%, max: 130%%}, syncJitter: 200ms}
  generate: {seed: 2, services: %d, endpointsPerService: {3: 50%%, 8: 50%%}, pods: true}
timeline:
`, mode, nodes, mode, nodes, services)
	r := rand.New(rand.NewPCG(5, 6))
	flipped := map[string]bool{}
	every := time.Duration(float64(time.Second) / rate)
	for at := time.Second; at < length; at += every {
		pod := fmt.Sprintf("svc-%05d-%d", r.IntN(services), r.IntN(3))
		flipped[pod] = !flipped[pod]
		fmt.Fprintf(&b, "  - {at: %dms, podReady: {namespace: gen, name: %s, ready: %v}}\n", at.Milliseconds(), pod, !flipped[pod])
	}
	fmt.Fprintf(&b, "  - {at: %dms, note: the end}\n", length.Milliseconds())
	return b.String()
}

func nodeHourEnvInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// BenchmarkNodeHour replays one node's virtual hour (PROXYSIM_BENCH_MINUTES)
// of 1,000 Services (PROXYSIM_BENCH_SERVICES) under 2 pod readiness changes
// per second (PROXYSIM_BENCH_RATE), iptables and nftables, three ways, and
// reports each one's CPU time per virtual hour and the ratios:
// x-materialised is kube-proxy's code over proxysim's materialised node,
// x-light-node over proxysim's light node (the 1,001-node cluster's CPU time
// less the 1-node cluster's, per light node; each the least of three
// replays). kube-proxy's side runs in a
// child process (testing/synctest needs a *testing.T; nftables also a user
// and network namespace) that times only its bubble, and must sync at the
// same instants as proxysim did, or the benchmark fails.
func BenchmarkNodeHour(b *testing.B) {
	services := nodeHourEnvInt("PROXYSIM_BENCH_SERVICES", 1000)
	rate := float64(nodeHourEnvInt("PROXYSIM_BENCH_RATE", 2))
	length := time.Duration(nodeHourEnvInt("PROXYSIM_BENCH_MINUTES", 60)) * time.Minute
	const light = 1000
	for _, mode := range []string{"iptables", "nftables"} {
		b.Run(mode, func(b *testing.B) {
			one := nodeHourScenario(mode, 1, services, rate, length)
			many := nodeHourScenario(mode, 1+light, services, rate, length)
			file := filepath.Join(b.TempDir(), "node-hour.yaml")
			if err := os.WriteFile(file, []byte(one), 0o644); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				kube, syncs := nodeHourInBubble(b, mode, file)
				// The light nodes' share is a difference of two replays
				// that each take a minute: the least of three of each
				// keeps a busy machine's noise out of it.
				var node, cluster time.Duration
				var nodeSyncs int
				for range 3 {
					n, ns := nodeHourReplay(b, one)
					c, _ := nodeHourReplay(b, many)
					if node == 0 || n < node {
						node = n
					}
					if cluster == 0 || c < cluster {
						cluster = c
					}
					nodeSyncs = ns
				}
				if syncs != nodeSyncs {
					b.Fatalf("kube-proxy synced %d times, proxysim %d", syncs, nodeSyncs)
				}
				perLight := (cluster - node) / light
				hours := length.Hours()
				b.ReportMetric(kube.Seconds()/hours, "kube-proxy-cpu-s/h")
				b.ReportMetric(node.Seconds()/hours, "materialised-cpu-s/h")
				b.ReportMetric(perLight.Seconds()/hours, "light-node-cpu-s/h")
				b.ReportMetric(kube.Seconds()/node.Seconds(), "x-materialised")
				b.ReportMetric(kube.Seconds()/perLight.Seconds(), "x-light-node")
				b.ReportMetric(float64(syncs), "syncs")
			}
		})
	}
}

// nodeHourReplay is proxysim's replay of src, in CPU time, and the first
// node's syncs.
func nodeHourReplay(b *testing.B, src string) (time.Duration, int) {
	b.Helper()
	cpu0, err := cpuTime()
	if err != nil {
		b.Fatal(err)
	}
	s, err := scenarios.Parse("node-hour.yaml", []byte(src), nil)
	if err != nil {
		b.Fatal(err)
	}
	res, err := replay.Replay(s, replay.Options{TraceKeep: 256, MaxEvents: 1 << 40, MaxMemory: 1 << 40})
	if err != nil {
		b.Fatal(err)
	}
	cpu1, err := cpuTime()
	if err != nil {
		b.Fatal(err)
	}
	return cpu1 - cpu0, len(res.Runs)
}

// nodeHourInBubble runs TestNodeHourInBubble in a child process and reads
// the CPU time its bubble took and kube-proxy's syncs.
func nodeHourInBubble(b *testing.B, mode, file string) (time.Duration, int) {
	b.Helper()
	args := []string{os.Args[0], "-test.run=^TestNodeHourInBubble$", "-test.v"}
	if mode == "nftables" {
		// kube-proxy's nftables NewProxier runs nft: CAP_NET_ADMIN in a
		// namespace of its own.
		args = append([]string{"unshare", "-rn"}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), nodeHourEnv+"="+mode, nodeHourSrcEnv+"="+file)
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("kube-proxy's side: %v\n%s", err, out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if _, rest, ok := strings.Cut(l, "nodehour: "); ok {
			var cpu int64
			var syncs int
			if _, err := fmt.Sscanf(rest, "cpu_ns=%d syncs=%d", &cpu, &syncs); err == nil {
				return time.Duration(cpu), syncs
			}
		}
	}
	b.Fatalf("kube-proxy's side printed no result:\n%s", out)
	return 0, 0
}

// TestNodeHourInBubble is BenchmarkNodeHour's child: it replays the
// scenario in PROXYSIM_NODEHOUR_SRC through kube-proxy's proxier of mode
// PROXYSIM_NODEHOUR in a bubble, checks that it synced at proxysim's
// instants with proxysim's outcomes, and prints the bubble's CPU time.
func TestNodeHourInBubble(t *testing.T) {
	mode := os.Getenv(nodeHourEnv)
	if mode == "" {
		t.Skip("BenchmarkNodeHour's child process")
	}
	src, err := os.ReadFile(os.Getenv(nodeHourSrcEnv))
	if err != nil {
		t.Fatal(err)
	}
	s, err := scenarios.Parse("node-hour.yaml", src, nil)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := transcript.RecordTimings(s)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Unsupported) > 0 {
		t.Fatalf("not replayable in a bubble: %v", tr.Unsupported)
	}
	newTarget := map[string]func(*scenarios.Scenario, *transcript.Transcript) bubbleTarget{"iptables": newIPTTarget, "nftables": newNFTTarget}[mode]
	var got []transcript.Observed
	cpu0, err := cpuTime()
	if err != nil {
		t.Fatal(err)
	}
	synctest.Test(t, func(t *testing.T) {
		target := withoutSnapshots(newTarget(s, tr), tr)
		if err := tr.Drive(target); err != nil {
			t.Fatalf("driving kube-proxy: %v", err)
		}
		got = target.Syncs()
	})
	cpu1, err := cpuTime()
	if err != nil {
		t.Fatal(err)
	}
	same := func(d string) (string, error) { return d, nil }
	diffs, raced := tr.Compare(got, same, func(a, b string) string { return "" })
	if len(diffs) > 0 {
		t.Fatalf("kube-proxy and proxysim differ:\n%s", strings.Join(diffs, "\n"))
	}
	t.Logf("%d syncs at proxysim's instants (%d raced)", len(got), len(raced))
	fmt.Printf("nodehour: cpu_ns=%d syncs=%d\n", (cpu1 - cpu0).Nanoseconds(), len(got))
}

// withoutSnapshots makes a target's sync log keep no dataplane (an hour's
// thousands of rulesets would cost gigabytes): only the syncs' instants
// and outcomes are compared.
func withoutSnapshots(target bubbleTarget, tr *transcript.Transcript) bubbleTarget {
	none := func() string { return "" }
	switch t := target.(type) {
	case *iptTarget:
		t.log = transcript.NewSyncLog(time.Now(), none)
		t.ipt.charge = newCharge(tr, t.log, &t.proxier)
	case *nftTarget:
		t.log = transcript.NewSyncLog(time.Now(), none)
		t.nft.charge = newCharge(tr, t.log, &t.proxier)
	}
	return target
}
