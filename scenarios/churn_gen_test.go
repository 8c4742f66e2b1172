package scenarios

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/proxysim/proxysim/sim/trace"
)

func churnScenario(seed int, churn string) string {
	return fmt.Sprintf(`name: churn-gen
proxy: {mode: iptables, version: v1.36.0, minSyncPeriod: 1s, syncPeriod: 30s, syncCost: {fixed: 100ms, perEndpoint: 1ms}}
controllers:
  endpointSlice: {batchPeriod: 1s}
cluster:
  seed: 1
  pools:
    - {name: main, count: 3, zone: zone-a}
  generate:
    seed: 2
    services: 200
    endpointsPerService: {3: 50%%, 6: 50%%}
    pods: true
  churn:
    seed: %d
%stimeline:
  - {at: 5m, expect: {cluster: {syncs: {atLeast: 2}}}}
`, seed, churn)
}

const churnDefault = "    rate: 10\n    from: 5s\n"

// renderTimeline writes every step's instant and action, to compare.
func renderTimeline(t *testing.T, s *Scenario) string {
	var b strings.Builder
	for _, st := range s.Timeline {
		for _, a := range st.Actions {
			var body []byte
			if c, ok := a.(*createStep); ok {
				for _, o := range c.objects {
					j, _ := json.Marshal(o.Obj)
					body = append(body, j...)
				}
			} else {
				var err error
				if body, err = json.Marshal(a); err != nil {
					t.Fatal(err)
				}
			}
			fmt.Fprintf(&b, "%v %T %s\n", st.At, a, body)
		}
	}
	return b.String()
}

// The same seed makes the same steps; another seed others.
func TestChurnIsSeeded(t *testing.T) {
	parse := func(seed int) string {
		s, err := Parse("churn.yaml", []byte(churnScenario(seed, churnDefault)), nil)
		if err != nil {
			t.Fatal(err)
		}
		return renderTimeline(t, s)
	}
	a, b := parse(3), parse(3)
	if a != b {
		t.Fatal("the same seed made different steps")
	}
	if len(strings.Split(a, "\n")) < 1000 {
		t.Fatalf("only %d steps", len(strings.Split(a, "\n")))
	}
	if parse(4) == a {
		t.Error("another seed made the same steps")
	}
}

// The replay makes the rate of Pod and Service writes asked for, minute
// by minute, and every process's share of them.
func TestChurnRateHolds(t *testing.T) {
	s, err := Parse("churn.yaml", []byte(churnScenario(3, churnDefault)), nil)
	if err != nil {
		t.Fatal(err)
	}
	perMinute := make([]int, 6)
	ops := map[string]int{}
	res, err := Replay(s, Options{TraceKeep: 64, Follow: func(e trace.Event, _ Dataplane) {
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
	_, changes, skipped := generateChurn(s.Cluster.Churn, 5*time.Minute, s.Initial)
	count := map[string]int{}
	for _, c := range changes {
		count[c.Process]++
	}
	for _, p := range churnProcesses {
		// Each is a fifth of the changes by default.
		if share := float64(count[p]) / float64(len(changes)); share < 0.12 || share > 0.28 {
			t.Errorf("%s: %.0f%% of the changes, want 20%% (%v, %d skipped)", p, share*100, count, skipped)
		}
	}
	// One process alone makes only its own steps.
	s, err = Parse("churn.yaml", []byte(churnScenario(3, "    rate: 2\n    processes: {services: 100%}\n")), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range s.Timeline {
		for _, a := range st.Actions {
			if _, ok := a.(*podReadyStep); ok {
				t.Fatal("services alone made a podReady step")
			}
		}
	}
}

func TestChurnRefusesBadInput(t *testing.T) {
	for _, c := range []struct{ churn, want string }{
		{"    from: 5s\n", "churn.yaml:15:5: cluster.churn.rate: required"},
		{"    rate: 0\n", "cluster.churn.rate: want a rate above 0"},
		{"    rate: fast\n", "cluster.churn.rate: want a number"},
		{"    rate: 10\n    processes: {readinessFlaps: 50%, naps: 50%}\n", "cluster.churn.processes.naps: unknown churn process \"naps\""},
		{"    rate: 10\n    processes: {readinessFlaps: 50%}\n", "cluster.churn.processes"},
		{"    rate: 10\n    from: 6m\n", "cluster.churn.until: churn until 5m0s must come after it starts (6m0s)"},
		{"    rate: 10\n    flapFor: 0s\n", "cluster.churn.flapFor: want a positive duration"},
		{"    rate: 1000\n", "cluster.churn.rate: the generated Deployments cannot take 1000 changes/s"},
		{"    rate: 10\n    speed: 1\n", "cluster.churn.speed"},
	} {
		_, err := Parse("churn.yaml", []byte(churnScenario(3, c.churn)), nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.churn, err, c.want)
		}
	}
	noPods := strings.Replace(churnScenario(3, churnDefault), "    pods: true\n", "", 1)
	noPods = strings.Replace(noPods, "controllers:\n  endpointSlice: {batchPeriod: 1s}\n", "", 1)
	if _, err := Parse("churn.yaml", []byte(noPods), nil); err == nil || !strings.Contains(err.Error(), "churn acts on generated Pods") {
		t.Errorf("churn without generated pods: %v", err)
	}
}
