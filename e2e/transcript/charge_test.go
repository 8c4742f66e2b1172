package transcript

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/proxysim/proxysim/sim"
)

// fakeRunner stands for kube-proxy's runner: a sync it calls is one of
// its runs.
type fakeRunner struct{}

func (*fakeRunner) run(f func()) { f() }

// A Charge sleeps a runner run's cost once per sync, in virtual time, with
// the run's size; the direct sync (not under the runner) costs nothing.
func TestChargeSleepsRunnerRunsOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := NewSyncLog(time.Now(), func() string { return "" })
		tr := &Transcript{Cost: sim.CostModel{Fixed: 200 * time.Millisecond, PerEndpoint: 50 * time.Millisecond}}
		c := tr.NewCharge(log, "github.com/proxysim/proxysim/e2e/transcript.(*fakeRunner)")
		c.Size = func() (int, int) { return 1, 3 }
		sync := func() time.Duration {
			start := time.Now()
			log.info("Syncing iptables rules", nil)
			c.Sync()
			c.Sync() // a second write of the same sync
			return time.Since(start)
		}
		if d := sync(); d != 0 {
			t.Errorf("the direct sync took %v, want 0", d)
		}
		var d time.Duration
		(&fakeRunner{}).run(func() { d = sync() })
		if want := 350 * time.Millisecond; d != want {
			t.Errorf("a runner run took %v, want %v (200ms + 3 × 50ms, once)", d, want)
		}
		c.Off = true
		(&fakeRunner{}).run(func() { d = sync() })
		if d != 0 {
			t.Errorf("with the charge off a run took %v, want 0", d)
		}
	})
}
