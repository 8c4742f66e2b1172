package transcript

import (
	"runtime"
	"strings"
	"time"

	"github.com/proxysim/proxysim/sim"
)

// Charge makes another implementation's syncs last, in a synctest bubble's
// virtual time, what proxysim charged its own for the same run: its
// dataplane fake calls Sync right after each sync's write, and Sync sleeps
// the scenario's cost model (sim.CostModel.RunCost) for the run. Like
// proxysim, it charges only the runner's runs, counted over restarts, and
// not the direct sync a proxy makes once its informers synced; a run's
// size is the proxier's own (Size), read at the write, once the sync has
// applied the pending changes.
type Charge struct {
	model sim.CostModel
	log   *SyncLog
	// runner is the package-qualified receiver of the runner whose
	// goroutine calls the sync ("k8s.io/kubernetes/pkg/proxy/runner.(*BoundedFrequencyRunner)").
	runner string
	runs   int
	// charged is the number of the last sync charged: one charge per sync,
	// however many writes it makes (nftables' stale-chain transaction).
	charged int
	// Size is the proxier's service ports and endpoints, as
	// sim/proxy.Proxier.Size counts them.
	Size func() (servicePorts, endpoints int)
	// Off turns the charge off (to show the comparison fails without it).
	Off bool
}

// NewCharge charges the transcript's cost model to the syncs log sees,
// runs of the runner whose receiver type is runner.
func (t *Transcript) NewCharge(log *SyncLog, runner string) *Charge {
	return &Charge{model: t.Cost, log: log, runner: runner}
}

// Sync sleeps the cost of the sync under way, if it is a runner run not
// charged yet. It must be called on the goroutine of the sync.
func (c *Charge) Sync() {
	if c == nil || c.Off || !c.calledByRunner() {
		return
	}
	n := c.log.count()
	if n == c.charged {
		return
	}
	c.charged = n
	c.runs++
	var work sim.SyncWork
	if c.Size != nil {
		work.ServicePorts, work.Endpoints = c.Size()
	}
	if d := c.model.RunCost(c.runs, 0, work); d > 0 {
		time.Sleep(d)
	}
}

// calledByRunner reports whether the runner's loop is on the stack: the
// sync is one of its runs, not the direct initial one.
func (c *Charge) calledByRunner() bool {
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	for {
		f, more := frames.Next()
		if strings.HasPrefix(f.Function, c.runner+".") {
			return true
		}
		if !more {
			return false
		}
	}
}
