package replay_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/replay"
)

// Each budget stops a replay that passes it, with exit-3 material: the
// scenario, the instant reached and a cause.
func TestBudgetsStopAReplay(t *testing.T) {
	s, err := scenarios.LoadLibrary("min-sync-period-0s")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		opts replay.Options
		what string
	}{
		{replay.Options{MaxEvents: 40}, "events"},
		{replay.Options{MaxMemory: 1}, "memory"},
	} {
		_, err := replay.Replay(s, c.opts)
		var be *replay.BudgetError
		if !errors.As(err, &be) || be.What != c.what {
			t.Fatalf("%+v: err %v, want a %s budget error", c.opts, err, c.what)
		}
		if msg := be.Error(); !strings.Contains(msg, "min-sync-period-0s.yaml: replay stopped at ") || !strings.Contains(msg, "likely cause: ") {
			t.Errorf("message: %s", msg)
		}
	}
	// The default budgets leave the library far inside them.
	if res, err := replay.Replay(s, replay.Options{}); err != nil || !res.Passed() {
		t.Fatalf("default budgets: %v", err)
	}
}

// dataplaneOps counts the proxier's startup writes (its sysctls) too, and
// the streamed trace starts with them.
func TestDataplaneOpsCountStartupWrites(t *testing.T) {
	src := func(n int) []byte {
		return []byte(fmt.Sprintf("name: ops\nproxy: {version: v1.34.0, kernel: 5.4.0}\ntimeline:\n  - at: 1s\n    expect: {dataplaneOps: {count: %d}}\n", n))
	}
	s, err := scenarios.Parse("ops.yaml", src(0), nil)
	if err != nil {
		t.Fatal(err)
	}
	var streamed bytes.Buffer
	res, err := replay.Replay(s, replay.Options{TraceStream: &streamed})
	if err != nil {
		t.Fatal(err)
	}
	writes := strings.Count(streamed.String(), `"ev":"dataplane"`)
	if writes == 0 || res.Passed() {
		t.Fatalf("%d startup writes streamed; count 0 passed: %v", writes, res.Passed())
	}
	s, _ = scenarios.Parse("ops.yaml", src(writes), nil)
	if res, err := replay.Replay(s, replay.Options{}); err != nil || !res.Passed() {
		t.Fatalf("count %d: %v %v", writes, err, res.Failures)
	}
}
