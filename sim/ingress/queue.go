package ingress

import "time"

// event is what the store sends down the ring: an object's key, or a
// configuration event (the controller's ConfigMap changed).
type event struct {
	key           string
	configuration bool
}

// ring is eapache/channels' RingChannel as NewNGINXController (nginx.go)
// makes it: writers never block, and past size buffered events the oldest
// is dropped. The main loop (nginx.go Start) drains it into the task queue
// as fast as events come once it reads, so events only pile up before then.
type ring struct {
	size    int
	buf     []event
	dropped int
}

// push buffers ev and reports whether an older event was dropped for it.
func (r *ring) push(ev event) (dropped event, ok bool) {
	r.buf = append(r.buf, ev)
	if len(r.buf) <= r.size {
		return event{}, false
	}
	dropped = r.buf[0]
	r.buf = r.buf[1:]
	r.dropped++
	return dropped, true
}

func (r *ring) drain() []event {
	out := r.buf
	r.buf = nil
	return out
}

// stamp orders the instants the queue compares: virtual time, then the
// order things happened in at that time. The real queue stamps events
// with the wall clock in nanoseconds; in virtual time many things share an
// instant, and seq keeps "before" and "after" as they happened.
type stamp struct {
	t   time.Duration
	seq uint64
}

func (a stamp) after(b stamp) bool {
	if a.t != b.t {
		return a.t > b.t
	}
	return a.seq > b.seq
}

// element is a task queue item (internal/task/queue.go Element): a key and
// a timestamp. zero marks the timestamp 0 a failed sync is requeued with,
// which is never skipped.
type element struct {
	key  string
	ts   stamp
	zero bool
}

// nonSkippable is how far in the future EnqueueTask stamps an item
// (queue.go enqueue: now + 24h), so that no sync start overtakes it.
const nonSkippable = 24 * time.Hour

// Upstream's per-item backoff for a requeued item (client-go workqueue
// DefaultTypedControllerRateLimiter's exponential part: 5 ms doubling to
// 1000 s), with its overall bucket of 10 per second, burst 100.
const (
	retryBase  = 5 * time.Millisecond
	retryMax   = 1000 * time.Second
	retryQPS   = 10
	retryBurst = 100
)

func retryDelay(failures int) time.Duration {
	d := retryBase
	for i := 0; i < failures; i++ {
		d *= 2
		if d >= retryMax {
			return retryMax
		}
	}
	return d
}
