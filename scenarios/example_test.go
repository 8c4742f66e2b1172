package scenarios_test

import (
	"fmt"

	"github.com/proxysim/proxysim/scenarios"
	_ "github.com/proxysim/proxysim/scenarios/ipvsmode"     // the IPVS mode, the default
	_ "github.com/proxysim/proxysim/scenarios/nftablesmode" // mode: nftables
	"github.com/proxysim/proxysim/scenarios/replay"
)

// Parse a scenario held in memory (Load reads one from a file) and replay
// it; a failed expectation is in the result, with its file:line.
func ExampleParse() {
	s, err := scenarios.Parse("inline.yaml", []byte(`
name: inline
proxy: {version: v1.33.0, minSyncPeriod: 1s}
objects:
  - {apiVersion: v1, kind: Service, metadata: {name: web, namespace: default}, spec: {clusterIP: 10.96.0.10, ports: [{port: 80}]}}
timeline:
  - at: 1s
    run: true
  - at: 1s
    expect: {syncs: {count: 1}}
`), nil)
	if err != nil {
		panic(err) // invalid input: every problem at its file:line:column (exit 2 in the CLI)
	}
	res, err := replay.Replay(s, replay.Options{})
	if err != nil {
		panic(err)
	}
	for _, f := range res.Failures {
		fmt.Printf("%s:%d: %s: expected %s, got %s\n", f.File, f.Pos.Line, f.Pos.Path, f.Expected, f.Got)
	}
	// Output:
	// inline.yaml:10: timeline[1].expect.syncs.count: expected 1, got 2 ([0s 1s])
}
