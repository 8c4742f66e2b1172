package replay

import (
	"strings"
	"testing"
	"time"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/internal/sample"
	"github.com/proxysim/proxysim/sim/trace"
)

// The replay makes the rate of Pod and Service writes asked for, minute
// by minute, and every process's share of them.
func TestChurnRateHolds(t *testing.T) {
	s, err := scenarios.Parse("churn.yaml", []byte(sample.ChurnScenario(3, sample.ChurnDefault)), nil)
	if err != nil {
		t.Fatal(err)
	}
	perMinute := make([]int, 6)
	ops := map[string]int{}
	res, err := Replay(s, Options{TraceKeep: 64, Follow: func(e trace.Event, _ scenarios.Dataplane) {
		at := time.Duration(e.At)
		switch {
		case e.Kind == trace.Step:
			ops[e.Op]++
		case e.Kind == trace.Object && at > 0 && strings.HasPrefix(e.Detail, "to ") &&
			(strings.HasPrefix(e.Object, "Pod ") || strings.HasPrefix(e.Object, "Service ")):
			// Each write of a Pod or Service, as the EndpointSlice
			// controller (their one watcher here) hears it.
			perMinute[at/time.Minute]++
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Passed() {
		t.Fatal(res.Failures)
	}
	t.Logf("writes per minute %v, steps %v", perMinute, ops)
	total := 0
	for m, n := range perMinute[:5] {
		total += n
		if m >= 1 && (n < 450 || n > 750) {
			t.Errorf("minute %d: %d writes, want 600 ± 25%% (10/s)", m, n)
		}
	}
	if want := 10 * 295; total < want*9/10 || total > want*11/10 {
		t.Errorf("%d writes in all, want %d ± 10%%", total, want)
	}
	for _, op := range []string{"podReady", "rollingUpdate", "delete", "apply"} {
		if ops[op] == 0 {
			t.Errorf("no %s step: %v", op, ops)
		}
	}

}
