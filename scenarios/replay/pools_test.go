package replay

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/proxysim/proxysim/scenarios"
)

// The nodes' variation is drawn from the seed: the same scenario gives the
// same nodes and the same replay, byte for byte; another seed other nodes.
func TestClusterReplayIsDeterministic(t *testing.T) {
	src := equivalenceScenario("iptables", "false")
	run := func(src string) (*scenarios.Scenario, string, *ClusterResult) {
		s, err := scenarios.Parse("equivalence.yaml", []byte(src), nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := Replay(s, Options{KeepNodes: true})
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		res.Wall = 0
		Report(&b, res, false)
		return s, b.String(), res.Cluster
	}
	s1, out1, c1 := run(src)
	_, out2, c2 := run(src)
	if out1 != out2 || fmt.Sprintf("%+v", *c1) != fmt.Sprintf("%+v", *c2) {
		t.Fatalf("two replays differ:\n%s\n%s", out1, out2)
	}
	for _, want := range []string{"cluster: 3 nodes", "SLI (as ClusterLoader2): perc50", "true pod latency:", "node node-002 (b):"} {
		if !strings.Contains(out1, want) {
			t.Errorf("the report lacks %q:\n%s", want, out1)
		}
	}
	s3, _, c3 := run(strings.Replace(src, "seed: 7", "seed: 8", 1))
	if s1.Nodes()[1].Proxy.SyncCost.Speed == s3.Nodes()[1].Proxy.SyncCost.Speed || reflect.DeepEqual(c1.Nodes[1].Runs, c3.Nodes[1].Runs) {
		t.Fatal("another seed drew the same node")
	}
	if sp := s1.Nodes()[1].Proxy.SyncCost.Speed; sp < 0.5 || sp > 1.5 {
		t.Fatalf("node-001's speed %v outside its pool's range", sp)
	}
}
