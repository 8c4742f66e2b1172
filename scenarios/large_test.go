package scenarios

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"testing"
)

// writeClusterDump writes a scenario whose objects come from a cluster dump
// of services Services, each with an EndpointSlice of perService endpoints,
// in the layout `kubectl get -o yaml` prints, and returns the scenario's
// path and the dump's size.
func writeClusterDump(tb testing.TB, dir string, services, perService int) (string, int64) {
	tb.Helper()
	var b strings.Builder
	for i := range services {
		ns := fmt.Sprintf("ns-%d", i%50)
		fmt.Fprintf(&b, "apiVersion: v1\nkind: Service\nmetadata:\n  name: svc-%d\n  namespace: %s\n  labels:\n    app: svc-%d\nspec:\n  type: ClusterIP\n  clusterIP: 10.%d.%d.%d\n  ports:\n  - name: http\n    port: 80\n    protocol: TCP\n    targetPort: 8080\n---\n",
			i, ns, i, 96+i/65536, (i/256)%256, i%256)
		fmt.Fprintf(&b, "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: svc-%d-x7k2p\n  namespace: %s\n  labels:\n    kubernetes.io/service-name: svc-%d\naddressType: IPv4\nports:\n- name: http\n  port: 8080\n  protocol: TCP\nendpoints:\n", i, ns, i)
		for j := range perService {
			n := i*perService + j
			fmt.Fprintf(&b, "- addresses:\n  - 10.%d.%d.%d\n  conditions:\n    ready: true\n  nodeName: node-%d\n", 128+n/65536, (n/256)%256, n%256, j%20)
		}
		b.WriteString("---\n")
	}
	if err := os.WriteFile(filepath.Join(dir, "cluster.yaml"), []byte(b.String()), 0o644); err != nil {
		tb.Fatal(err)
	}
	scenario := filepath.Join(dir, "large.yaml")
	src := "name: large\nproxy: {version: v1.34.0}\nobjects:\n  - file: cluster.yaml\ntimeline:\n  - at: 1s\n    expect: {syncs: {count: 1}}\n"
	if err := os.WriteFile(scenario, []byte(src), 0o644); err != nil {
		tb.Fatal(err)
	}
	return scenario, int64(b.Len())
}

// BenchmarkValidateLarge loads and validates a ~50 MB cluster dump: 18,000
// Services with 40 endpoints each.
func BenchmarkValidateLarge(b *testing.B) {
	file, size := writeClusterDump(b, b.TempDir(), 18000, 40)
	b.SetBytes(size)
	b.ResetTimer()
	for range b.N {
		s, err := Load(file)
		if err != nil {
			b.Fatal(err)
		}
		if len(s.Initial) != 36000 {
			b.Fatalf("%d objects", len(s.Initial))
		}
	}
	b.ReportMetric(float64(size)/1e6, "MB")
}

// BenchmarkValidateLargeInline validates such objects written inline in the
// scenario (its objects list), as a scenario attached to a bug report holds
// them: 12,000 Services with 40 endpoints each, ~55 MB once indented (the
// 18,000 of the dump would pass the 64 MiB a scenario file may have).
func BenchmarkValidateLargeInline(b *testing.B) {
	dir := b.TempDir()
	writeClusterDump(b, dir, 12000, 40)
	dump, err := os.ReadFile(filepath.Join(dir, "cluster.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	var sb strings.Builder
	sb.WriteString("name: large-inline\nproxy: {version: v1.34.0}\nobjects:\n")
	for _, doc := range strings.Split(string(dump), "---\n") {
		for i, l := range strings.Split(strings.TrimRight(doc, "\n"), "\n") {
			switch {
			case l == "":
			case i == 0:
				sb.WriteString("  - " + l + "\n")
			default:
				sb.WriteString("    " + l + "\n")
			}
		}
	}
	sb.WriteString("timeline:\n  - at: 1s\n    expect: {syncs: {count: 1}}\n")
	file := filepath.Join(dir, "inline.yaml")
	if err := os.WriteFile(file, []byte(sb.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(sb.Len()))
	b.ResetTimer()
	for range b.N {
		s, err := Load(file)
		if err != nil {
			b.Fatal(err)
		}
		if len(s.Initial) != 24000 {
			b.Fatalf("%d objects", len(s.Initial))
		}
	}
	b.ReportMetric(float64(sb.Len())/1e6, "MB")
}

// BenchmarkReplayLargeFirstSync loads the same dump and replays it up to and
// including the first sync on the fake dataplane, reporting the peak heap.
func BenchmarkReplayLargeFirstSync(b *testing.B) {
	file, _ := writeClusterDump(b, b.TempDir(), 18000, 40)
	var peak uint64
	// As the CLI does.
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(GCLimit(DefaultMaxMemory)))
	for range b.N {
		runtime.GC()
		stop := watchHeap(&peak)
		s, err := Load(file)
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
