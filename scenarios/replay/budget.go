package replay

import (
	"fmt"
	"runtime/metrics"
	"strings"
	"time"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/sim/runner"
	"github.com/proxysim/proxysim/sim/trace"
)

// Default budgets of a replay. The bundled library's largest scenario uses
// well under 1% of the event budget, but for those tagged large
// (scenarios.LargeTag): cl2-load-5000 needs more events, which
// `make cl2-load-5000` allows.
const (
	DefaultMaxEvents = 500_000
	DefaultMaxMemory = 3 << 30 // bytes of heap
)

// GCLimit is the soft memory limit (debug.SetMemoryLimit) a process that
// replays with memory budget maxMemory should set: the collector then works
// to keep the heap at half the budget, so garbage never exhausts it, and
// only live data past that can trip the budget. The CLI sets it; a library
// caller decides for its own process.
func GCLimit(maxMemory int64) int64 {
	if maxMemory <= 0 {
		maxMemory = DefaultMaxMemory
	}
	return maxMemory / 2
}

// memoryCheckEvery is how many clock steps pass between two readings of the
// heap: reading it is cheap, but not free.
const memoryCheckEvery = 1024

// BudgetError ends a replay that needed more events or memory than its
// budget: a scenario that generates work without end (a 1ns syncPeriod
// replayed for hours, a churn of billions of changes) stops here instead of
// hanging or exhausting the machine.
type BudgetError struct {
	Scenario string        // the scenario file
	At       time.Duration // the virtual instant reached
	What     string        // "events" or "memory"
	Used     int64
	Limit    int64
	Cause    string // the likely source of the work
}

func (e *BudgetError) Error() string {
	used := fmt.Sprintf("%d events (budget %d; --max-events)", e.Used, e.Limit)
	if e.What == "memory" {
		used = fmt.Sprintf("%d MiB of heap (budget %d MiB; --max-memory)", e.Used>>20, e.Limit>>20)
	}
	return fmt.Sprintf("%s: replay stopped at %v of virtual time: it used %s; likely cause: %s", e.Scenario, e.At, used, e.Cause)
}

// budget counts a replay's work.
type budget struct {
	maxEvents, maxMemory int64
	steps                int64
	sample               []metrics.Sample
}

func newBudget(opts Options) *budget {
	b := &budget{maxEvents: int64(opts.MaxEvents), maxMemory: opts.MaxMemory}
	if b.maxEvents == 0 {
		b.maxEvents = DefaultMaxEvents
	}
	if b.maxMemory == 0 {
		b.maxMemory = DefaultMaxMemory
	}
	b.sample = []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	return b
}

// step counts one clock step; it returns a non-nil error once the events
// recorded plus the steps taken pass the budget, or the heap does.
func (r *replayer) overBudget() error {
	b := r.budget
	b.steps++
	used := b.steps + int64(r.w.Trace.Len())
	if used > b.maxEvents {
		return r.budgetError("events", used, b.maxEvents)
	}
	if b.steps%memoryCheckEvery == 1 {
		metrics.Read(b.sample)
		if h := int64(b.sample[0].Value.Uint64()); h > b.maxMemory {
			return r.budgetError("memory", h, b.maxMemory)
		}
	}
	return nil
}

func (r *replayer) budgetError(what string, used, limit int64) error {
	return &BudgetError{Scenario: r.s.File, At: r.w.Now(), What: what, Used: used, Limit: limit, Cause: r.likelyCause()}
}

// likelyCause names the step or setting behind most of the latest events.
func (r *replayer) likelyCause() string {
	starts := map[string]int{}
	objects := map[string]int{}
	resyncs := 0
	for _, e := range r.w.Trace.Tail(2000) {
		switch e.Kind {
		case trace.Start:
			starts[e.Why]++
		case trace.Object:
			objects[e.Object]++
		case trace.Resync:
			resyncs++
		}
	}
	p := r.s.Proxy
	top, n := "", 0
	for obj, c := range objects {
		if c > n || c == n && obj < top {
			top, n = obj, c
		}
	}
	switch {
	case resyncs > n && resyncs > starts[string(runner.ReasonPeriodic)]:
		return fmt.Sprintf("proxy.configSyncPeriod %v (line %d): every object is resynced that often", p.ConfigSyncPeriod, p.Src.At("configSyncPeriod").Line)
	case starts[string(runner.ReasonPeriodic)] > 0 && starts[string(runner.ReasonPeriodic)] >= n:
		return fmt.Sprintf("proxy.syncPeriod %v (line %d): a periodic sync that often, over %v of virtual time", RunnerConfig(p).MaxInterval, p.Src.At("syncPeriod").Line, r.w.Now())
	case starts[string(runner.ReasonRetry)] > 0 && starts[string(runner.ReasonRetry)] >= n:
		return fmt.Sprintf("failed syncs retried every %v (proxy.retryInterval, line %d)", RunnerConfig(p).RetryInterval, p.Src.At("retryInterval").Line)
	case n > 0:
		for i, st := range r.s.Timeline {
			for _, a := range st.Actions {
				if cs, ok := a.(*scenarios.ChurnStep); ok && cs.Churn != nil && strings.HasSuffix(top, "/"+cs.Churn.Name) {
					c := cs.Churn
					return fmt.Sprintf("the churn at line %d (timeline[%d]): %d changes of %s every %v", c.Src.Line, i, c.Count, top, c.Every)
				}
			}
		}
		return "changes to " + top
	}
	return fmt.Sprintf("the timeline's length (%v of virtual time)", r.w.Now())
}
