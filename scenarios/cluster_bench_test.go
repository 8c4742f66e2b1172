package scenarios

import (
	"testing"

	"github.com/proxysim/proxysim/scenarios/internal/sample"
)

// BenchmarkLoadGenerated loads a scenario whose cluster is generated:
// 20,000 Services × 10 endpoints (200,000 endpoints, 20,000 slices, 100
// Nodes), generated and checked into the validator's state.
func BenchmarkLoadGenerated(b *testing.B) {
	src := []byte(sample.GeneratedScenario("ipvs", sample.BenchServices()))
	b.ReportAllocs()
	for b.Loop() {
		s, err := Parse("generated.yaml", src, nil)
		if err != nil {
			b.Fatal(err)
		}
		if len(s.Initial) != 2*sample.BenchServices()+100 {
			b.Fatalf("%d objects", len(s.Initial))
		}
	}
}
