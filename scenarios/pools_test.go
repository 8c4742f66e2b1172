package scenarios

import (
	"strings"
	"testing"
)

// Bad cluster.pools input is refused at load, at the field.
func TestPoolsRefuseBadInput(t *testing.T) {
	cases := []struct{ name, yaml, want string }{
		{"no count", `
name: x
proxy: {version: v1.34.0}
cluster:
  pools: [{name: a}]
timeline:
  - {at: 1s, run: true}
`, "x.yaml:4:11: cluster.pools[0].count: required: how many nodes the pool has"},
		{"zero count", `
name: x
proxy: {version: v1.34.0}
cluster:
  pools: [{name: a, count: 0}]
timeline:
  - {at: 1s, run: true}
`, "x.yaml:4:28: cluster.pools[0].count: want 1 to 100000 nodes in all, got 0"},
		{"a name twice", `
name: x
proxy: {version: v1.34.0}
cluster:
  pools: [{name: a, count: 1}, {name: a, count: 2}]
timeline:
  - {at: 1s, run: true}
`, "x.yaml:4:39: cluster.pools[1].name: pool \"a\" given twice"},
		{"nodeName with pools", `
name: x
proxy: {version: v1.34.0, nodeName: n1}
cluster:
  pools: [{name: a, count: 1}]
timeline:
  - {at: 1s, run: true}
`, "x.yaml:2:37: proxy.nodeName: cluster.pools name the nodes and their zones: leave proxy.nodeName out"},
		{"an unknown pool field", `
name: x
proxy: {version: v1.34.0}
cluster:
  pools: [{name: a, count: 1, size: 3}]
timeline:
  - {at: 1s, run: true}
`, "x.yaml:4:31: cluster.pools[0].size: unknown field \"size\""},
		{"speed range upside down", `
name: x
proxy: {version: v1.34.0}
cluster:
  pools: [{name: a, count: 1, cpuSpeed: {min: 120%, max: 80%}}]
timeline:
  - {at: 1s, run: true}
`, "x.yaml:4:58: cluster.pools[0].cpuSpeed.max: max is below min"},
		{"generated nodes disagree", `
name: x
proxy: {version: v1.34.0}
cluster:
  pools: [{name: a, count: 2}]
  generate: {services: 1, nodes: 3}
timeline:
  - {at: 1s, run: true}
`, "x.yaml:5:34: cluster.generate.nodes: cluster.pools have 2 nodes, not 3 (leave nodes out)"},
		{"a step on an unknown node", `
name: x
proxy: {version: v1.34.0}
cluster:
  pools: [{name: a, count: 2}]
timeline:
  - {at: 1s, node: {name: node-007, restart: true}}
`, "x.yaml:6:27: timeline[0].node.name: no node \"node-007\" in cluster.pools"},
		{"a cluster expectation without pools", `
name: x
proxy: {version: v1.34.0}
timeline:
  - {at: 1s, expect: {cluster: {syncs: {atLeast: 1}}}}
`, "x.yaml:4:32: timeline[0].expect.cluster: a cluster expectation needs cluster.pools"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("x.yaml", []byte(strings.TrimLeft(c.yaml, "\n")), nil)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v\nwant %s", err, c.want)
			}
		})
	}
}
