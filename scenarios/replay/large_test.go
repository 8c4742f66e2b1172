package replay

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/internal/sample"
)

// BenchmarkReplayLargeFirstSync loads the same dump and replays it up to and
// including the first sync on the fake dataplane, reporting the peak heap.
func BenchmarkReplayLargeFirstSync(b *testing.B) {
	file, _ := sample.WriteClusterDump(b, b.TempDir(), 18000, 40)
	var peak uint64
	// As the CLI does.
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(GCLimit(DefaultMaxMemory)))
	for range b.N {
		runtime.GC()
		stop := watchHeap(&peak)
		s, err := scenarios.Load(file)
		if err != nil {
			b.Fatal(err)
		}
		res, err := Replay(s, Options{TraceKeep: 256}) // as the CLI replays
		stop()
		if err != nil {
			b.Fatal(err)
		}
		if !res.Passed() {
			b.Fatal(res.Failures)
		}
	}
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
}

// watchHeap samples the live heap until stopped, keeping the peak.
func watchHeap(peak *uint64) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	go func() {
		defer close(finished)
		for {
			metrics.Read(sample)
			*peak = max(*peak, sample[0].Value.Uint64())
			select {
			case <-done:
				return
			default:
				runtime.Gosched()
			}
		}
	}()
	return func() { close(done); <-finished }
}
