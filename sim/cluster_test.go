package sim

import (
	"testing"
	"time"

	"github.com/proxysim/proxysim/sim/runner"
)

// A node with a watch delay hears every write that much later, so each of
// its syncs starts that much later than the world's own proxy's; one
// without syncs with it. Restarting a node lists at once and syncs; a
// node's failed syncs are its own.
func TestNodesHearTheWorldsEvents(t *testing.T) {
	cost := CostModel{Fixed: 100 * time.Millisecond}
	w := New(t, Config{Runner: runner.Config{MinInterval: time.Second, MaxInterval: time.Hour}, Cost: cost})
	spec := NodeSpec{Runner: runner.Config{MinInterval: time.Second, MaxInterval: time.Hour, RetryInterval: 2 * time.Second}, Cost: cost, Keep: true}
	spec.Name = "b"
	b, err := w.AddNode(spec)
	if err != nil {
		t.Fatal(err)
	}
	spec.Name, spec.WatchDelay = "c", 300*time.Millisecond
	c, err := w.AddNode(spec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.AddNode(spec); err == nil {
		t.Fatal("a node added twice")
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.AddNode(NodeSpec{Name: "d"}); err == nil {
		t.Fatal("a node added after Start")
	}
	w.At(5*time.Second, func() { w.keep(w.Create(testService("default", "web", "10.96.0.10"))) })
	w.At(10*time.Second, func() { b.FailSyncs(1) })
	w.At(11*time.Second, func() { w.keep(w.Delete("Service", "default", "web")) })
	w.At(20*time.Second, func() { w.keep(c.Restart()) })
	w.RunUntil(30 * time.Second)
	if w.Err() != nil {
		t.Fatal(w.Err())
	}
	starts := func(rs []SyncRecord) (out []time.Duration) {
		for _, r := range rs {
			out = append(out, r.Start)
		}
		return out
	}
	a := starts(w.Syncs())
	want := []time.Duration{0, 5 * time.Second, 11 * time.Second}
	if !equalDurations(a, want) {
		t.Fatalf("world's syncs start at %v, want %v", a, want)
	}
	bs := b.Syncs()
	// b's run at 11s fails; the cooldown runner retries it after its
	// retry interval, counted from the failed run's end.
	if got := starts(bs); !equalDurations(got, []time.Duration{0, 5 * time.Second, 11 * time.Second, 13100 * time.Millisecond}) || bs[2].Err == "" || bs[3].Err != "" {
		t.Fatalf("b's syncs %+v", bs)
	}
	if got := starts(c.Syncs()); !equalDurations(got, []time.Duration{0, 5300 * time.Millisecond, 11300 * time.Millisecond, 20 * time.Second}) {
		t.Fatalf("c's syncs start at %v", got)
	}
	if c.Syncs()[3].Why != "initial" || len(c.Restarts()) != 1 || c.Stats().Syncs != 4 || b.Stats().FailedSyncs != 1 {
		t.Fatalf("c %+v %v, b %+v", c.Syncs(), c.Restarts(), b.Stats())
	}
	if c.Syncs()[1].Work.ServicePorts != 1 || c.Syncs()[2].Work.ServicePorts != 0 {
		t.Fatalf("c's syncs' sizes: %+v", c.Syncs())
	}
}

func equalDurations(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
