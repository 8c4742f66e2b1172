package scenarios_test

import (
	"fmt"

	"github.com/proxysim/proxysim/scenarios"
	_ "github.com/proxysim/proxysim/scenarios/ipvsmode"     // the IPVS mode, the default
	_ "github.com/proxysim/proxysim/scenarios/nftablesmode" // mode: nftables
	"github.com/proxysim/proxysim/scenarios/replay"
)

// Replay a bundled scenario and read what happened: what the CLI's replay
// does, without the printing.
func ExampleReplay() {
	s, err := scenarios.LoadLibrary("cooldown-v1.34")
	if err != nil {
		panic(err)
	}
	res, err := replay.Replay(s, replay.Options{})
	if err != nil {
		panic(err) // the replay could not run (exit 3 in the CLI)
	}
	fmt.Println("passed:", res.Passed())
	for _, r := range res.Runs {
		fmt.Printf("sync %d at %v (%s)\n", r.N, r.Start, r.Why)
	}
	// Output:
	// passed: true
	// sync 1 at 0s (initial)
	// sync 2 at 1s (request)
	// sync 3 at 2s (request)
	// sync 4 at 32s (periodic)
}

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
