package replay_test

import (
	"fmt"

	"github.com/proxysim/proxysim/scenarios"
	_ "github.com/proxysim/proxysim/scenarios/ipvsmode" // the IPVS mode, the default
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
