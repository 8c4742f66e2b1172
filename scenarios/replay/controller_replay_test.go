package replay

import (
	"bytes"
	"fmt"
	"runtime"
	"sort"
	"testing"

	"github.com/proxysim/proxysim/scenarios"
)

// Replays with controllers are byte-identical whatever the scheduler does
// with the informers' goroutines: every scenario of the library and the
// features that runs the EndpointSlice or Endpoints controller is replayed
// 100 times (10 with -short), alternating GOMAXPROCS 1 and 2 within its own
// runs, and each trace must equal the scenario's first. CI runs it under
// -race at GOMAXPROCS 1 and 2. A cluster of more than a few nodes (the
// library's ClusterLoader2-shaped one takes seconds a replay) is replayed
// 4 times: TestClusterShardsMergeToOneProcess holds clusters to their
// bytes too.
func TestControllerReplaysAreByteIdentical(t *testing.T) {
	n := 100
	if testing.Short() {
		n = 10
	}
	var files []*scenarios.Scenario
	for _, name := range scenarios.TestedLibraryNames() {
		s, err := scenarios.LoadLibrary(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, es := s.Controllers.On["endpointSlice"]; es || s.Controllers.On["endpoints"] != nil {
			files = append(files, s)
		}
	}
	if s, err := scenarios.Load("../testdata/features/controllers.yaml"); err == nil {
		files = append(files, s)
	} else {
		t.Fatal(err)
	}
	if len(files) < 5 {
		t.Fatalf("only %d scenarios run a controller", len(files))
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Name < files[j].Name })
	trace := func(s *scenarios.Scenario) []byte {
		res, err := Replay(s, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Passed() {
			t.Fatalf("%s failed: %v", s.Name, res.Failures)
		}
		return res.Trace.JSONL()
	}
	want := map[string][]byte{}
	for _, s := range files {
		want[s.Name] = trace(s)
		if !bytes.Contains(want[s.Name], []byte(`"why":"endpointslice-controller"`)) && !bytes.Contains(want[s.Name], []byte(`"why":"endpoint-controller"`)) {
			t.Fatalf("%s: the controller wrote nothing", s.Name)
		}
	}
	prev := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(prev)
	for _, s := range files {
		n := n
		if len(s.Nodes()) > 4 {
			n = min(n, 4)
		}
		for i := 0; i < n; i++ {
			procs := 1 + i%2
			runtime.GOMAXPROCS(procs)
			if got := trace(s); !bytes.Equal(got, want[s.Name]) {
				t.Fatalf("replay %d of %s (GOMAXPROCS %d) differs from its first", i+1, s.Name, procs)
			}
		}
	}
	t.Log(fmt.Sprintf("%d replays of each of %d scenarios (4 of a cluster of more than 4 nodes)", n, len(files)))
}
