package runner

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/proxysim/proxysim/sim/vclock"
)

// harness drives a runner on a virtual clock and records what it did.
type harness struct {
	t      *testing.T
	clk    *vclock.Clock
	r      *Runner
	cost   time.Duration
	fail   []bool // per run: fail it?
	runs   int
	starts []string // "1.5s request"
	ends   []time.Duration
	log    []string
}

func (h *harness) at() time.Duration { return h.clk.Since(vclock.Epoch) }

func (h *harness) Requested(time.Time) {}
func (h *harness) Deferred(at time.Time, why Reason, until time.Time) {
	u := "end of run"
	if !until.IsZero() {
		u = until.Sub(vclock.Epoch).String()
	}
	h.log = append(h.log, fmt.Sprintf("%v defer %s until %s", at.Sub(vclock.Epoch), why, u))
}
func (h *harness) Started(at time.Time, why Reason) {
	h.starts = append(h.starts, fmt.Sprintf("%v %s", at.Sub(vclock.Epoch), why))
}
func (h *harness) Finished(at time.Time, err error) { h.ends = append(h.ends, at.Sub(vclock.Epoch)) }
func (h *harness) Dropped(at time.Time, why Reason) {
	h.log = append(h.log, fmt.Sprintf("%v dropped %s", at.Sub(vclock.Epoch), why))
}

func newHarness(t *testing.T, cfg Config, cost time.Duration) *harness {
	t.Helper()
	h := &harness{t: t, clk: vclock.New(vclock.Epoch), cost: cost}
	r, err := New(cfg, h.clk, func() error {
		i := h.runs
		h.runs++
		if i < len(h.fail) && h.fail[i] {
			return errors.New("injected failure")
		}
		return nil
	}, h)
	if err != nil {
		t.Fatal(err)
	}
	h.r = r
	return h
}

func (h *harness) start() { h.r.StartVirtual(func() time.Duration { return h.cost }) }

// runAt schedules Run() calls at the given offsets from the epoch.
func (h *harness) runAt(offsets ...time.Duration) {
	for _, o := range offsets {
		h.clk.AfterFunc(o-h.at(), h.r.Run)
	}
}

func (h *harness) until(d time.Duration) { h.clk.AdvanceTo(vclock.Epoch.Add(d)) }

func (h *harness) wantStarts(want ...string) {
	h.t.Helper()
	if got := strings.Join(h.starts, ", "); got != strings.Join(want, ", ") {
		h.t.Fatalf("run starts:\n got  %s\n want %s\nlog: %s", got, strings.Join(want, ", "), strings.Join(h.log, "; "))
	}
}

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func TestGenerationFor(t *testing.T) {
	for v, want := range map[string]Generation{"v1.33.4": Burst, "1.19": Burst, "v1.34.0": Cooldown, "1.36": Cooldown, "v1.35.0-alpha.1": Cooldown} {
		got, err := GenerationFor(v)
		if err != nil || got != want {
			t.Errorf("GenerationFor(%q) = %v, %v; want %v", v, got, err, want)
		}
	}
	for _, bad := range []string{"", "1", "2.1", "v1.x"} {
		if _, err := GenerationFor(bad); err == nil {
			t.Errorf("GenerationFor(%q) accepted", bad)
		}
	}
}

func TestValidateRejectsMaxBelowMin(t *testing.T) {
	if _, err := New(Config{Generation: Cooldown, MinInterval: time.Second, MaxInterval: ms(500)}, vclock.New(vclock.Epoch), nil, nil); err == nil {
		t.Fatal("maxInterval < minInterval accepted")
	}
}

// --- burst generation (kube-proxy <= v1.33) ---

func TestBurstTwoRunsThenDeferral(t *testing.T) {
	h := newHarness(t, Config{Generation: Burst, MinInterval: time.Second, MaxInterval: time.Minute}, 0)
	h.start()
	h.runAt(0, ms(100), ms(200), ms(300))
	h.until(5 * time.Second)
	// Two tokens: 0 and 100ms run at once; 200ms and 300ms coalesce into one
	// run minInterval after the last completion (100ms + 1s).
	h.wantStarts("0s request", "100ms request", "1.1s deferred")
}

