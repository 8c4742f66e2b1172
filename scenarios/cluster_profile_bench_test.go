package scenarios_test

import (
	"os"
	"strings"
	"testing"
	"time"
)

// profiledLoad is loadScenario costed by the default cost profile instead
// of a fixed cost per sync and per endpoint.
func profiledLoad(b *testing.B, mode string, nodes, services int, rate float64, length time.Duration) []byte {
	src := loadScenario(mode, nodes, services, rate, length)
	const fixed = "syncCost: {fixed: 200ms, perEndpoint: 20us}"
	if !strings.Contains(src, fixed) {
		b.Fatal("loadScenario's cost changed")
	}
	return []byte(strings.Replace(src, fixed, "syncCost: {profile: default}", 1))
}

// benchMode is the mode of the profiled cluster benchmarks:
// PROXYSIM_BENCH_MODE (iptables or nftables), iptables by default.
func benchMode() string {
	if m := os.Getenv("PROXYSIM_BENCH_MODE"); m != "" {
		return m
	}
	return "iptables"
}

// BenchmarkClusterHourProfile is BenchmarkClusterHour in iptables mode
// (PROXYSIM_BENCH_MODE) with every node's syncs costed by the default
// profile: each light node works out its syncs' work (docs/cluster.md, "A
// light node's work"). fixed is the same replay with BenchmarkClusterHour's
// fixed cost, run beside it.
func BenchmarkClusterHourProfile(b *testing.B) {
	nodes := benchEnv("PROXYSIM_BENCH_NODES", 100)
	services := benchEnv("PROXYSIM_BENCH_CLUSTER_SERVICES", 1000)
	rate := float64(benchEnv("PROXYSIM_BENCH_RATE", 2))
	length := time.Duration(benchEnv("PROXYSIM_BENCH_MINUTES", 60)) * time.Minute
	for _, cost := range []string{"profile", "fixed"} {
		b.Run(cost, func(b *testing.B) {
			src := []byte(loadScenario(benchMode(), nodes, services, rate, length))
			if cost == "profile" {
				src = profiledLoad(b, benchMode(), nodes, services, rate, length)
			}
			b.ReportAllocs()
			for b.Loop() {
				replayHour(b, src, length)
			}
		})
	}
}

// BenchmarkClusterNodeMemoryProfile is BenchmarkClusterNodeMemory with the
// default profile: the live heap per light node, its work's bookkeeping
// and the cluster's Service state log included.
func BenchmarkClusterNodeMemoryProfile(b *testing.B) {
	nodes := benchEnv("PROXYSIM_BENCH_NODES", 1000)
	services := benchEnv("PROXYSIM_BENCH_CLUSTER_SERVICES", 1000)
	length := 10 * time.Minute
	for b.Loop() {
		lightNodeBytes(b, nodes, length, func(n int) []byte { return profiledLoad(b, benchMode(), n, services, 2, length) })
	}
}
