package scenarios_test

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/replay"
)

// loadScenario is a cluster of nodes in two pools (10% on another
// minSyncPeriod) with services generated Services of 3 to 8 pods each
// (PROXYSIM_BENCH_PODS each if set), the
// EndpointSlice controller, and pod readiness flips at rate changes per
// second for length: a stand-in for ClusterLoader2's load test until the
// churn generators exist.
func loadScenario(mode string, nodes, services int, rate float64, length time.Duration) string {
	var b strings.Builder
	canary := max(nodes/10, 1)
	perService := "{3: 50%, 8: 50%}"
	if n := benchEnv("PROXYSIM_BENCH_PODS", 0); n > 0 {
		perService = fmt.Sprintf("{%d: 100%%}", n)
	}
	fmt.Fprintf(&b, `name: cluster-load-%s-%d
proxy: {mode: %s, version: v1.36.0, minSyncPeriod: 1s, syncPeriod: 30s, syncCost: {fixed: 200ms, perEndpoint: 20us}}
controllers:
  endpointSlice: {batchPeriod: 1s}
cluster:
  seed: 1
  pools:
    - {name: main, count: %d, zone: zone-a, cpuSpeed: {min: 70%%, max: 130%%}, syncJitter: 200ms}
    - {name: canary, count: %d, zone: zone-b, proxy: {minSyncPeriod: 5s}, cpuSpeed: {min: 70%%, max: 130%%}, syncJitter: 200ms}
  generate:
    seed: 2
    services: %d
    endpointsPerService: %s
    pods: true
timeline:
`, mode, nodes, mode, nodes-canary, canary, services, perService)
	r := rand.New(rand.NewPCG(5, 6))
	flipped := map[string]bool{}
	every := time.Duration(float64(time.Second) / rate)
	for at := time.Second; at < length; at += every {
		pod := fmt.Sprintf("svc-%05d-%d", r.IntN(services), r.IntN(3))
		flipped[pod] = !flipped[pod]
		fmt.Fprintf(&b, "  - {at: %dms, podReady: {namespace: gen, name: %s, ready: %v}}\n", at.Milliseconds(), pod, !flipped[pod])
	}
	fmt.Fprintf(&b, "  - {at: %dms, expect: {cluster: {syncs: {atLeast: 2}}}}\n", length.Milliseconds())
	return b.String()
}

