package replay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/proxysim/proxysim/scenarios"
)

// shardScenario is a 7-node cluster in two pools (one materialised), with
// readiness flips, a restart and failed syncs on nodes of different
// shards, and cluster expectations mid-run and at the end: some hold, some
// do not, between expectations on the world's own node that do not hold
// either (their order in the report is the replay's).
func shardScenario() string {
	var b strings.Builder
	b.WriteString(`name: cluster-shard
proxy:
  mode: iptables
  version: v1.36.0
  minSyncPeriod: 1s
  syncPeriod: 30s
  syncCost: {fixed: 200ms, perEndpoint: 2ms}
controllers:
  endpointSlice: {batchPeriod: 500ms}
cluster:
  seed: 5
  pools:
    - {name: a, count: 5, zone: zone-a, cpuSpeed: {min: 50%, max: 150%}, syncJitter: 300ms, watchDelay: {min: 0s, max: 400ms}}
    - {name: b, count: 2, zone: zone-b, proxy: {minSyncPeriod: 3s}, syncJitter: 100ms, materialize: true}
  generate:
    seed: 9
    services: 30
    endpointsPerService: {3: 60%, 6: 40%}
    types: {ClusterIP: 70%, NodePort: 30%}
    externalTrafficPolicy: {Cluster: 50%, Local: 50%}
    pods: true
timeline:
`)
	for i := range 40 {
		at := 1500 + i*6700
		fmt.Fprintf(&b, "  - {at: %dms, podReady: {namespace: gen, name: svc-%05d-%d, ready: %v}}\n", at, (i*7)%30, i%3, i%4 >= 2)
		switch i {
		case 10:
			fmt.Fprintf(&b, "  - {at: %dms, node: {name: node-004, restart: true}}\n", at)
		case 15:
			fmt.Fprintf(&b, "  - {at: %dms, node: {name: node-005, failSyncs: 2}}\n", at)
		case 18:
			fmt.Fprintf(&b, `  - at: %dms
    expect:
      syncs: {count: 1}
      cluster:
        programmingLatency: {p50: {max: 100s}, p99: {max: 1ms}}
        podLatency: {p90: {max: 100s}}
        syncs: {atMost: 5}
      dataplaneOps: {count: 1}
`, at)
		}
	}
	b.WriteString(`  - at: 5m
    expect:
      cluster:
        programmingLatency: {p99: {max: 100s}}
        exactLatency: {p50: {min: 10s}}
        podLatency: {p99: {max: 1ms}}
        syncs: {atLeast: 2}
`)
	return b.String()
}

func reportText(c *ClusterReport) string {
	var b bytes.Buffer
	c.Text(&b)
	return b.String()
}

// replayShards replays every shard of n, each through its JSON file.
func replayShards(t *testing.T, s *scenarios.Scenario, n int) ([]string, []*ShardResult) {
	t.Helper()
	var names []string
	var shards []*ShardResult
	for i := range n {
		res, err := Replay(s, Options{Shard: Shard{Index: i, Count: n}})
		if err != nil {
			t.Fatal(err)
		}
		if res.Cluster != nil || res.Shard == nil {
			t.Fatalf("shard %d/%d: a cluster result %v, shard %v", i, n, res.Cluster != nil, res.Shard != nil)
		}
		name := fmt.Sprintf("shard-%d.json", i)
		back, err := ReadShard(name, res.Shard.JSON())
		if err != nil {
			t.Fatal(err)
		}
		names, shards = append(names, name), append(shards, back)
	}
	return names, shards
}

