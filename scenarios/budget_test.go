package scenarios_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/proxysim/proxysim/scenarios"
)

// Each budget stops a replay that passes it, with exit-3 material: the
// scenario, the instant reached and a cause.
func TestBudgetsStopAReplay(t *testing.T) {
	s, err := scenarios.LoadLibrary("min-sync-period-0s")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		opts scenarios.Options
		what string
	}{
		{scenarios.Options{MaxEvents: 40}, "events"},
		{scenarios.Options{MaxMemory: 1}, "memory"},
	} {
		_, err := scenarios.Replay(s, c.opts)
		var be *scenarios.BudgetError
		if !errors.As(err, &be) || be.What != c.what {
			t.Fatalf("%+v: err %v, want a %s budget error", c.opts, err, c.what)
		}
		if msg := be.Error(); !strings.Contains(msg, "min-sync-period-0s.yaml: replay stopped at ") || !strings.Contains(msg, "likely cause: ") {
			t.Errorf("message: %s", msg)
		}
	}
	// The default budgets leave the library far inside them.
	if res, err := scenarios.Replay(s, scenarios.Options{}); err != nil || !res.Passed() {
		t.Fatalf("default budgets: %v", err)
	}
}
