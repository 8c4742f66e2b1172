// Package queue is a controller work queue in virtual time: client-go's
// work queue and rate limiters, driven by the world's clock instead of
// goroutines.
//
// A kube-controller-manager controller puts keys in a
// workqueue.TypedRateLimitingInterface and N worker goroutines take them
// out. client-go's delaying queue runs a goroutine of its own that waits on
// its clock's timers; with a virtual clock that goroutine would race with the
// clock's owner, and when a delayed key reached the queue would depend on
// the scheduler. So this package keeps only the parts without goroutines and
// puts the clock where the goroutines were:
//
//   - the queue proper is client-go's workqueue.Typed (its dirty and
//     processing sets give the real de-duplication: a key added while being
//     processed is processed once more, after Done). Built without a name it
//     has no metrics and starts no goroutine;
//   - AddAfter is a virtual timer per waiting key with client-go's rule
//     (delaying_queue.go, insert): a key already waiting keeps the earlier
//     of its two ready times; a delay <= 0 is an immediate Add;
//   - the rate limiters are client-go's (per-item exponential backoff,
//     max-of), except the token bucket: client-go's reads the wall clock, so
//     Bucket reserves golang.org/x/time/rate tokens at the virtual instant;
//   - the workers: whenever a key becomes ready, a zero-delay timer is armed;
//     when it fires, keys are processed one by one until the queue is empty.
//     A sync takes no virtual time, so N workers and one give the same
//     result; Workers is kept for the record.
//
// Everything runs on the goroutine that advances the clock, in the order the
// clock fires its timers (deadline, then arming order): the same inputs give
// the same syncs at the same instants on every run.
package queue

import (
	"time"

	"golang.org/x/time/rate"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/proxysim/proxysim/sim/vclock"
)

// Config describes a queue.
type Config struct {
	Clock *vclock.Clock
	// RateLimiter spaces retries (AddRateLimited); nil means
	// ControllerRateLimiter(time.Millisecond*5, 1000*time.Second).
	RateLimiter workqueue.TypedRateLimiter[string]
	// MaxRetries: a key whose sync fails this many times in a row is
	// dropped (Forget) instead of retried again.
	MaxRetries int
	// Workers is recorded only (see the package doc).
	Workers int
	// Sync handles one key.
	Sync func(key string) error
	// Dropped, if set, is told of a key dropped after MaxRetries failures.
	Dropped func(key string, err error)
}

// Queue is a rate-limited, delaying work queue processed in virtual time.
type Queue struct {
	cfg     Config
	q       *workqueue.Typed[string]
	waiting map[string]*waiter
	kicked  bool
	stopped bool
}

type waiter struct {
	at    time.Time
	timer clock.Timer
}

// New builds a queue.
func New(cfg Config) *Queue {
	if cfg.RateLimiter == nil {
		cfg.RateLimiter = ControllerRateLimiter(cfg.Clock, 5*time.Millisecond, 1000*time.Second)
	}
	return &Queue{
		cfg:     cfg,
		q:       workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{Clock: cfg.Clock}),
		waiting: map[string]*waiter{},
	}
}

// ControllerRateLimiter is the limiter kube-controller-manager's endpoint
// controllers use: the larger of a per-key exponential backoff (base, doubling
// up to max) and an overall bucket of 10 qps with a burst of 100
// (client-go DefaultTypedControllerRateLimiter's shape; the EndpointSlice
// controller passes base 1s, max 1000s).
func ControllerRateLimiter(clk *vclock.Clock, base, max time.Duration) workqueue.TypedRateLimiter[string] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](base, max),
		NewBucket(clk, 10, 100),
	)
}

// Bucket is client-go's TypedBucketRateLimiter on a virtual clock: an
// overall token bucket whose delay is counted from the virtual now.
type Bucket struct {
	clk *vclock.Clock
	l   *rate.Limiter
}

// NewBucket returns a bucket refilling qps tokens a second, holding burst.
func NewBucket(clk *vclock.Clock, qps float64, burst int) *Bucket {
	return &Bucket{clk: clk, l: rate.NewLimiter(rate.Limit(qps), burst)}
}

func (b *Bucket) When(string) time.Duration {
	now := b.clk.Now()
	return b.l.ReserveN(now, 1).DelayFrom(now)
}
func (b *Bucket) Forget(string)          {}
func (b *Bucket) NumRequeues(string) int { return 0 }

// Add makes key ready now.
func (q *Queue) Add(key string) {
	if q.stopped {
		return
	}
	q.q.Add(key)
	q.kick()
}

// AddAfter makes key ready after d; a key already waiting keeps the earlier
// ready time.
func (q *Queue) AddAfter(key string, d time.Duration) {
	if q.stopped {
		return
	}
	if d <= 0 {
		q.Add(key)
		return
	}
	at := q.cfg.Clock.Now().Add(d)
	if w, ok := q.waiting[key]; ok {
		if !at.Before(w.at) {
			return
		}
		w.timer.Stop()
	}
	w := &waiter{at: at}
	w.timer = q.cfg.Clock.AfterFunc(d, func() {
		if q.waiting[key] == w {
			delete(q.waiting, key)
		}
		q.Add(key)
	})
	q.waiting[key] = w
}

// AddRateLimited adds key after the rate limiter's delay for it.
func (q *Queue) AddRateLimited(key string) {
	q.AddAfter(key, q.cfg.RateLimiter.When(key))
}

// NumRequeues is how many times key was retried since its last success.
func (q *Queue) NumRequeues(key string) int { return q.cfg.RateLimiter.NumRequeues(key) }

// Len is the number of ready keys.
func (q *Queue) Len() int { return q.q.Len() }

// Waiting is the number of keys waiting for their ready time.
func (q *Queue) Waiting() int { return len(q.waiting) }

// Stop drops every waiting key; nothing is processed afterwards.
func (q *Queue) Stop() {
	q.stopped = true
	for _, w := range q.waiting {
		w.timer.Stop()
	}
	q.waiting = map[string]*waiter{}
	q.q.ShutDown()
}

func (q *Queue) kick() {
	if q.kicked {
		return
	}
	q.kicked = true
	q.cfg.Clock.AfterFunc(0, q.process)
}

// process is the workers: take ready keys one at a time, sync, and retry
// failures through the rate limiter as the endpoint controllers' handleErr
// does (retry while NumRequeues < MaxRetries, then drop; Forget on success).
func (q *Queue) process() {
	q.kicked = false
	for !q.stopped && q.q.Len() > 0 {
		key, shutdown := q.q.Get()
		if shutdown {
			return
		}
		err := q.cfg.Sync(key)
		switch {
		case err == nil:
			q.cfg.RateLimiter.Forget(key)
		case q.cfg.RateLimiter.NumRequeues(key) < q.cfg.MaxRetries:
			q.AddRateLimited(key)
		default:
			q.cfg.RateLimiter.Forget(key)
			if q.cfg.Dropped != nil {
				q.cfg.Dropped(key, err)
			}
		}
		q.q.Done(key)
	}
}
