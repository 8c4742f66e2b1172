package upstream

// proxysim's kube-proxy metrics (sim/kpmetrics) against kube-proxy
// v1.36.3's own definitions (pkg/proxy/metrics): for each mode, kube-proxy's
// RegisterMetrics registers its metrics as its server does, and every
// metric proxysim exposes for that mode must be one kube-proxy registers,
// with the same name, type, label names and bucket boundaries. The help
// text is not compared: kube-proxy's carries its stability level
// ("[ALPHA]"), proxysim's says the clock is virtual. Nothing else is
// normalised.

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	kubeproxyconfig "k8s.io/kubernetes/pkg/proxy/apis/config"
	proxymetrics "k8s.io/kubernetes/pkg/proxy/metrics"

	"github.com/proxysim/proxysim/sim/kpmetrics"
	"github.com/proxysim/proxysim/sim/proxy"
)

const metricsModeEnv = "PROXYSIM_METRICS_MODE"

// upstreamMetrics are the metrics pkg/proxy/metrics declares. The nfacct
// collectors are left out: they are not component-base metrics, and
// RegisterMetrics registers them only when the kernel's nfacct answers.
var upstreamMetrics = []any{
	proxymetrics.SyncProxyRulesLatency, proxymetrics.SyncFullProxyRulesLatency, proxymetrics.SyncPartialProxyRulesLatency,
	proxymetrics.SyncProxyRulesLastTimestamp, proxymetrics.SyncProxyRulesLastQueuedTimestamp,
	proxymetrics.NetworkProgrammingLatency,
	proxymetrics.EndpointChangesPending, proxymetrics.EndpointChangesTotal, proxymetrics.ServiceChangesPending, proxymetrics.ServiceChangesTotal,
	proxymetrics.IPTablesRestoreFailuresTotal, proxymetrics.IPTablesPartialRestoreFailuresTotal,
	proxymetrics.IPTablesRulesTotal, proxymetrics.IPTablesRulesLastSync,
	proxymetrics.NFTablesSyncFailuresTotal, proxymetrics.NFTablesCleanupFailuresTotal,
	proxymetrics.ProxyHealthzTotal, proxymetrics.ProxyLivezTotal,
	proxymetrics.SyncProxyRulesNoLocalEndpointsTotal,
	proxymetrics.ReconcileConntrackFlowsLatency, proxymetrics.ReconcileConntrackFlowsDeletedEntriesTotal,
}

// notModelled are the metrics kube-proxy registers in a mode that proxysim
// does not expose, each with the reason; pinned, so that one appearing or
// disappearing on either side shows.
var notModelled = map[string]map[string]string{
	"ipvs": {
		"kubeproxy_proxy_healthz_total":                              "the health servers are not modelled",
		"kubeproxy_proxy_livez_total":                                "the health servers are not modelled",
		"kubeproxy_conntrack_reconciler_sync_duration_seconds":       "the conntrack reconciler is not modelled",
		"kubeproxy_conntrack_reconciler_deleted_entries_total":       "the conntrack reconciler is not modelled",
		"kubeproxy_sync_proxy_rules_no_local_endpoints_total":        "proxysim's IPVS backend does not count Local-policy services without endpoints",
		"kubeproxy_sync_proxy_rules_iptables_restore_failures_total": "the IPVS proxier's iptables rules are not modelled",
	},
	"iptables": {
		"kubeproxy_proxy_healthz_total":                        "the health servers are not modelled",
		"kubeproxy_proxy_livez_total":                          "the health servers are not modelled",
		"kubeproxy_conntrack_reconciler_sync_duration_seconds": "the conntrack reconciler is not modelled",
		"kubeproxy_conntrack_reconciler_deleted_entries_total": "the conntrack reconciler is not modelled",
	},
	"nftables": {
		"kubeproxy_proxy_healthz_total":                        "the health servers are not modelled",
		"kubeproxy_proxy_livez_total":                          "the health servers are not modelled",
		"kubeproxy_conntrack_reconciler_sync_duration_seconds": "the conntrack reconciler is not modelled",
		"kubeproxy_conntrack_reconciler_deleted_entries_total": "the conntrack reconciler is not modelled",
	},
}

// TestKubeProxyMetricsDefinitions compares the definitions mode by mode.
// kube-proxy registers its metrics once per process (RegisterMetrics runs
// under a sync.Once, for the mode its server runs), so each mode is
// checked in a child process of this test binary.
func TestKubeProxyMetricsDefinitions(t *testing.T) {
	if mode := os.Getenv(metricsModeEnv); mode != "" {
		compareMetrics(t, mode)
		return
	}
	for _, mode := range kpmetrics.Modes() {
		t.Run(mode, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestKubeProxyMetricsDefinitions$", "-test.v")
			cmd.Env = append(os.Environ(), metricsModeEnv+"="+mode)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if err != nil && !errors.As(err, &ee) {
				t.Fatal(err)
			}
			t.Logf("mode %s, in a process of its own:\n%s", mode, out)
			if err != nil || !strings.Contains(string(out), "\nPASS\n") {
				t.Fatalf("mode %s: the definitions differ (%v)", mode, err)
			}
		})
	}
}

// metricSource is a backend whose kube-proxy mode counts are set, so that
// every series of proxysim's registry exists.
type metricSource struct {
	proxy.Backend
	c kpmetrics.Counts
}

func (s *metricSource) KubeProxyMetrics() kpmetrics.Counts { return s.c }

