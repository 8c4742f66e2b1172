package scenarios

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/proxysim/proxysim/scenarios/internal/sample"
)

// renderTimeline writes every step's instant and action, to compare.
func renderTimeline(t *testing.T, s *Scenario) string {
	var b strings.Builder
	for _, st := range s.Timeline {
		for _, a := range st.Actions {
			var body []byte
			if c, ok := a.(*CreateStep); ok {
				for _, o := range c.Objects {
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
		s, err := Parse("churn.yaml", []byte(sample.ChurnScenario(seed, sample.ChurnDefault)), nil)
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
		_, err := Parse("churn.yaml", []byte(sample.ChurnScenario(3, c.churn)), nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.churn, err, c.want)
		}
	}
	noPods := strings.Replace(sample.ChurnScenario(3, sample.ChurnDefault), "    pods: true\n", "", 1)
	noPods = strings.Replace(noPods, "controllers:\n  endpointSlice: {batchPeriod: 1s}\n", "", 1)
	if _, err := Parse("churn.yaml", []byte(noPods), nil); err == nil || !strings.Contains(err.Error(), "churn acts on generated Pods") {
		t.Errorf("churn without generated pods: %v", err)
	}
}

// The generated changes are shared among the processes (a fifth each by
// default), and one process alone makes only its own steps.
func TestChurnProcessesShareTheChanges(t *testing.T) {
	s, err := Parse("churn.yaml", []byte(sample.ChurnScenario(3, sample.ChurnDefault)), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, changes, skipped := generateChurn(s.Cluster.Churn, 5*time.Minute, s.Initial, len(s.Initial), false)
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
	s, err = Parse("churn.yaml", []byte(sample.ChurnScenario(3, "    rate: 2\n    processes: {services: 100%}\n")), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range s.Timeline {
		for _, a := range st.Actions {
			if _, ok := a.(*PodReadyStep); ok {
				t.Fatal("services alone made a podReady step")
			}
		}
	}
}
