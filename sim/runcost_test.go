package sim_test

import (
	"testing"
	"time"

	"github.com/proxysim/proxysim/sim"
)

// RunCost is what the world charges each runner run and what a replay of
// another implementation (e2e/transcript's Charge) charges it: a Runs list
// indexed from the run the model was set at, the last entry repeating;
// otherwise the linear model for the run's size; then the node's speed.
func TestRunCost(t *testing.T) {
	ms := time.Millisecond
	listed := sim.CostModel{Runs: []time.Duration{50 * ms, 4 * time.Second}, Fixed: time.Hour}
	for _, c := range []struct {
		n, since int
		want     time.Duration
	}{
		{1, 0, 50 * ms}, {2, 0, 4 * time.Second}, {5, 0, 4 * time.Second},
		{3, 2, 50 * ms}, {4, 2, 4 * time.Second},
	} {
		if got := listed.RunCost(c.n, c.since, sim.SyncWork{}); got != c.want {
			t.Errorf("Runs list, run %d since %d: %v, want %v", c.n, c.since, got, c.want)
		}
	}
	linear := sim.CostModel{Fixed: 200 * ms, PerService: 100 * ms, PerEndpoint: 50 * ms, Speed: 0.5}
	if got, want := linear.RunCost(7, 0, sim.SyncWork{ServicePorts: 1, Endpoints: 3}), 900*ms; got != want {
		t.Errorf("linear model at half speed: %v, want %v (450ms / 0.5)", got, want)
	}
	jittered := sim.CostModel{Fixed: 100 * ms, Jitter: 200 * ms, JitterSeed: 3}
	a, b := jittered.RunCost(1, 0, sim.SyncWork{}), jittered.RunCost(1, 0, sim.SyncWork{})
	if a != b || a < 100*ms || a >= 300*ms {
		t.Errorf("jitter of run 1: %v and %v, want one value in [100ms, 300ms)", a, b)
	}
}
