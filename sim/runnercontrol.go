package sim

import (
	"errors"
	"fmt"
	"time"

	"github.com/proxysim/proxysim/sim/runner"
	"github.com/proxysim/proxysim/sim/trace"
)

// What a scenario may do to the proxy's runner from outside a sync, as
// kube-proxy's own runner tests do: ask for a run, call RetryAfter, stop
// the loop, read when the next run is due; and what it may decide about
// the syncs themselves: how long each takes and whether it fails.

// ErrInjectedSyncFailure is the error of a sync failed by FailSyncs.
var ErrInjectedSyncFailure = errors.New("sync failed (injected)")

// RequestRun calls the runner's Run(), with no object change behind it.
func (w *World) RequestRun() { w.proxy.runner.Run() }

// RetryAfter calls the runner's RetryAfter(d): the burst generation only.
func (w *World) RetryAfter(d time.Duration) error { return w.proxy.runner.RetryAfter(d) }

// StopRunner stops the proxy's runner, as closing its Loop's stop channel
// does: nothing runs any more until a restart builds a new proxy.
func (w *World) StopRunner() {
	w.Trace.Add(trace.Event{Kind: trace.Note, Detail: "runner stopped"})
	w.proxy.runner.Stop()
}

// NextRun is when the proxy's runner will next run if nothing asks it to,
// and why, read without moving the clock; false when nothing is armed (the
// runner is stopped, or a run is in progress).
func (w *World) NextRun() (time.Duration, runner.Reason, bool) {
	at, why, ok := w.proxy.runner.NextRun()
	if !ok {
		return 0, "", false
	}
	return at.Sub(w.cfg.Start), why, true
}

// FailSyncs makes the next n runner runs fail before they program
// anything (the changes they would have carried stay pending), whatever
// the dataplane; the runs after them succeed again.
func (w *World) FailSyncs(n int) {
	if n < 0 {
		n = 0
	}
	w.failSyncs += n
}

func (w *World) injectedSyncFailure() error {
	if w.failSyncs == 0 {
		return nil
	}
	w.failSyncs--
	return ErrInjectedSyncFailure
}

// SetCost replaces the sync cost model from now on: a run already under
// way keeps the cost it had. A Runs list starts again from its first entry
// with the next run.
func (w *World) SetCost(c CostModel) {
	c.Speed, c.Jitter, c.JitterSeed = w.cfg.Cost.Speed, w.cfg.Cost.Jitter, w.cfg.Cost.JitterSeed
	w.cfg.Cost = c
	w.costFrom = w.runnerRuns
	w.Trace.Add(trace.Event{Kind: trace.Note, Detail: fmt.Sprintf("sync cost now %s", c)})
}

func (c CostModel) String() string {
	if len(c.Runs) > 0 {
		return fmt.Sprint(c.Runs)
	}
	s := fmt.Sprintf("fixed %v + %v per service port + %v per endpoint", c.Fixed, c.PerService, c.PerEndpoint)
	if c.Work != nil {
		if n, ok := c.Work.(fmt.Stringer); ok {
			s += " + " + n.String()
		} else {
			s += fmt.Sprintf(" + %T of the sync's work", c.Work)
		}
	}
	return s
}

// SyncNow syncs directly, outside the runner, as kube-proxy's
// forceSyncProxyRules does when its iptables canary monitor finds the
// tables flushed: syncProxyRules is called on the monitor's goroutine. It
// takes the proxier's lock, so a run in progress (one with a sync cost)
// finishes first and the direct sync follows at once. Before both
// informers have synced, syncProxyRules does nothing, and neither does
// SyncNow. Its error is recorded with the sync and retried by nobody, as
// the error of the initial direct sync is.
func (w *World) SyncNow(why string) {
	if w.closed {
		return
	}
	if n := len(w.syncs); n > 0 && w.syncs[n-1].End < 0 {
		w.directQueued = append(w.directQueued, why)
		return
	}
	if !w.proxy.proxier.Initialized() {
		w.Trace.Add(trace.Event{Kind: trace.Note, Detail: "direct sync (" + why + ") skipped: the proxy has not synced its informers yet"})
		return
	}
	w.syncStarted(why)
	err := w.proxy.proxier.SyncProxyRules()
	w.proxy.takeWork()
	w.syncFinished(err)
}

// runQueuedDirect runs the direct syncs that waited for a run to end.
func (w *World) runQueuedDirect() {
	q := w.directQueued
	w.directQueued = nil
	for _, why := range q {
		w.SyncNow(why)
	}
}
