package scenarios

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// A large scenario's inline objects are cut out and read like a manifest
// file's documents: the objects and every problem, with its line, column and
// path, must be what the general path gives.
func TestInlineObjectsCutOutMatchTheGeneralPath(t *testing.T) {
	var b strings.Builder
	b.WriteString("name: inline\nproxy: {version: v1.34.0}\nobjects:\n")
	for i := range 40 {
		fmt.Fprintf(&b, "  - apiVersion: v1\n    kind: Service\n    metadata:\n      name: svc-%d\n    spec:\n      clusterIP: 10.96.0.%d\n      ports:\n      - {name: http, port: 80}\n", i, i+1)
		// A comment and a blank line inside the list.
		b.WriteString("  # the slice\n\n")
		fmt.Fprintf(&b, "  - apiVersion: discovery.k8s.io/v1\n    kind: EndpointSlice\n    metadata:\n      name: svc-%d-a\n      labels: {kubernetes.io/service-name: svc-%d}\n    addressType: IPv4\n    endpoints:\n    - addresses: [\"10.244.0.%d\"]\n", i, i, i+1)
	}
	// Problems: an unknown field, an address of the wrong family, a
	// duplicate, a manifest the fast reader refuses (a block scalar).
	b.WriteString("  - apiVersion: v1\n    kind: Service\n    metadata: {name: bad}\n    spec:\n      clusterIP: 10.96.1.1\n      ports: [{port: 80}]\n      sessionAfinity: ClientIP\n")
	b.WriteString("  - apiVersion: discovery.k8s.io/v1\n    kind: EndpointSlice\n    metadata:\n      name: v6\n      labels: {kubernetes.io/service-name: bad}\n    addressType: IPv4\n    endpoints:\n    - addresses: [\"fd00::1\"]\n")
	b.WriteString("  - apiVersion: v1\n    kind: Service\n    metadata:\n      name: svc-3\n    spec:\n      clusterIP: 10.96.2.1\n      ports: [{port: 80}]\n")
	b.WriteString("  - apiVersion: v1\n    kind: Service\n    metadata:\n      name: block\n      annotations:\n        note: |\n          two\n          lines\n    spec:\n      clusterIP: 10.96.3.1\n      ports: [{port: 80}]\n")
	b.WriteString("timeline:\n  - at: 1s\n    note: x\n")
	file := filepath.Join(t.TempDir(), "inline.yaml")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, in, ok := cutInlineObjects([]byte(b.String())); !ok || len(in.docs) != 84 || in.column != 5 {
		t.Fatalf("cut out %d objects at column %d (%v); want 84 at 5", len(in.docs), in.column, ok)
	}
	load := func(min int) ([]Object, string) {
		saved := inlineFastMin
		inlineFastMin = min
		defer func() { inlineFastMin = saved }()
		s, err := Load(file)
		if err != nil {
			return nil, err.Error()
		}
		return s.Initial, ""
	}
	generalObjs, general := load(1 << 30)
	cutObjs, cut := load(0)
	if general == "" || !strings.Contains(general, "sessionAfinity") || !strings.Contains(general, "fd00::1") || !strings.Contains(general, "defined twice") {
		t.Fatalf("the general path missed a planted problem:\n%s", general)
	}
	if cut != general {
		t.Fatalf("problems differ\ncut out:\n%s\ngeneral:\n%s", cut, general)
	}
	// Without the problems, the objects must be the same too.
	good := b.String()[:strings.Index(b.String(), "  - apiVersion: v1\n    kind: Service\n    metadata: {name: bad}")] + "timeline:\n  - at: 1s\n    note: x\n"
	if err := os.WriteFile(file, []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}
	generalObjs, general = load(1 << 30)
	cutObjs, cut = load(0)
	if general != "" || cut != "" || len(cutObjs) != 80 || !reflect.DeepEqual(cutObjs, generalObjs) {
		t.Fatalf("objects differ: %d cut out, %d general (%s%s)", len(cutObjs), len(generalObjs), cut, general)
	}
}

// FuzzInlineCut holds the cut-out path to the general one on any input:
// the same problems, or the same objects.
func FuzzInlineCut(f *testing.F) {
	for _, pattern := range []string{"testdata/invalid/*.yaml", "testdata/hostile/*.yaml", "testdata/features/*.yaml", "library/*.yaml"} {
		files, _ := filepath.Glob(pattern)
		for _, p := range files {
			// A large scenario is minutes of work per input (LargeTag).
			if strings.HasPrefix(p, "library/") && IsLarge(strings.TrimSuffix(strings.TrimPrefix(p, "library/"), ".yaml")) {
				continue
			}
			if b, err := os.ReadFile(p); err == nil {
				f.Add(b)
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		parse := func(min int) (*Scenario, error) {
			saved := inlineFastMin
			inlineFastMin = min
			defer func() { inlineFastMin = saved }()
			return Parse("fuzz.yaml", append([]byte(nil), data...), nil)
		}
		general, gerr := parse(1 << 30)
		cut, cerr := parse(0)
		switch {
		case (gerr == nil) != (cerr == nil):
			t.Fatalf("general: %v\ncut out: %v", gerr, cerr)
		case gerr != nil:
			if gerr.Error() != cerr.Error() {
				t.Fatalf("problems differ\ngeneral:\n%v\ncut out:\n%v", gerr, cerr)
			}
		case !reflect.DeepEqual(general.Initial, cut.Initial):
			t.Fatalf("objects differ: %d general, %d cut out", len(general.Initial), len(cut.Initial))
		}
	})
}
