package realcp

import (
	"testing"

	"github.com/proxysim/proxysim/e2e/transcript"
	"github.com/proxysim/proxysim/scenarios"
)

func mustRecord(t *testing.T, s *scenarios.Scenario) *transcript.Transcript {
	t.Helper()
	tr, err := transcript.Record(s)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// TestMetricsAddUpOverRestarts: a restarted kube-proxy's counters and
// histogram counts start from zero, so they are summed over its
// processes; a gauge is the last process's.
func TestMetricsAddUpOverRestarts(t *testing.T) {
	before := `# TYPE kubeproxy_sync_proxy_rules_service_changes_total counter
kubeproxy_sync_proxy_rules_service_changes_total 3
# TYPE kubeproxy_sync_proxy_rules_endpoint_changes_pending gauge
kubeproxy_sync_proxy_rules_endpoint_changes_pending 2
# TYPE kubeproxy_sync_full_proxy_rules_duration_seconds histogram
kubeproxy_sync_full_proxy_rules_duration_seconds_bucket{le="+Inf"} 1
kubeproxy_sync_full_proxy_rules_duration_seconds_sum 0.1
kubeproxy_sync_full_proxy_rules_duration_seconds_count 1
`
	after := `# TYPE kubeproxy_sync_proxy_rules_service_changes_total counter
kubeproxy_sync_proxy_rules_service_changes_total 1
# TYPE kubeproxy_sync_proxy_rules_endpoint_changes_pending gauge
kubeproxy_sync_proxy_rules_endpoint_changes_pending 0
# TYPE kubeproxy_sync_full_proxy_rules_duration_seconds histogram
kubeproxy_sync_full_proxy_rules_duration_seconds_bucket{le="+Inf"} 1
kubeproxy_sync_full_proxy_rules_duration_seconds_sum 0.2
kubeproxy_sync_full_proxy_rules_duration_seconds_count 1
`
	got, err := seriesOfProcesses([]string{before, after})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		"kubeproxy_sync_proxy_rules_service_changes_total{}":       4,
		"kubeproxy_sync_proxy_rules_endpoint_changes_pending{}":    0,
		"kubeproxy_sync_full_proxy_rules_duration_seconds{} count": 2,
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %v, want %v", k, got[k], v)
		}
	}
}

// TestRestartStoriesRestart: the package's restart stories load, and
// their transcripts hold the restart the replay must perform.
func TestRestartStoriesRestart(t *testing.T) {
	for _, c := range realCases {
		if c.file == "" {
			continue
		}
		s, err := c.load()
		if err != nil {
			t.Fatal(err)
		}
		if s.Name != c.scenario {
			t.Errorf("%s holds scenario %q, the case names %q", c.file, s.Name, c.scenario)
		}
		steps, err := replaySteps(mustRecord(t, s), false)
		if err != nil {
			t.Fatal(err)
		}
		restarts := 0
		for _, st := range steps {
			if st.Action != nil && st.Action.Restart {
				restarts++
			}
		}
		if restarts != 1 {
			t.Errorf("%s: %d restarts in the replay, want 1", c.scenario, restarts)
		}
	}
}
