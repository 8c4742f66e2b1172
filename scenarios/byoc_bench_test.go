package scenarios

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proxysim/proxysim/scenarios/internal/sample"
	"go.yaml.in/yaml/v3"
)

// writeDumpAs rewrites writeClusterDump's documents as kubectl prints them
// for `-o yaml` (one v1 List) or `-o json`, and points the scenario at it.
func writeDumpAs(tb testing.TB, dir, format string, services int) (string, int64) {
	tb.Helper()
	scenario, _ := sample.WriteClusterDump(tb, dir, services, 40)
	data, err := os.ReadFile(filepath.Join(dir, "cluster.yaml"))
	if err != nil {
		tb.Fatal(err)
	}
	docs := strings.Split(strings.TrimSuffix(string(data), "---\n"), "---\n")
	var out bytes.Buffer
	name := "cluster-list.yaml"
	switch format {
	case "docs":
		return scenario, int64(len(data))
	case "list":
		out.WriteString("apiVersion: v1\nitems:\n")
		for _, d := range docs {
			for i, l := range strings.Split(strings.TrimRight(d, "\n"), "\n") {
				if i == 0 {
					out.WriteString("- " + l + "\n")
				} else {
					out.WriteString("  " + l + "\n")
				}
			}
		}
		out.WriteString("kind: List\nmetadata:\n  resourceVersion: \"\"\n")
	case "json":
		name = "cluster.json"
		items := make([]any, len(docs))
		for i, d := range docs {
			var v any
			if err := yaml.Unmarshal([]byte(d), &v); err != nil {
				tb.Fatal(err)
			}
			items[i] = v
		}
		b, err := json.MarshalIndent(map[string]any{"apiVersion": "v1", "kind": "List", "items": items, "metadata": map[string]any{"resourceVersion": ""}}, "", "    ")
		if err != nil {
			tb.Fatal(err)
		}
		out.Write(b)
	}
	if err := os.WriteFile(filepath.Join(dir, name), out.Bytes(), 0o644); err != nil {
		tb.Fatal(err)
	}
	src, _ := os.ReadFile(scenario)
	if err := os.WriteFile(scenario, bytes.Replace(src, []byte("cluster.yaml"), []byte(name), 1), 0o644); err != nil {
		tb.Fatal(err)
	}
	return scenario, int64(out.Len())
}

// dumpServices keeps the JSON form (four-space indent) under the 64 MiB a
// file may have.
const dumpServices = 4000

func benchmarkDump(b *testing.B, format string) {
	file, size := writeDumpAs(b, b.TempDir(), format, dumpServices)
	b.SetBytes(size)
	b.ResetTimer()
	for range b.N {
		s, err := Load(file)
		if err != nil {
			b.Fatal(err)
		}
		if len(s.Initial) != 2*dumpServices {
			b.Fatalf("%d objects", len(s.Initial))
		}
	}
	b.ReportMetric(float64(size)/1e6, "MB")
}

// BenchmarkValidateDumpDocs, -List and -JSON load the same 4,000 Services
// with 40 endpoints each as YAML documents, as one kubectl List (`kubectl
// get -o yaml`) and as `kubectl get -o json` prints them.
func BenchmarkValidateDumpDocs(b *testing.B) { benchmarkDump(b, "docs") }
func BenchmarkValidateDumpList(b *testing.B) { benchmarkDump(b, "list") }
func BenchmarkValidateDumpJSON(b *testing.B) { benchmarkDump(b, "json") }

// List and JSON dumps load the same objects as the documents, in order.
func TestLargeDumpShapesLoadAlike(t *testing.T) {
	for _, f := range []string{"list", "json"} {
		dir := t.TempDir()
		file, _ := writeDumpAs(t, dir, f, 600)
		s, err := Load(file)
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Initial) != 1200 || len(s.Warnings) != 0 || s.Initial[1199].Key != "EndpointSlice ns-49/svc-599-x7k2p" {
			t.Fatalf("%s: %d objects, %d warnings, last %s", f, len(s.Initial), len(s.Warnings), s.Initial[len(s.Initial)-1].Key)
		}
	}
}
