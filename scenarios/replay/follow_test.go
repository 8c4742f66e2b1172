package replay

import (
	"testing"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/sim/trace"
)

// Follow sees every event the trace records, in order, the proxy's start
// included, with the replay's dataplane; a kept tail does not shorten it.
func TestFollowSeesEveryEventWithTheDataplane(t *testing.T) {
	s, err := scenarios.LoadLibrary("cooldown-v1.34")
	if err != nil {
		t.Fatal(err)
	}
	full, err := Replay(s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var seen []trace.Event
	var snaps int
	res, err := Replay(s, Options{TraceKeep: 4, Follow: func(e trace.Event, dp scenarios.Dataplane) {
		seen = append(seen, e)
		if e.Kind == trace.End {
			if _, err := dp.Snapshot(); err != nil {
				t.Errorf("snapshot after run %d: %v", e.Run, err)
			}
			snaps++
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := full.Trace.Events()
	if len(seen) != len(want) || res.Trace.Len() != len(want) {
		t.Fatalf("followed %d events, the trace has %d (kept run: %d)", len(seen), len(want), res.Trace.Len())
	}
	for i := range want {
		if trace.Line(seen[i]) != trace.Line(want[i]) {
			t.Fatalf("event %d: followed %q, trace %q", i, trace.Line(seen[i]), trace.Line(want[i]))
		}
	}
	if snaps != len(res.Runs) {
		t.Fatalf("%d snapshots at run ends, %d runs", snaps, len(res.Runs))
	}
}
