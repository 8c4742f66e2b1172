package vclock

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestTimersFireInDeadlineOrderEachAtItsOwnInstant(t *testing.T) {
	c := New(Epoch)
	var got []time.Duration
	record := func() { got = append(got, c.Since(Epoch)) }
	c.AfterFunc(3*time.Second, record)
	c.AfterFunc(1*time.Second, record)
	c.AfterFunc(2*time.Second, func() {
		record()
		c.AfterFunc(500*time.Millisecond, record) // armed by a callback, due before the 3s one
	})
	c.Advance(10 * time.Second)
	want := []time.Duration{1 * time.Second, 2 * time.Second, 2500 * time.Millisecond, 3 * time.Second}
	if len(got) != len(want) {
		t.Fatalf("fired %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("fired %v, want %v", got, want)
		}
	}
	if c.Since(Epoch) != 10*time.Second {
		t.Fatalf("now = %v after Advance(10s)", c.Since(Epoch))
	}
}

func TestEqualDeadlinesFireInArmingOrder(t *testing.T) {
	c := New(Epoch)
	var got []int
	for i := 0; i < 5; i++ {
		c.AfterFunc(time.Second, func() { got = append(got, i) })
	}
	c.Advance(time.Second)
	for i, v := range got {
		if v != i {
			t.Fatalf("order %v", got)
		}
	}
}

func TestStopAndResetDiscardUndeliveredValue(t *testing.T) {
	c := New(Epoch)
	tm := c.NewTimer(time.Second)
	c.Advance(time.Second) // value is now sitting in the channel
	if tm.Stop() {
		t.Fatal("Stop reported an already-fired timer as armed")
	}
	select {
	case <-tm.C():
		t.Fatal("stale value survived Stop")
	default:
	}
	tm.Reset(time.Second)
	c.Advance(500 * time.Millisecond)
	select {
	case <-tm.C():
		t.Fatal("timer fired early after Reset")
	default:
	}
	c.Advance(500 * time.Millisecond)
	select {
	case v := <-tm.C():
		if v.Sub(Epoch) != 2*time.Second {
			t.Fatalf("delivered %v, want its own deadline", v.Sub(Epoch))
		}
	default:
		t.Fatal("timer did not fire")
	}
}

// The caveat that makes FakeClock unfit for a faithful world: Stop does not
// discard a delivered value. This pins the upstream behaviour we design around.
func TestFakeClockKeepsStaleValueAcrossStop(t *testing.T) {
	fc := clocktesting.NewFakeClock(Epoch)
	tm := fc.NewTimer(time.Second)
	fc.Step(time.Second)
	tm.Stop()
	tm.Reset(time.Hour)
	select {
	case <-tm.C():
	default:
		t.Fatal("FakeClock changed: stale values are now discarded; revisit the caveat in docs/explanation/engine.md")
	}
}

func TestStepJumpsStraightToNextDeadline(t *testing.T) {
	c := New(Epoch)
	c.AfterFunc(time.Hour, func() {})
	if !c.Step() {
		t.Fatal("no timer fired")
	}
	if c.Since(Epoch) != time.Hour {
		t.Fatalf("now = %v", c.Since(Epoch))
	}
	if c.Step() {
		t.Fatal("Step fired with nothing armed")
	}
}

func TestTicker(t *testing.T) {
	c := New(Epoch)
	tk := c.NewTicker(time.Second)
	var n int
	for i := 0; i < 3; i++ {
		c.Advance(time.Second)
		select {
		case <-tk.C():
			n++
		default:
		}
	}
	tk.Stop()
	c.Advance(5 * time.Second)
	select {
	case <-tk.C():
		t.Fatal("stopped ticker ticked")
	default:
	}
	if n != 3 {
		t.Fatalf("ticks = %d, want 3", n)
	}
}
