package runner

import (
	"time"

	"k8s.io/utils/clock"
)

// bucket is the burst generation's token bucket: one token per minInterval,
// capacity burst, starting full, consumed when a run starts. Upstream uses a
// float32 rate in client-go's flowcontrol limiter; we keep the fill level in
// nanoseconds so that a token arrives exactly minInterval after the one
// before, with no rounding.
type bucket struct {
	per   time.Duration // one token per this much time; 0 disables limiting
	cap   time.Duration // burst * per
	level time.Duration // tokens * per
	at    time.Time
}

func (b *bucket) refill(now time.Time) {
	if b.at.IsZero() {
		b.level, b.at = b.cap, now
		return
	}
	if now.After(b.at) {
		b.level += now.Sub(b.at)
		b.at = now
	}
	if b.level > b.cap {
		b.level = b.cap
	}
}

func (b *bucket) take(now time.Time) bool {
	if b.per == 0 {
		return true
	}
	b.refill(now)
	if b.level < b.per {
		return false
	}
	b.level -= b.per
	return true
}

// wait is how long until the next token.
func (b *bucket) wait(now time.Time) time.Duration {
	if b.per == 0 {
		return 0
	}
	b.refill(now)
	if b.level >= b.per {
		return 0
	}
	return b.per - b.level
}

// burst implements the v1.33-and-earlier rules: one timer serves the periodic
// run, deferrals and retries; a successful start resets it to maxInterval.
type burst struct {
	r        *Runner
	tokens   bucket
	timer    clock.Timer
	deadline time.Time
	timerWhy Reason
	lastRun  time.Time // completion of the last run

	retryAt      time.Time // earliest requested retry, zero if none
	retryPending bool      // a RetryAfter arrived during a run
	runPending   bool      // a Run arrived during a run
}

func newBurst(r *Runner) *burst {
	return &burst{r: r, tokens: bucket{per: r.cfg.MinInterval, cap: time.Duration(r.cfg.BurstRuns) * r.cfg.MinInterval}}
}

func (b *burst) setTimer(now time.Time, d time.Duration, why Reason) {
	if b.timer != nil {
		b.timer.Stop()
	}
	b.deadline, b.timerWhy = now.Add(d), why
	b.timer = b.r.clock.AfterFunc(d, b.fire)
}

func (b *burst) fire() {
	r := b.r
	r.mu.Lock()
	now := r.clock.Now()
	var ok bool
	why := b.timerWhy
	if !r.running {
		// A deadline that passes during a run is lost: the run resets the timer.
		ok, why = b.tryRun(now, why)
	}
	r.mu.Unlock()
	if ok {
		r.launch(why)
	}
}

func (b *burst) start(now time.Time) (bool, Reason) {
	b.tokens.refill(now)
	b.setTimer(now, b.r.cfg.MaxInterval, ReasonPeriodic)
	if b.runPending { // Run() before Loop is buffered in upstream's channel
		b.runPending = false
		return b.tryRun(now, ReasonRequest)
	}
	return false, ""
}

func (b *burst) request(now time.Time) (bool, Reason) {
	if b.r.running || !b.r.started {
		b.runPending = true
		if b.r.running {
			b.r.obs.Deferred(now, ReasonRunning, time.Time{})
		}
		return false, ""
	}
	return b.tryRun(now, ReasonRequest)
}

func (b *burst) retryAfter(now time.Time, d time.Duration) (bool, Reason) {
	at := now.Add(d)
	if !b.retryAt.IsZero() && b.retryAt.Before(at) {
		return false, ""
	}
	b.retryAt = at
	if b.r.running || !b.r.started {
		b.retryPending = true
		return false, ""
	}
	b.doRetry(now)
	return false, ""
}

func (b *burst) doRetry(now time.Time) {
	if b.retryAt.IsZero() {
		return
	}
	in := b.retryAt.Sub(now)
	at := b.retryAt
	b.retryAt = time.Time{}
	if in < b.deadline.Sub(now) {
		b.setTimer(now, in, ReasonRetry)
		b.r.obs.Deferred(now, ReasonRetry, at)
	}
}

// tryRun starts a run if a token is available; otherwise it re-arms the timer
// for the sooner of "minInterval after the last completion" and the timer's
// current deadline.
func (b *burst) tryRun(now time.Time, why Reason) (bool, Reason) {
	if b.tokens.take(now) {
		return true, why
	}
	nextPossible := b.r.cfg.MinInterval - now.Sub(b.lastRun)
	d := b.deadline.Sub(now)
	if nextPossible < d {
		d = nextPossible
	}
	if d <= 0 {
		// Upstream re-arms a timer that has already expired, which fires at
		// once and retries in a tight loop until a token arrives; the loop ends
		// when the token does, so that is the instant we wake up.
		d = b.tokens.wait(now)
	}
	b.setTimer(now, d, ReasonDeferred)
	b.r.obs.Deferred(now, ReasonNoToken, now.Add(d))
	return false, ""
}

func (b *burst) launched(time.Time) {}

func (b *burst) finish(now time.Time, _ error) (bool, Reason) {
	b.lastRun = now
	b.setTimer(now, b.r.cfg.MaxInterval, ReasonPeriodic)
	// Upstream's loop picks pending channels in random order; we apply the
	// retry first, then the request, in the order they would have been sent.
	if b.retryPending {
		b.retryPending = false
		b.doRetry(now)
	}
	if b.runPending {
		b.runPending = false
		return b.tryRun(now, ReasonRequest)
	}
	return false, ""
}

func (b *burst) stop() {
	if b.timer != nil {
		b.timer.Stop()
	}
}