func TestBurstCoalescesRequestsDuringRun(t *testing.T) {
	h := newHarness(t, Config{Generation: Burst, MinInterval: 0, MaxInterval: time.Minute}, time.Second)
	h.start()
	h.runAt(0, ms(200), ms(500), ms(900))
	h.until(5 * time.Second)
	h.wantStarts("0s request", "1s request")
}

func TestBurstMinIntervalZeroRunsEveryRequest(t *testing.T) {
	h := newHarness(t, Config{Generation: Burst, MinInterval: 0, MaxInterval: time.Minute}, 0)
	h.start()
	h.runAt(0, ms(1), ms(2), ms(3), ms(4))
	h.until(time.Second)
	h.wantStarts("0s request", "1ms request", "2ms request", "3ms request", "4ms request")
}

func TestBurstPeriodicAtMaxInterval(t *testing.T) {
	h := newHarness(t, Config{Generation: Burst, MinInterval: time.Second, MaxInterval: 30 * time.Second}, 0)
	h.start()
	h.until(75 * time.Second)
	// The periodic timer restarts after every run.
	h.wantStarts("30s periodic", "1m0s periodic")
	h = newHarness(t, Config{Generation: Burst, MinInterval: time.Second, MaxInterval: 30 * time.Second}, 0)
	h.start()
	h.runAt(10 * time.Second)
	h.until(45 * time.Second)
	h.wantStarts("10s request", "40s periodic")
}

func TestBurstRetryAfterMovesTimerAndSuccessCancelsIt(t *testing.T) {
	cfg := Config{Generation: Burst, MinInterval: time.Second, MaxInterval: time.Minute, RetryInterval: 5 * time.Second}
	h := newHarness(t, cfg, 0)
	h.fail = []bool{true}
	h.start()
	h.runAt(0)
	h.until(20 * time.Second)
	h.wantStarts("0s request", "5s retry")

	// A successful run after the retry was armed resets the timer: no retry.
	h = newHarness(t, cfg, 0)
	h.fail = []bool{true}
	h.start()
	h.runAt(0, 2*time.Second)
	h.until(20 * time.Second)
	h.wantStarts("0s request", "2s request")
}

func TestBurstRetryInsideRunSurvivesCompletion(t *testing.T) {
	// RetryAfter called while fn runs is applied after the run resets the timer.
	cfg := Config{Generation: Burst, MinInterval: 0, MaxInterval: time.Minute, RetryInterval: 3 * time.Second}
	h := newHarness(t, cfg, time.Second)
	h.fail = []bool{true}
	h.start()
	h.runAt(0)
	h.until(10 * time.Second)
	// retry instant is counted from the moment RetryAfter was called (0s).
	h.wantStarts("0s request", "3s retry")
}

func TestBurstRetrySoonerThanTokenWaitsForToken(t *testing.T) {
	// A retry due before a token exists does not run early: upstream spins on
	// an expired timer until the token arrives.
	cfg := Config{Generation: Burst, MinInterval: 2 * time.Second, MaxInterval: time.Minute, BurstRuns: 1}
	h := newHarness(t, cfg, 0)
	h.start()
	h.runAt(0)
	h.until(ms(100))
	h.r.RetryAfter(ms(100))
	h.until(10 * time.Second)
	h.wantStarts("0s request", "2s deferred")
}

func TestBurstStartToStartSpacingUnderChurn(t *testing.T) {
	// Upstream #138073: tokens refill from run start, deferrals count from
	// completion. With a 500ms run and churn every 100ms, the burst is spent by
	// 1s; after that each token arrives minInterval after the previous start,
	// and the next request takes it: runs are minInterval apart start-to-start,
	// only 500ms apart completion-to-start.
	cfg := Config{Generation: Burst, MinInterval: time.Second, MaxInterval: time.Minute}
	h := newHarness(t, cfg, ms(500))
	h.start()
	for o := time.Duration(0); o < 10*time.Second; o += ms(100) {
		h.runAt(o)
	}
	h.until(10 * time.Second)
	h.wantStarts("0s request", "500ms request", "1s request", "2s request", "3s request", "4s request",
		"5s request", "6s request", "7s request", "8s request", "9s request")
}

// --- cooldown generation (kube-proxy >= v1.34) ---

