package scenarios

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proxysim/proxysim/scenarios/internal/sample"
)

// BenchmarkValidateLarge loads and validates a ~50 MB cluster dump: 18,000
// Services with 40 endpoints each.
func BenchmarkValidateLarge(b *testing.B) {
	file, size := sample.WriteClusterDump(b, b.TempDir(), 18000, 40)
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
	sample.WriteClusterDump(b, dir, 12000, 40)
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
