package kpmetrics

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/proxysim/proxysim/sim/proxy"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// fakeSource is a backend whose mode counts the test sets.
type fakeSource struct {
	proxy.Backend
	c Counts
}

func (f *fakeSource) KubeProxyMetrics() Counts { return f.c }

func TestRegistryValues(t *testing.T) {
	r, err := New("iptables", "IPv4")
	if err != nil {
		t.Fatal(err)
	}
	b := &fakeSource{c: Counts{FullSyncs: 1, RulesTotal: map[string]int{"nat": 7}, NoLocalEndpoints: map[string]int{"internal": 1}}}
	r.ServiceChange(1)
	r.EndpointChange(true)
	r.EndpointChange(false)
	r.SyncQueued(t0.Add(500 * time.Millisecond))
	r.SyncStarted()
	r.SyncFinished(t0.Add(time.Second), t0.Add(1003*time.Millisecond), nil, []time.Duration{2 * time.Second}, b)
	b.c = Counts{FullSyncs: 1, PartialSyncs: 1, RestoreFailures: 1, PartialRestoreFailures: 1, RulesTotal: map[string]int{"nat": 9}}
	r.SyncFinished(t0.Add(2*time.Second), t0.Add(2100*time.Millisecond), errors.New("restore"), []time.Duration{time.Second}, b)
	text, err := r.Text()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`kubeproxy_sync_proxy_rules_duration_seconds_count{ip_family="IPv4"} 2`,
		`kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family="IPv4",le="0.004"} 1`,
		`kubeproxy_sync_full_proxy_rules_duration_seconds_count{ip_family="IPv4"} 1`,
		`kubeproxy_sync_partial_proxy_rules_duration_seconds_count{ip_family="IPv4"} 1`,
		`kubeproxy_network_programming_duration_seconds_count{ip_family="IPv4"} 1`, // the failed sync observes none
		`kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv4"} 1.767225601003e+09`,
		`kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds{ip_family="IPv4"} 1.7672256005e+09`,
		`kubeproxy_sync_proxy_rules_iptables_total{ip_family="IPv4",table="nat"} 9`,
		`kubeproxy_sync_proxy_rules_iptables_restore_failures_total{ip_family="IPv4"} 1`,
		`kubeproxy_sync_proxy_rules_no_local_endpoints_total{ip_family="IPv4",traffic_policy="internal"} 1`, // not reset by the failure
		`kubeproxy_sync_proxy_rules_endpoint_changes_total 2`,
		`kubeproxy_sync_proxy_rules_endpoint_changes_pending 0`,
		`kubeproxy_sync_proxy_rules_service_changes_total 1`,
	} {
		if !bytes.Contains(text, []byte(want+"\n")) {
			t.Errorf("missing %s in\n%s", want, text)
		}
	}
	if strings.Contains(string(text), "nftables") {
		t.Error("iptables registry holds nftables metrics")
	}
}

// Every name New registers has a kind, and Names lists what it gathers.
func TestNamesAndKinds(t *testing.T) {
	for _, mode := range Modes() {
		r, err := New(mode, "IPv4")
		if err != nil {
			t.Fatal(err)
		}
		b := &fakeSource{c: Counts{FullSyncs: 1, RulesTotal: map[string]int{"nat": 1}, RulesLast: map[string]int{"nat": 1}}}
		r.SyncQueued(t0)
		r.SyncFinished(t0, t0, errors.New("x"), nil, b)
		b.c.FullSyncs, b.c.PartialSyncs = 1, 1
		b.c.RestoreFailures, b.c.PartialRestoreFailures, b.c.SyncFailures, b.c.CleanupFailures = 1, 1, 1, 1
		r.SyncFinished(t0, t0, nil, []time.Duration{time.Second}, b)
		mfs, err := r.Gatherer().Gather()
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, mf := range mfs {
			if _, ok := KindOf(mf.GetName()); !ok {
				t.Errorf("%s: %s has no kind", mode, mf.GetName())
			}
			got = append(got, mf.GetName())
		}
		if !slices.Equal(got, Names(mode)) {
			t.Errorf("%s: gathered %v, Names %v", mode, got, Names(mode))
		}
	}
	if _, err := New("userspace", "IPv4"); err == nil {
		t.Error("an unknown mode was accepted")
	}
}