func benchEnv(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// BenchmarkClusterHour replays one virtual hour (PROXYSIM_BENCH_MINUTES) of
// a 100-node cluster (PROXYSIM_BENCH_NODES) with 1,000 Services
// (PROXYSIM_BENCH_CLUSTER_SERVICES) and 2 pod readiness changes per second
// (PROXYSIM_BENCH_RATE), in iptables and nftables mode; it reports how
// many times faster than real time the replay ran (x-realtime, load
// included; x-cputime, in the process's CPU time), the SLI, and the
// process's peak RSS so far (peak-rss-MiB: run one mode per process, as
// `make cluster-5000` does, to have each mode's own). With
// PROXYSIM_BENCH_HEAPPROFILE set it writes the live heap's profile there
// at the replay's end.
func BenchmarkClusterHour(b *testing.B) {
	nodes := benchEnv("PROXYSIM_BENCH_NODES", 100)
	services := benchEnv("PROXYSIM_BENCH_CLUSTER_SERVICES", 1000)
	rate := float64(benchEnv("PROXYSIM_BENCH_RATE", 2))
	length := time.Duration(benchEnv("PROXYSIM_BENCH_MINUTES", 60)) * time.Minute
	for _, mode := range []string{"iptables", "nftables"} {
		b.Run(mode, func(b *testing.B) {
			src := []byte(loadScenario(mode, nodes, services, rate, length))
			b.ReportAllocs()
			for b.Loop() {
				replayHour(b, src, length)
			}
		})
	}
}

// replayHour replays a cluster scenario of length and reports how many
// times faster than real time it ran (x-realtime, load included;
// x-cputime, in the process's CPU time: the machine is shared, so it is
// the steadier figure), the SLI, the nodes' mean CPU-seconds of syncing
// per node-hour and the peak RSS so far.
func replayHour(b *testing.B, src []byte, length time.Duration) {
	start, cpu0 := time.Now(), cpuTime()
	s := parseLoad(b, src)
	opts := replay.Options{TraceKeep: 256, MaxEvents: 1 << 40, MaxMemory: 1 << 40}
	if path := os.Getenv("PROXYSIM_BENCH_HEAPPROFILE"); path != "" {
		// The live heap at the end of the replay, the world still held.
		written := false
		opts.Progress = func(at time.Duration) {
			if at >= length && !written {
				written = true
				writeHeapProfile(b, path)
			}
		}
	}
	res, err := replay.Replay(s, opts)
	if err != nil {
		b.Fatal(err)
	}
	if !res.Passed() {
		b.Fatal(res.Failures)
	}
	wall, cpu := time.Since(start), cpuTime()-cpu0
	b.ReportMetric(length.Seconds()/wall.Seconds(), "x-realtime")
	b.ReportMetric(length.Seconds()/cpu.Seconds(), "x-cputime")
	c := res.Cluster
	b.ReportMetric(float64(c.SLI.Samples), "samples")
	b.ReportMetric(c.SLI.Perc99, "sli-p99-s")
	b.ReportMetric(c.SLI.True99, "exact-p99-s")
	b.ReportMetric(float64(c.PodChanges), "pod-changes")
	b.ReportMetric(c.Pod99.Seconds(), "pod-p99-s")
	b.ReportMetric(float64(nodeFigures(c)), "node-figures-fnv")
	var cpuh float64
	for _, n := range c.Nodes {
		cpuh += n.CPUPerHour
	}
	b.ReportMetric(cpuh/float64(len(c.Nodes)), "node-cpu-s/h")
	b.ReportMetric(float64(peakRSS())/(1<<20), "peak-rss-MiB")
}

// stepsPerPart bounds the timeline steps parseLoad parses as one
// document: the scenario decoder's bound of 200,000 YAML nodes a document
// (scenarios/decode.go maxNodes) holds about 22,000 of loadScenario's
// steps, and an hour at 20 changes/s has 72,000.
const stepsPerPart = 15000

// parseLoad parses loadScenario's text, in parts of at most stepsPerPart
// steps when longer (the header, then a part of the timeline's lines,
// one step a line), their timelines joined in order.
func parseLoad(b *testing.B, src []byte) *scenarios.Scenario {
	text := string(src)
	cut := strings.Index(text, "\ntimeline:\n") + len("\ntimeline:\n")
	header, steps := text[:cut], strings.SplitAfter(strings.TrimSuffix(text[cut:], "\n"), "\n")
	var s *scenarios.Scenario
	for from := 0; from < len(steps); from += stepsPerPart {
		part := header + strings.Join(steps[from:min(from+stepsPerPart, len(steps))], "")
		ps, err := scenarios.Parse("load.yaml", []byte(part), nil)
		if err != nil {
			b.Fatal(err)
		}
		if s == nil {
			s = ps
			continue
		}
		s.Timeline = append(s.Timeline, ps.Timeline...)
	}
	return s
}

// nodeFigures is a 32-bit FNV-1a hash of every node's figures (syncs,
// failed syncs, busy time, samples, worst sample and pod latency): two
// runs giving the same hash gave the same per-node figures.
func nodeFigures(c *replay.ClusterResult) uint32 {
	h := fnv.New32a()
	for _, n := range c.Nodes {
		fmt.Fprintf(h, "%s %d %d %d %d %d %d\n", n.Name, n.Syncs, n.FailedSyncs, n.Busy, n.Samples, n.Worst, n.WorstPod)
	}
	return h.Sum32()
}

// BenchmarkClusterNodeMemory measures the live heap of a light node: the
// same 10-minute replay with PROXYSIM_BENCH_NODES nodes and with one,
// the difference over the extra nodes (bytes/node, samples included).
func BenchmarkClusterNodeMemory(b *testing.B) {
	nodes := benchEnv("PROXYSIM_BENCH_NODES", 1000)
	services := benchEnv("PROXYSIM_BENCH_CLUSTER_SERVICES", 1000)
	length := 10 * time.Minute
	for b.Loop() {
		lightNodeBytes(b, nodes, length, func(n int) []byte { return []byte(loadScenario("iptables", n, services, 2, length)) })
	}
}

// lightNodeBytes reports the live heap per light node (bytes/node): the
// heap at the end of length of the scenario src makes for nodes nodes,
// less that for 2, over the nodes added.
func lightNodeBytes(b *testing.B, nodes int, length time.Duration, src func(n int) []byte) {
	heap := func(n int) uint64 {
		s, err := scenarios.Parse("load.yaml", src(n), nil)
		if err != nil {
			b.Fatal(err)
		}
		var peak uint64
		res, err := replay.Replay(s, replay.Options{TraceKeep: 256, MaxEvents: 1 << 40, MaxMemory: 1 << 40,
			Progress: func(at time.Duration) {
				if at == length {
					runtime.GC()
					var m runtime.MemStats
					runtime.ReadMemStats(&m)
					peak = max(peak, m.HeapAlloc)
				}
			}})
		if err != nil {
			b.Fatal(err)
		}
		if !res.Passed() {
			b.Fatal(res.Failures)
		}
		return peak
	}
	one := heap(2)
	many := heap(nodes)
	b.ReportMetric(float64(int64(many)-int64(one))/float64(nodes-2), "bytes/node")
}

// writeHeapProfile writes the live heap's profile to path.
func writeHeapProfile(b *testing.B, path string) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	runtime.GC()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		b.Fatal(err)
	}
}

// peakRSS is the largest resident set this process has had, in bytes.
func peakRSS() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Maxrss * 1024 // kilobytes on Linux
}

// cpuTime is the CPU time this process has used (user and system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