func TestCooldownFirstRunImmediateOrAtMaxInterval(t *testing.T) {
	cfg := Config{Generation: Cooldown, MinInterval: time.Second, MaxInterval: 30 * time.Second}
	h := newHarness(t, cfg, 0)
	h.start()
	h.runAt(ms(10))
	h.until(ms(20))
	h.wantStarts("10ms request")

	h = newHarness(t, cfg, 0)
	h.start()
	h.until(65 * time.Second)
	h.wantStarts("30s periodic", "1m0s periodic")
}

func TestCooldownDropsRunBeforeLoop(t *testing.T) {
	h := newHarness(t, Config{Generation: Cooldown, MinInterval: time.Second, MaxInterval: time.Minute}, 0)
	h.r.Run()
	h.start()
	h.until(ms(500))
	h.wantStarts()
	if len(h.log) != 1 || !strings.Contains(h.log[0], "dropped not-ready") {
		t.Fatalf("log = %v", h.log)
	}
}

func TestCooldownCoalescesDuringRunAndCooldown(t *testing.T) {
	cfg := Config{Generation: Cooldown, MinInterval: time.Second, MaxInterval: time.Minute}
	h := newHarness(t, cfg, ms(500))
	h.start()
	// 0: runs (ends 500ms). 200ms: during fn. 700ms, 1.2s: during cooldown.
	h.runAt(0, ms(200), ms(700), ms(1200))
	h.until(5 * time.Second)
	h.wantStarts("0s request", "1.5s request")
	if h.ends[0] != ms(500) || h.ends[1] != 2*time.Second {
		t.Fatalf("ends %v", h.ends)
	}
}

func TestCooldownIsCountedFromCompletion(t *testing.T) {
	cfg := Config{Generation: Cooldown, MinInterval: time.Second, MaxInterval: time.Minute}
	h := newHarness(t, cfg, 2*time.Second)
	h.start()
	h.runAt(0, ms(2500))
	h.until(10 * time.Second)
	// First run ends at 2s; cooldown to 3s although 3s > start+minInterval.
	h.wantStarts("0s request", "3s request")
}

func TestCooldownRetryNeverBeatsCooldownAndSuccessCancelsIt(t *testing.T) {
	cfg := Config{Generation: Cooldown, MinInterval: 2 * time.Second, MaxInterval: time.Minute, RetryInterval: ms(500)}
	h := newHarness(t, cfg, 0)
	h.fail = []bool{true}
	h.start()
	h.runAt(0)
	h.until(10 * time.Second)
	h.wantStarts("0s request", "2s retry")

	cfg.MinInterval = 0
	cfg.RetryInterval = 5 * time.Second
	h = newHarness(t, cfg, 0)
	h.fail = []bool{true}
	h.start()
	h.runAt(0, time.Second)
	h.until(20 * time.Second)
	h.wantStarts("0s request", "1s request")
}

func TestCooldownTimerDuringCooldownIsNotLost(t *testing.T) {
	cfg := Config{Generation: Cooldown, MinInterval: 10 * time.Second, MaxInterval: 10 * time.Second}
	h := newHarness(t, cfg, time.Second)
	h.start()
	h.until(35 * time.Second)
	// periodic at 10s ends 11s; max and cooldown both end at 21s.
	h.wantStarts("10s periodic", "21s periodic", "32s periodic")

	cfg = Config{Generation: Cooldown, MinInterval: 5 * time.Second, MaxInterval: 6 * time.Second, RetryInterval: time.Second}
	h = newHarness(t, cfg, 0)
	h.fail = []bool{true}
	h.start()
	h.runAt(0)
	h.until(ms(5500))
	// retry due at 1s fires during the cooldown and runs when it ends.
	h.wantStarts("0s request", "5s retry")
}

func TestCooldownCompletionToStartSpacingUnderChurn(t *testing.T) {
	cfg := Config{Generation: Cooldown, MinInterval: time.Second, MaxInterval: time.Minute}
	h := newHarness(t, cfg, ms(500))
	h.start()
	for o := time.Duration(0); o < 10*time.Second; o += ms(100) {
		h.runAt(o)
	}
	h.until(10 * time.Second)
	h.wantStarts("0s request", "1.5s request", "3s request", "4.5s request", "6s request", "7.5s request", "9s request")
}
