package runner

import (
	"time"

	"k8s.io/utils/clock"
)

// cooldown implements the v1.34-and-later rules: after every run, success or
// not, the runner waits minInterval from completion before it may run again;
// the periodic run is maxInterval from completion and a failed run arms a
// retry at retryInterval from completion.
type cooldown struct {
	r *Runner

	maxTimer, retryTimer, coolTimer clock.Timer
	maxAt, retryAt, coolAt          time.Time
	cooling                         bool

	pendingRun, pendingMax, pendingRetry bool
}

func newCooldown(r *Runner) *cooldown { return &cooldown{r: r} }

func (c *cooldown) arm(t *clock.Timer, at *time.Time, now time.Time, d time.Duration, f func()) {
	if *t != nil {
		(*t).Stop()
	}
	*at = now.Add(d)
	*t = c.r.clock.AfterFunc(d, f)
}

func disarm(t clock.Timer, at *time.Time) {
	if t != nil {
		t.Stop()
	}
	*at = time.Time{}
}

func (c *cooldown) start(now time.Time) (bool, Reason) {
	c.arm(&c.maxTimer, &c.maxAt, now, c.r.cfg.MaxInterval, c.onMax)
	return false, ""
}

func (c *cooldown) request(now time.Time) (bool, Reason) {
	switch {
	case !c.r.started:
		c.r.obs.Dropped(now, ReasonNotReady)
		return false, ""
	case c.r.running:
		c.pendingRun = true
		c.r.obs.Deferred(now, ReasonRunning, time.Time{})
		return false, ""
	case c.cooling:
		c.pendingRun = true
		c.r.obs.Deferred(now, ReasonCooldown, c.coolAt)
		return false, ""
	}
	return true, ReasonRequest
}

func (c *cooldown) retryAfter(time.Time, time.Duration) (bool, Reason) { return false, "" }

// onTimer handles the periodic and retry timers. Both are stopped or re-armed
// around every run, so one that expires during a run is discarded; one that
// expires during the cooldown is remembered and runs when the cooldown ends.
func (c *cooldown) onTimer(why Reason, at *time.Time, pending *bool) {
	r := c.r
	r.mu.Lock()
	now := r.clock.Now()
	*at = time.Time{}
	ok := false
	switch {
	case r.running:
	case c.cooling:
		*pending = true
		r.obs.Deferred(now, ReasonCooldown, c.coolAt)
	default:
		ok = true
	}
	r.mu.Unlock()
	if ok {
		r.launch(why)
	}
}

func (c *cooldown) onMax()   { c.onTimer(ReasonPeriodic, &c.maxAt, &c.pendingMax) }
func (c *cooldown) onRetry() { c.onTimer(ReasonRetry, &c.retryAt, &c.pendingRetry) }

func (c *cooldown) onCool() {
	r := c.r
	r.mu.Lock()
	c.cooling = false
	c.coolAt = time.Time{}
	var why Reason
	// Upstream selects among ready channels at random; we coalesce every
	// pending trigger into one run, naming the request first.
	switch {
	case c.pendingRun:
		why = ReasonRequest
	case c.pendingRetry:
		why = ReasonRetry
	case c.pendingMax:
		why = ReasonPeriodic
	}
	r.mu.Unlock()
	if why != "" {
		r.launch(why)
	}
}

func (c *cooldown) launched(time.Time) {
	disarm(c.maxTimer, &c.maxAt)
	c.pendingRun, c.pendingMax, c.pendingRetry = false, false, false
}

func (c *cooldown) finish(now time.Time, err error) (bool, Reason) {
	if err != nil && c.r.cfg.RetryInterval > 0 {
		c.arm(&c.retryTimer, &c.retryAt, now, c.r.cfg.RetryInterval, c.onRetry)
		c.r.obs.Deferred(now, ReasonRetry, c.retryAt)
	} else {
		disarm(c.retryTimer, &c.retryAt)
	}
	c.cooling = true
	c.arm(&c.coolTimer, &c.coolAt, now, c.r.cfg.MinInterval, c.onCool)
	c.arm(&c.maxTimer, &c.maxAt, now, c.r.cfg.MaxInterval, c.onMax)
	return false, ""
}

func (c *cooldown) stop() {
	disarm(c.maxTimer, &c.maxAt)
	disarm(c.retryTimer, &c.retryAt)
	disarm(c.coolTimer, &c.coolAt)
}
