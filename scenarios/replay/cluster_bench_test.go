package replay

import (
	"testing"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/internal/sample"
)

// BenchmarkReplayGenerated replays that scenario in each mode on the fake
// dataplane, from load to the last step: the world loaded, the initial full
// sync of 20,000 Services, and two partial syncs. PROXYSIM_BENCH_SERVICES
// sets another size.
func BenchmarkReplayGenerated(b *testing.B) {
	for _, mode := range []string{"ipvs", "iptables", "nftables"} {
		b.Run(mode, func(b *testing.B) {
			src := []byte(sample.GeneratedScenario(mode, sample.BenchServices()))
			b.ReportAllocs()
			for b.Loop() {
				s, err := scenarios.Parse("generated.yaml", src, nil)
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
