package migrate

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// The dump is decoded once for every node's scenario in both modes; what
// decoding it notes (an object of a kind proxysim does not model, skipped)
// is still reported, once, naming the user's file and line.
func TestDumpWarningsSurviveTheSharedDecode(t *testing.T) {
	c := clusters(t)["nodeport-localhost"]
	src, err := os.ReadFile(c[0])
	if err != nil {
		t.Fatal(err)
	}
	line := strings.Count(string(src), "\n") + 2 // the Deployment's first line
	read := func(path string) ([]byte, error) {
		b, err := os.ReadFile(path)
		if err != nil || path != c[0] {
			return b, err
		}
		return append(b, "---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: default}\n"...), nil
	}
	r, err := Compare(Options{Cluster: c[0], Config: c[1], To: "nftables", ReadFile: read})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range r.Warnings {
		if strings.Contains(w, "Deployment") {
			got = append(got, w)
		}
	}
	if len(got) != 1 || !strings.HasPrefix(got[0], fmt.Sprintf("%s:%d:", c[0], line)) || !strings.Contains(got[0], "skipped Deployment") {
		t.Fatalf("the dump's warnings: %q (all: %q), want one skipped Deployment naming %s at line %d", got, r.Warnings, c[0], line)
	}
}

// The modes trace probes block by block; where the blocks end does not
// change the report.
func TestTraceBlocksLeaveTheReportAlone(t *testing.T) {
	c := clusters(t)["external-traffic-policy-local"]
	report := func() string {
		r, err := Compare(Options{Cluster: c[0], Config: c[1], To: "nftables"})
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		if err := r.Text(&b); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	whole := report()
	defer func(n int) { traceBlock = n }(traceBlock)
	traceBlock = 3
	if small := report(); small != whole || !strings.Contains(whole, "external-traffic-policy-local") {
		t.Fatalf("blocks of 3 probes:\n%s\none block:\n%s", small, whole)
	}
}
