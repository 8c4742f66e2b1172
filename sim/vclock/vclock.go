// Package vclock is a virtual clock for discrete-event simulation.
//
// A Clock implements k8s.io/utils/clock's Clock, WithTicker and
// WithDelayedExecution interfaces, so any component that takes an injected
// clock runs on it unchanged. Time moves only when the owner of the clock
// calls Step, AdvanceTo or Advance: the clock jumps straight to the next
// deadline and fires the timers due there one at a time, in deadline order and,
// for equal deadlines, in the order they were armed. It never sleeps and never
// reads the wall clock.
//
// Timers behave like Go 1.23+ timers: Stop and Reset discard a value that was
// delivered but not yet received, so a stopped timer never fires late. This is
// where it differs from k8s.io/utils/clock/testing.FakeClock, whose Step fires
// every due timer at the new time in one go and whose channels keep stale
// values across Stop and Reset.
//
// AfterFunc callbacks run synchronously on the goroutine that advances the
// clock, at their own instant, without the clock's lock held: a callback may
// arm, stop or reset timers, including its own.
package vclock

import (
	"container/heap"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Epoch is the instant a simulation starts at unless told otherwise. A fixed
// epoch keeps traces byte-identical from run to run.
var Epoch = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)

// Clock is a virtual clock. The zero value is not usable; call New.
type Clock struct {
	mu    sync.Mutex
	now   time.Time
	seq   uint64
	queue eventQueue
}

var (
	_ clock.WithTicker           = (*Clock)(nil)
	_ clock.WithDelayedExecution = (*Clock)(nil)
)

// New returns a clock that reads start until it is advanced.
func New(start time.Time) *Clock {
	return &Clock{now: start}
}

// Now returns the current virtual time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Since returns the virtual time elapsed since t.
func (c *Clock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// After returns a channel that receives the virtual time once d has passed.
func (c *Clock) After(d time.Duration) <-chan time.Time { return c.NewTimer(d).C() }

// Sleep blocks until another goroutine advances the clock past d. Calling it
// from the goroutine that drives the clock deadlocks, as sleeping in a
// simulation would: schedule an AfterFunc instead.
func (c *Clock) Sleep(d time.Duration) { <-c.After(d) }

// Tick is like time.Tick on the virtual clock.
func (c *Clock) Tick(d time.Duration) <-chan time.Time {
	if d <= 0 {
		return nil
	}
	return c.NewTicker(d).C()
}

// NewTimer arms a channel timer that fires after d.
func (c *Clock) NewTimer(d time.Duration) clock.Timer {
	t := &timer{c: c, ch: make(chan time.Time, 1)}
	c.mu.Lock()
	c.arm(&t.ev, t, d)
	c.mu.Unlock()
	return t
}

// AfterFunc arms a timer that calls f, on the driving goroutine, after d.
func (c *Clock) AfterFunc(d time.Duration, f func()) clock.Timer {
	t := &timer{c: c, f: f}
	c.mu.Lock()
	c.arm(&t.ev, t, d)
	c.mu.Unlock()
	return t
}

// NewTicker arms a ticker that delivers every d; like time.Ticker, a tick that
// finds the channel full is dropped.
func (c *Clock) NewTicker(d time.Duration) clock.Ticker {
	if d <= 0 {
		panic("vclock: non-positive interval for NewTicker")
	}
	t := &ticker{timer: timer{c: c, ch: make(chan time.Time, 1)}, period: d}
	c.mu.Lock()
	c.arm(&t.ev, t, d)
	c.mu.Unlock()
	return t
}

// Pending reports the deadline of the earliest armed timer.
func (c *Clock) Pending() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.queue) == 0 {
		return time.Time{}, false
	}
	return c.queue[0].at, true
}

// Step moves time to the earliest deadline and fires that one timer. It
// reports false, leaving time alone, when no timer is armed.
func (c *Clock) Step() bool {
	c.mu.Lock()
	if len(c.queue) == 0 {
		c.mu.Unlock()
		return false
	}
	ev := heap.Pop(&c.queue).(*event)
	ev.index = -1
	if ev.at.After(c.now) {
		c.now = ev.at
	}
	now := c.now
	c.mu.Unlock()
	ev.target.fire(now)
	return true
}

// AdvanceTo fires, one by one and each at its own instant, every timer due at
// or before t (including timers those callbacks arm), then sets the time to t.
// Moving backwards is a no-op.
func (c *Clock) AdvanceTo(t time.Time) {
	for {
		at, ok := c.Pending()
		if !ok || at.After(t) {
			break
		}
		c.Step()
	}
	c.mu.Lock()
	if t.After(c.now) {
		c.now = t
	}
	c.mu.Unlock()
}

// Advance is AdvanceTo(Now()+d).
func (c *Clock) Advance(d time.Duration) { c.AdvanceTo(c.Now().Add(d)) }

// arm schedules ev for target at now+d; the caller holds c.mu.
func (c *Clock) arm(ev *event, target firer, d time.Duration) {
	if d < 0 {
		d = 0
	}
	c.seq++
	ev.at = c.now.Add(d)
	ev.seq = c.seq
	ev.target = target
	heap.Push(&c.queue, ev)
}

// disarm removes ev from the queue and reports whether it was armed; the
// caller holds c.mu.
func (c *Clock) disarm(ev *event) bool {
	if ev.index < 0 || ev.target == nil {
		return false
	}
	heap.Remove(&c.queue, ev.index)
	ev.index = -1
	return true
}

type firer interface{ fire(now time.Time) }

type timer struct {
	c  *Clock
	ev event
	ch chan time.Time
	f  func()
}

func (t *timer) C() <-chan time.Time { return t.ch }

func (t *timer) fire(now time.Time) {
	if t.f != nil {
		t.f()
		return
	}
	select {
	case t.ch <- now:
	default:
	}
}

// Stop disarms the timer and discards an undelivered value, reporting whether
// the timer was armed.
func (t *timer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	t.drain()
	return t.c.disarm(&t.ev)
}

// Reset re-arms the timer to fire d from now, discarding an undelivered value,
// and reports whether it was armed before.
func (t *timer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	t.drain()
	was := t.c.disarm(&t.ev)
	t.c.arm(&t.ev, t, d)
	return was
}

func (t *timer) drain() {
	if t.ch == nil {
		return
	}
	select {
	case <-t.ch:
	default:
	}
}

type ticker struct {
	timer
	period time.Duration
}

func (t *ticker) fire(now time.Time) {
	t.c.mu.Lock()
	t.c.arm(&t.ev, t, t.period)
	t.c.mu.Unlock()
	select {
	case t.ch <- now:
	default:
	}
}

func (t *ticker) Stop() {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	t.c.disarm(&t.ev)
}

type event struct {
	at     time.Time
	seq    uint64
	index  int
	target firer
}

type eventQueue []*event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if !q[i].at.Equal(q[j].at) {
		return q[i].at.Before(q[j].at)
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index = i
	q[j].index = j
}
func (q *eventQueue) Push(x any) {
	ev := x.(*event)
	ev.index = len(*q)
	*q = append(*q, ev)
}
func (q *eventQueue) Pop() any {
	old := *q
	n := len(old)
	ev := old[n-1]
	old[n-1] = nil
	*q = old[:n-1]
	return ev
}
