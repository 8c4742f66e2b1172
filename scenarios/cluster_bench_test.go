package scenarios

import (
	"fmt"
	"os"
	"strconv"
	"testing"
)

// generatedScenario is a small story at a generated cluster of services
// Services × 10 endpoints on 100 nodes: one Service changes, then one
// endpoint.
func generatedScenario(mode string, services int) string {
	return fmt.Sprintf(`name: generated-%s-%d
proxy: {version: v1.34.0, mode: %s, nodeName: node-000, minSyncPeriod: 1s}
cluster:
  generate:
    seed: 1
    services: %d
    endpointsPerService: 10
    nodes: 100
    types: {ClusterIP: 90%%, NodePort: 5%%, LoadBalancer: 5%%}
timeline:
  - at: 1s
    patch: {kind: Service, namespace: gen, name: svc-00042, merge: {spec: {sessionAffinity: ClientIP}}}
  - at: 3s
    patch: {kind: EndpointSlice, namespace: gen, name: svc-00007-0, endpoint: 10.128.0.71, conditions: {ready: false, serving: false}}
  - at: 5s
    expect: {syncs: {count: 3}}
`, mode, services, mode, services)
}

// benchServices is the size of the generated benchmarks' cluster:
// PROXYSIM_BENCH_SERVICES, or 20,000.
func benchServices() int {
	if n, err := strconv.Atoi(os.Getenv("PROXYSIM_BENCH_SERVICES")); err == nil && n > 0 {
		return n
	}
	return 20000
}

// BenchmarkLoadGenerated loads a scenario whose cluster is generated:
// 20,000 Services × 10 endpoints (200,000 endpoints, 20,000 slices, 100
// Nodes), generated and checked into the validator's state.
func BenchmarkLoadGenerated(b *testing.B) {
	src := []byte(generatedScenario("ipvs", benchServices()))
	b.ReportAllocs()
	for b.Loop() {
		s, err := Parse("generated.yaml", src, nil)
		if err != nil {
			b.Fatal(err)
		}
		if len(s.Initial) != 2*benchServices()+100 {
			b.Fatalf("%d objects", len(s.Initial))
		}
	}
}

// BenchmarkReplayGenerated replays that scenario in each mode on the fake
// dataplane, from load to the last step: the world loaded, the initial full
// sync of 20,000 Services, and two partial syncs. PROXYSIM_BENCH_SERVICES
// sets another size.
func BenchmarkReplayGenerated(b *testing.B) {
	for _, mode := range []string{"ipvs", "iptables", "nftables"} {
		b.Run(mode, func(b *testing.B) {
			src := []byte(generatedScenario(mode, benchServices()))
			b.ReportAllocs()
			for b.Loop() {
				s, err := Parse("generated.yaml", src, nil)
				if err != nil {
					b.Fatal(err)
				}
				res, err := Replay(s, Options{TraceKeep: 256})
				if err != nil {
					b.Fatal(err)
				}
				if !res.Passed() {
					b.Fatal(res.Failures)
				}
			}
		})
	}
}
