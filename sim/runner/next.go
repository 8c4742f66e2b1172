package runner

import "time"

// NextRun reports the instant the runner will next start a run if nothing
// else asks for one, and why: the timer a scenario would otherwise have to
// wait for, read without moving the clock. It reports false while a run is
// in progress (the next instant is decided when it ends), once the runner
// is stopped, and before it starts.
func (r *Runner) NextRun() (time.Time, Reason, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped || r.running || !r.started {
		return time.Time{}, "", false
	}
	return r.p.next()
}

// next is the burst generation's one timer: periodic, deferred or retry.
func (b *burst) next() (time.Time, Reason, bool) {
	if b.deadline.IsZero() {
		return time.Time{}, "", false
	}
	return b.deadline, b.timerWhy, true
}

// next is the cooldown generation's earliest armed trigger, never before
// the cooldown ends: a request or timer held by the cooldown runs when it
// ends, and a retry or periodic timer due earlier waits for it.
func (c *cooldown) next() (time.Time, Reason, bool) {
	var at time.Time
	var why Reason
	consider := func(t time.Time, w Reason) {
		if !t.IsZero() && (at.IsZero() || t.Before(at)) {
			at, why = t, w
		}
	}
	if c.cooling {
		switch {
		case c.pendingRun:
			return c.coolAt, ReasonRequest, true
		case c.pendingRetry:
			return c.coolAt, ReasonRetry, true
		case c.pendingMax:
			return c.coolAt, ReasonPeriodic, true
		}
	}
	consider(c.retryAt, ReasonRetry)
	consider(c.maxAt, ReasonPeriodic)
	if at.IsZero() {
		return at, "", false
	}
	if c.cooling && at.Before(c.coolAt) {
		at = c.coolAt
	}
	return at, why, true
}