// DETERMINISM: any shard count, merged, gives the bytes of one process.
func TestClusterShardsMergeToOneProcess(t *testing.T) {
	s, err := scenarios.Parse("shard.yaml", []byte(shardScenario()), nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Replay(s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := reportText(ClusterReportOf(res))
	t.Logf("one process:\n%s", want)
	// The scenario is made to exercise what merging joins: several
	// failures of both kinds, in order, and figures that are not empty.
	for _, w := range []string{"cluster.programmingLatency.p99", "cluster.syncs", "syncs.count", "dataplaneOps.count",
		"cluster.podLatency.p99", "cluster.exactLatency.p50", "node node-005", "1 restarts"} {
		if !strings.Contains(want, w) {
			t.Fatalf("the unsharded report lacks %q", w)
		}
	}
	if res.Cluster.SLI.Samples < 100 || res.Cluster.PodChanges < 100 {
		t.Fatalf("too little to merge: %d samples, %d pod changes", res.Cluster.SLI.Samples, res.Cluster.PodChanges)
	}
	for _, n := range []int{1, 2, 3} {
		names, shards := replayShards(t, s, n)
		// Merge in reverse: the order of the files does not matter.
		for i, j := 0, len(shards)-1; i < j; i, j = i+1, j-1 {
			names[i], names[j] = names[j], names[i]
			shards[i], shards[j] = shards[j], shards[i]
		}
		rep, err := MergeShards(names, shards)
		if err != nil {
			t.Fatalf("%d shards: %v", n, err)
		}
		if got := reportText(rep); got != want {
			t.Errorf("%d shards merged differ from one process:\n%s", n, strings.Join(LineDiff(want, got), "\n"))
		}
		for i, nr := range rep.Cluster.Nodes {
			if one := res.Cluster.Nodes[i]; nr.NodeStats != one.NodeStats || nr.Dataplane != one.Dataplane || fmt.Sprint(nr.Restarts) != fmt.Sprint(one.Restarts) {
				t.Errorf("%d shards: node %s: %+v, one process %+v", n, nr.Name, nr.NodeStats, one.NodeStats)
			}
		}
	}
}

// Merging refuses shard sets that are not one replay's, and a merge that
// loses a shard's part is seen.
func TestClusterMergeRefuses(t *testing.T) {
	s, err := scenarios.Parse("shard.yaml", []byte(shardScenario()), nil)
	if err != nil {
		t.Fatal(err)
	}
	names, shards := replayShards(t, s, 3)
	good, err := MergeShards(names, shards)
	if err != nil {
		t.Fatal(err)
	}
	clone := func(r *ShardResult) *ShardResult {
		var c ShardResult
		if err := json.Unmarshal(r.JSON(), &c); err != nil {
			t.Fatal(err)
		}
		return &c
	}
	other := clone(shards[1])
	other.Digest = strings.Repeat("0", 64)
	fewer := clone(shards[2])
	fewer.Shards = 2
	odd := clone(shards[1])
	odd.Failures = odd.Failures[1:]
	for _, c := range []struct {
		name   string
		shards []*ShardResult
		want   string
	}{
		{"missing", shards[:2], "shard 2/3 is missing"},
		{"duplicate", []*ShardResult{shards[0], shards[1], shards[1]}, "shard 1/3 is also in shard-1.json"},
		{"digest", []*ShardResult{shards[0], other, shards[2]}, "from a different source"},
		{"count", []*ShardResult{shards[0], shards[1], fewer}, "one of 3 shards"},
		{"own node", []*ShardResult{shards[0], odd, shards[2]}, "the world's own node ran otherwise"},
		{"none", nil, "no shard files"},
	} {
		_, err := MergeShards(names, c.shards)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
	}
	// A shard that lost its nodes' part of the SLI merges into other
	// figures: the merge reads the parts.
	lost := clone(shards[1])
	lost.Final.SLI.Sums = nil
	lost.Final.SLI.Truth.Keys = nil
	rep, err := MergeShards(names, []*ShardResult{shards[0], lost, shards[2]})
	if err != nil {
		t.Fatal(err)
	}
	if reportText(rep) == reportText(good) {
		t.Error("a shard's SLI part emptied: the merged report did not change")
	}
	for _, bad := range []string{`{"format": 1}`, `{"format": 9, "shard": 0, "shards": 1, "nodes": ["a"]}`, `{"format": 1, "shard": 3, "shards": 2, "nodes": ["a"]}`, `{"format": 1, "extra": 1}`} {
		if _, err := ReadShard("bad.json", []byte(bad)); err == nil || !strings.HasPrefix(err.Error(), "bad.json: ") {
			t.Errorf("%s: error %v", bad, err)
		}
	}
}

// A shard needs a cluster, and a cluster expectation it can leave to the
// merge.
func TestClusterShardRefuses(t *testing.T) {
	s, err := scenarios.Parse("shard.yaml", []byte(shardScenario()), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Replay(s, Options{Shard: Shard{Index: 2, Count: 2}}); err == nil {
		t.Error("shard 2/2: no error")
	}
	within := strings.Replace(shardScenario(), "  - at: 5m\n    expect:\n", "  - at: 5m\n    expect:\n      within: 10s\n", 1)
	s, err = scenarios.Parse("within.yaml", []byte(within), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Replay(s, Options{Shard: Shard{Index: 0, Count: 2}}); err == nil || !strings.Contains(err.Error(), "within.yaml:") || !strings.Contains(err.Error(), "cannot be sharded") {
		t.Errorf("a cluster expectation with within: %v", err)
	}
	one, err := scenarios.Parse("one.yaml", []byte("name: one\nproxy: {mode: iptables, version: v1.36.0}\ntimeline:\n  - {at: 1s, note: x}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Replay(one, Options{Shard: Shard{Index: 0, Count: 2}}); err == nil || !strings.Contains(err.Error(), "not a cluster") {
		t.Errorf("a single node sharded: %v", err)
	}
}
