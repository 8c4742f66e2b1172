package runner

import (
	"testing"
	"time"

	"github.com/proxysim/proxysim/sim/vclock"
)

func (h *harness) wantNext(at time.Duration, why Reason) {
	h.t.Helper()
	got, w, ok := h.r.NextRun()
	if !ok || got.Sub(vclock.Epoch) != at || w != why {
		h.t.Fatalf("at %v: NextRun() = %v %s %v; want %v %s", h.at(), got.Sub(vclock.Epoch), w, ok, at, why)
	}
}

func (h *harness) wantNoNext() {
	h.t.Helper()
	if got, w, ok := h.r.NextRun(); ok {
		h.t.Fatalf("at %v: NextRun() = %v %s; want nothing armed", h.at(), got.Sub(vclock.Epoch), w)
	}
}

// NextRun reads the burst runner's one timer without moving it.
func TestNextRunBurst(t *testing.T) {
	h := newHarness(t, Config{Generation: Burst, MinInterval: time.Second, MaxInterval: 10 * time.Second, BurstRuns: 1}, 0)
	h.wantNoNext() // not started
	h.start()
	h.wantNext(10*time.Second, ReasonPeriodic)
	h.r.Run()
	h.until(ms(500))
	h.r.Run()
	h.wantNext(time.Second, ReasonDeferred)
	if err := h.r.RetryAfter(ms(200)); err != nil {
		t.Fatal(err)
	}
	h.wantNext(ms(700), ReasonRetry)
	h.until(ms(500)) // reading it changed nothing
	h.wantNext(ms(700), ReasonRetry)
	h.r.Stop()
	h.wantNoNext()
}

// NextRun on the cooldown runner: a retry or a request held by the
// cooldown comes when the cooldown ends; nothing is armed during a run.
func TestNextRunCooldown(t *testing.T) {
	h := newHarness(t, Config{Generation: Cooldown, MinInterval: 5 * time.Second, MaxInterval: 10 * time.Second, RetryInterval: time.Second}, time.Second)
	h.fail = []bool{true}
	h.start()
	h.wantNext(10*time.Second, ReasonPeriodic)
	h.r.Run()
	h.wantNoNext() // the run takes 1s
	h.until(2 * time.Second)
	h.wantNext(6*time.Second, ReasonRetry) // retry at 2s, cooldown until 6s
	h.r.Run()
	h.wantNext(6*time.Second, ReasonRequest)
	if err := h.r.RetryAfter(time.Second); err == nil {
		t.Fatal("the cooldown runner accepted RetryAfter")
	}
}
