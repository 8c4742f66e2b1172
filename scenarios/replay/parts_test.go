package replay_test

import (
	"testing"

	"github.com/proxysim/proxysim/scenarios"
	_ "github.com/proxysim/proxysim/scenarios/iptablesmode"
	_ "github.com/proxysim/proxysim/scenarios/ipvsmode"
	_ "github.com/proxysim/proxysim/scenarios/nftablesmode"
	"github.com/proxysim/proxysim/scenarios/replay"
)

// Every part a mode registers with the format replays itself: the format
// takes any Validate, so only this holds a mode to its Do and Check.
func TestEveryModePartReplays(t *testing.T) {
	names := scenarios.ModeNames()
	if len(names) < 3 {
		t.Fatalf("modes %v, want the three bundled ones", names)
	}
	for _, name := range names {
		m, _ := scenarios.LookupMode(name)
		for _, a := range append(m.Actions(), m.Faults()...) {
			if _, ok := a().(replay.Action); !ok {
				t.Errorf("mode %s: %T is no replay.Action", name, a())
			}
		}
		for _, e := range m.Expectations() {
			if _, ok := e().(replay.Expectation); !ok {
				t.Errorf("mode %s: %T is no replay.Expectation", name, e())
			}
		}
	}
}