// proxysimFamilies fills every metric of proxysim's registry for mode
// (two syncs: a full one that succeeds, a partial one that fails) and
// gathers them.
func proxysimFamilies(t *testing.T, mode string) map[string]*dto.MetricFamily {
	r, err := kpmetrics.New(mode, "IPv4")
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := &metricSource{c: kpmetrics.Counts{Mode: mode, FullSyncs: 1, RulesTotal: map[string]int{"nat": 3}, RulesLast: map[string]int{"nat": 3}, NoLocalEndpoints: map[string]int{"internal": 1}}}
	r.ServiceChange(1)
	r.EndpointChange(true)
	r.SyncQueued(t0)
	r.SyncStarted()
	r.SyncFinished(t0, t0.Add(3*time.Millisecond), nil, []time.Duration{time.Second}, b)
	b.c = kpmetrics.Counts{Mode: mode, FullSyncs: 1, PartialSyncs: 1, RestoreFailures: 1, PartialRestoreFailures: 1, SyncFailures: 1, CleanupFailures: 1,
		RulesTotal: map[string]int{"nat": 3}, RulesLast: map[string]int{"nat": 1}}
	r.SyncFinished(t0.Add(time.Second), t0.Add(time.Second+time.Millisecond), errors.New("failed"), nil, b)
	mfs, err := r.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

// upstreamName is a kube-proxy metric's full name, and whether
// RegisterMetrics registered it.
func upstreamName(m any) (string, bool) {
	switch v := m.(type) {
	case *metrics.HistogramVec:
		return metrics.BuildFQName(v.Namespace, v.Subsystem, v.Name), v.IsCreated()
	case *metrics.GaugeVec:
		return metrics.BuildFQName(v.Namespace, v.Subsystem, v.Name), v.IsCreated()
	case *metrics.CounterVec:
		return metrics.BuildFQName(v.Namespace, v.Subsystem, v.Name), v.IsCreated()
	case *metrics.Gauge:
		return metrics.BuildFQName(v.Namespace, v.Subsystem, v.Name), v.IsCreated()
	case *metrics.Counter:
		return metrics.BuildFQName(v.Namespace, v.Subsystem, v.Name), v.IsCreated()
	}
	panic(fmt.Sprintf("pkg/proxy/metrics: a %T", m))
}

// fillUpstream makes one series of kube-proxy's metric with the labels of
// proxysim's series; kube-proxy's vector refuses (panics) if its label
// names are not exactly those.
func fillUpstream(m any, labels map[string]string) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("kube-proxy's metric refuses the labels %v: %v", slices.Sorted(mapsKeys(labels)), p)
		}
	}()
	switch v := m.(type) {
	case *metrics.HistogramVec:
		v.With(labels).Observe(0.002)
	case *metrics.GaugeVec:
		v.With(labels).Set(1)
	case *metrics.CounterVec:
		v.With(labels).Inc()
	case *metrics.Gauge:
		if len(labels) > 0 {
			return fmt.Errorf("kube-proxy's metric has no labels, proxysim's %v", labels)
		}
		v.Set(1)
	case *metrics.Counter:
		if len(labels) > 0 {
			return fmt.Errorf("kube-proxy's metric has no labels, proxysim's %v", labels)
		}
		v.Inc()
	}
	return nil
}

func mapsKeys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// shape is what is compared of a metric family.
func shape(mf *dto.MetricFamily) string {
	var labels []string
	for _, l := range mf.GetMetric()[0].GetLabel() {
		labels = append(labels, l.GetName())
	}
	slices.Sort(labels)
	s := fmt.Sprintf("type %s, labels %v", mf.GetType(), labels)
	if h := mf.GetMetric()[0].GetHistogram(); h != nil {
		var bounds []float64
		for _, b := range h.GetBucket() {
			bounds = append(bounds, b.GetUpperBound())
		}
		s += fmt.Sprintf(", buckets %v", bounds)
	}
	return s
}

func compareMetrics(t *testing.T, mode string) {
	proxymetrics.RegisterMetrics(kubeproxyconfig.ProxyMode(mode))
	ours := proxysimFamilies(t, mode)
	names := kpmetrics.Names(mode)
	if len(names) == 0 {
		t.Fatalf("proxysim has no metrics for mode %s", mode)
	}
	byName := map[string]any{}
	registered := map[string]bool{}
	for _, m := range upstreamMetrics {
		n, ok := upstreamName(m)
		byName[n] = m
		registered[n] = ok
	}
	for _, n := range names {
		mf := ours[n]
		if mf == nil || len(mf.GetMetric()) == 0 {
			t.Errorf("%s: proxysim's registry has no series of it after two syncs", n)
			continue
		}
		m, ok := byName[n]
		if !ok || !registered[n] {
			t.Errorf("%s: kube-proxy v1.36.3 does not register it in mode %s", n, mode)
			continue
		}
		labels := map[string]string{}
		for _, l := range mf.GetMetric()[0].GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if err := fillUpstream(m, labels); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
	mfs, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	theirs := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		theirs[mf.GetName()] = mf
	}
	for _, n := range names {
		if ours[n] == nil || theirs[n] == nil {
			continue // reported above
		}
		if a, b := shape(ours[n]), shape(theirs[n]); a != b {
			t.Errorf("%s:\n  proxysim   %s\n  kube-proxy %s", n, a, b)
		} else {
			t.Logf("%s: %s", n, a)
		}
	}
	// What kube-proxy registers in this mode and proxysim does not expose.
	var missing []string
	for n, ok := range registered {
		if ok && !slices.Contains(names, n) {
			missing = append(missing, n)
		}
	}
	slices.Sort(missing)
	want := slices.Sorted(mapsKeys(notModelled[mode]))
	if !slices.Equal(missing, want) {
		t.Errorf("mode %s: kube-proxy registers, proxysim does not expose:\n  %v\nwant (pinned, with reasons, in notModelled):\n  %v", mode, missing, want)
	}
	for _, n := range missing {
		t.Logf("not exposed: %s (%s)", n, notModelled[mode][n])
	}
}
