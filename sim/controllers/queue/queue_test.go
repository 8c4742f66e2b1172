package queue

import (
	"errors"
	"testing"
	"time"

	"github.com/proxysim/proxysim/sim/vclock"
)

type recorder struct {
	clk   *vclock.Clock
	at    []time.Duration
	fails int // fail this many syncs
}

func (r *recorder) sync(string) error {
	r.at = append(r.at, r.clk.Since(vclock.Epoch))
	if r.fails > 0 {
		r.fails--
		return errors.New("boom")
	}
	return nil
}

func newQueue(fails, maxRetries int) (*Queue, *recorder) {
	clk := vclock.New(vclock.Epoch)
	r := &recorder{clk: clk, fails: fails}
	q := New(Config{Clock: clk, RateLimiter: ControllerRateLimiter(clk, time.Second, 1000*time.Second), MaxRetries: maxRetries, Sync: r.sync})
	return q, r
}

// A key waiting keeps the earlier of two ready times; a later AddAfter
// never postpones it, an earlier one brings it forward; Add of a waiting
// key syncs now and once more when the wait ends (client-go's semantics).
func TestAddAfterKeepsTheEarlierTime(t *testing.T) {
	q, r := newQueue(0, 15)
	q.AddAfter("a", 2*time.Second)
	q.AddAfter("a", 5*time.Second)
	q.AddAfter("a", time.Second)
	r.clk.Advance(10 * time.Second)
	if len(r.at) != 1 || r.at[0] != time.Second {
		t.Fatalf("synced at %v, want [1s]", r.at)
	}
	q.AddAfter("a", time.Second)
	q.Add("a")
	r.clk.Advance(10 * time.Second)
	if len(r.at) != 3 || r.at[1] != 10*time.Second || r.at[2] != 11*time.Second {
		t.Fatalf("synced at %v, want [1s 10s 11s]", r.at)
	}
}

// Failures retry at 1s, 2s, 4s ... after each other, up to MaxRetries, then
// the key is dropped; a success resets the backoff.
func TestBackoffAndDrop(t *testing.T) {
	q, r := newQueue(100, 4)
	q.Add("a")
	r.clk.Advance(time.Hour)
	want := []time.Duration{0, time.Second, 3 * time.Second, 7 * time.Second, 15 * time.Second}
	if len(r.at) != len(want) {
		t.Fatalf("synced at %v, want %v", r.at, want)
	}
	for i := range want {
		if r.at[i] != want[i] {
			t.Fatalf("synced at %v, want %v", r.at, want)
		}
	}
	if q.NumRequeues("a") != 0 {
		t.Errorf("a dropped key keeps %d requeues", q.NumRequeues("a"))
	}
}

// The 10 qps / burst 100 bucket spaces retries of many keys once the burst
// is spent: the 101st retry in one instant waits 100ms.
func TestBucketAfterBurst(t *testing.T) {
	clk := vclock.New(vclock.Epoch)
	b := NewBucket(clk, 10, 100)
	for i := 0; i < 100; i++ {
		if d := b.When("k"); d != 0 {
			t.Fatalf("token %d waits %v", i, d)
		}
	}
	if d := b.When("k"); d != 100*time.Millisecond {
		t.Fatalf("token 101 waits %v, want 100ms", d)
	}
}
