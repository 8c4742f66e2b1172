// Package kpmetrics is kube-proxy's metrics registry for one replay, filled
// in virtual time.
//
// Names, types, labels and buckets are kube-proxy v1.36.3's (kubernetes
// pkg/proxy/metrics/metrics.go, RegisterMetrics and the variables it
// registers; FACTS §5), re-declared here with the Prometheus client on a
// registry of the replay's own: kube-proxy's package cannot be reused (it
// registers globally and reads the wall clock). The world (sim.MetricsSink)
// calls the registry at the instants kube-proxy updates each metric, so
// every timestamp and duration is a virtual-clock value and the exposition
// is the same on every run.
package kpmetrics

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/proxysim/proxysim/sim/proxy"
)

// Counts are a mode proxier's own metrics as exact values, read after each
// sync; Source is implemented by the iptables and nftables proxiers.
type Counts struct {
	Mode                                    string // "iptables" or "nftables"
	RestoreFailures, PartialRestoreFailures int    // iptables
	SyncFailures, CleanupFailures           int    // nftables
	FullSyncs, PartialSyncs                 int
	RulesTotal, RulesLast                   map[string]int // iptables, by table
	NoLocalEndpoints                        map[string]int // by traffic_policy
}

// Source is a backend that keeps kube-proxy's mode metrics.
type Source interface{ KubeProxyMetrics() Counts }

// Names lists the metric names each mode registers (FACTS §5.1), those this
// package fills. The healthz/livez counters, the conntrack reconciler pair
// and the nfacct collectors are not modelled.
var common = []string{
	"kubeproxy_sync_proxy_rules_duration_seconds",
	"kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds",
	"kubeproxy_sync_proxy_rules_last_timestamp_seconds",
	"kubeproxy_sync_proxy_rules_endpoint_changes_pending",
	"kubeproxy_sync_proxy_rules_endpoint_changes_total",
	"kubeproxy_sync_proxy_rules_service_changes_pending",
	"kubeproxy_sync_proxy_rules_service_changes_total",
	"kubeproxy_network_programming_duration_seconds",
}

var perMode = map[string][]string{
	"ipvs": nil,
	"iptables": {
		"kubeproxy_sync_full_proxy_rules_duration_seconds",
		"kubeproxy_sync_partial_proxy_rules_duration_seconds",
		"kubeproxy_sync_proxy_rules_iptables_restore_failures_total",
		"kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total",
		"kubeproxy_sync_proxy_rules_iptables_total",
		"kubeproxy_sync_proxy_rules_iptables_last",
		"kubeproxy_sync_proxy_rules_no_local_endpoints_total",
	},
	"nftables": {
		"kubeproxy_sync_full_proxy_rules_duration_seconds",
		"kubeproxy_sync_partial_proxy_rules_duration_seconds",
		"kubeproxy_sync_proxy_rules_nftables_sync_failures_total",
		"kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total",
		"kubeproxy_sync_proxy_rules_no_local_endpoints_total",
	},
}

// Names lists the metric names a mode's registry holds, sorted; nil for a
// mode this package does not know.
func Names(mode string) []string {
	extra, ok := perMode[mode]
	if !ok {
		return nil
	}
	out := append(append([]string(nil), common...), extra...)
	slices.Sort(out)
	return out
}

// Modes lists the modes Names knows.
func Modes() []string { return slices.Sorted(maps.Keys(perMode)) }

// syncBuckets are ExponentialBuckets(0.001, 2, 15) (metrics.go
// SyncProxyRulesLatency and friends).
var syncBuckets = prometheus.ExponentialBuckets(0.001, 2, 15)

// ProgrammingBuckets are NetworkProgrammingLatency's bounds: 0, 0.25, 0.5,
// 1..59 by 1, 60..115 by 5, 120..300 by 30 (component-base MergeBuckets).
var ProgrammingBuckets = func() []float64 {
	b := []float64{0, 0.25, 0.5}
	for s := 1; s <= 59; s++ {
		b = append(b, float64(s))
	}
	for s := 60; s <= 115; s += 5 {
		b = append(b, float64(s))
	}
	for s := 120; s <= 300; s += 30 {
		b = append(b, float64(s))
	}
	return b
}()

// Registry is one replay's kube-proxy metrics.
type Registry struct {
	reg    *prometheus.Registry
	mode   string
	family string

	syncDur, fullDur, partialDur, progDur    *prometheus.HistogramVec
	lastTS, queuedTS                         *prometheus.GaugeVec
	epPending, svcPending                    prometheus.Gauge
	epTotal, svcTotal                        prometheus.Counter
	restoreFail, partialFail, nftFail, clean *prometheus.CounterVec
	rulesTotal, rulesLast, noLocal           *prometheus.GaugeVec

	// last is the mode counts after the previous sync, and from the backend
	// that reported them: counters grow by the difference.
	last     Counts
	lastFrom proxy.Backend
}

// New builds the registry of a mode ("ipvs", "iptables", "nftables") for
// one IP family ("IPv4" or "IPv6", the ip_family label).
func New(mode, family string) (*Registry, error) {
	if _, ok := perMode[mode]; !ok {
		return nil, fmt.Errorf("kube-proxy metrics: unknown mode %q", mode)
	}
	r := &Registry{reg: prometheus.NewRegistry(), mode: mode, family: family}
	hist := func(name, help string, buckets []float64) *prometheus.HistogramVec {
		h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: "kubeproxy", Name: name, Help: help, Buckets: buckets}, []string{"ip_family"})
		r.reg.MustRegister(h)
		return h
	}
	gaugeVec := func(name, help string, labels ...string) *prometheus.GaugeVec {
		g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: "kubeproxy", Name: name, Help: help}, labels)
		r.reg.MustRegister(g)
		return g
	}
	counterVec := func(name, help string) *prometheus.CounterVec {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: "kubeproxy", Name: name, Help: help}, []string{"ip_family"})
		r.reg.MustRegister(c)
		return c
	}
	r.syncDur = hist("sync_proxy_rules_duration_seconds", "SyncProxyRules latency in seconds (virtual time)", syncBuckets)
	r.progDur = hist("network_programming_duration_seconds", "In Cluster Network Programming Latency in seconds (virtual time)", ProgrammingBuckets)
	r.lastTS = gaugeVec("sync_proxy_rules_last_timestamp_seconds", "The last time proxy rules were successfully synced (virtual clock)", "ip_family")
	r.queuedTS = gaugeVec("sync_proxy_rules_last_queued_timestamp_seconds", "The last time a sync of proxy rules was queued (virtual clock)", "ip_family")
	r.epPending = prometheus.NewGauge(prometheus.GaugeOpts{Subsystem: "kubeproxy", Name: "sync_proxy_rules_endpoint_changes_pending", Help: "Pending proxy rules Endpoint changes"})
	r.svcPending = prometheus.NewGauge(prometheus.GaugeOpts{Subsystem: "kubeproxy", Name: "sync_proxy_rules_service_changes_pending", Help: "Pending proxy rules Service changes"})
	r.epTotal = prometheus.NewCounter(prometheus.CounterOpts{Subsystem: "kubeproxy", Name: "sync_proxy_rules_endpoint_changes_total", Help: "Cumulative proxy rules Endpoint changes"})
	r.svcTotal = prometheus.NewCounter(prometheus.CounterOpts{Subsystem: "kubeproxy", Name: "sync_proxy_rules_service_changes_total", Help: "Cumulative proxy rules Service changes"})
	r.reg.MustRegister(r.epPending, r.svcPending, r.epTotal, r.svcTotal)
	switch mode {
	case "iptables", "nftables":
		r.fullDur = hist("sync_full_proxy_rules_duration_seconds", "SyncProxyRules latency in seconds for full resyncs (virtual time)", syncBuckets)
		r.partialDur = hist("sync_partial_proxy_rules_duration_seconds", "SyncProxyRules latency in seconds for partial resyncs (virtual time)", syncBuckets)
		r.noLocal = gaugeVec("sync_proxy_rules_no_local_endpoints_total", "Number of services with a Local traffic policy and no endpoints", "traffic_policy", "ip_family")
	}
	switch mode {
	case "iptables":
		r.restoreFail = counterVec("sync_proxy_rules_iptables_restore_failures_total", "Cumulative proxy iptables restore failures")
		r.partialFail = counterVec("sync_proxy_rules_iptables_partial_restore_failures_total", "Cumulative proxy iptables partial restore failures")
		r.rulesTotal = gaugeVec("sync_proxy_rules_iptables_total", "Total number of iptables rules owned by kube-proxy", "table", "ip_family")
		r.rulesLast = gaugeVec("sync_proxy_rules_iptables_last", "Number of iptables rules written by kube-proxy in last sync", "table", "ip_family")
	case "nftables":
		r.nftFail = counterVec("sync_proxy_rules_nftables_sync_failures_total", "Cumulative proxy nftables sync failures")
		r.clean = counterVec("sync_proxy_rules_nftables_cleanup_failures_total", "Cumulative proxy nftables cleanup failures")
	}
	return r, nil
}

// Gatherer is the registry, for expositions and checks.
func (r *Registry) Gatherer() prometheus.Gatherer { return r.reg }

// Text is the text exposition format of every metric, sorted by name and
// labels as the client library sorts them.
func (r *Registry) Text() ([]byte, error) {
	mfs, err := r.reg.Gather()
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	enc := expfmt.NewEncoder(&b, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			return nil, err
		}
	}
	return b.Bytes(), nil
}

func unix(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// SyncQueued is Proxier.Sync: a sync was requested at t.
func (r *Registry) SyncQueued(t time.Time) { r.queuedTS.WithLabelValues(r.family).Set(unix(t)) }

// ServiceChange is one Service event handed to the tracker; pending is the
// number of Services with a net change after it
// (servicechangetracker.go Update).
func (r *Registry) ServiceChange(pending int) {
	r.svcTotal.Inc()
	r.svcPending.Set(float64(pending))
}

// EndpointChange is one EndpointSlice event of the tracker's family with a
// service-name label; changed when it changed the pending state
// (endpointschangetracker.go EndpointSliceUpdate).
func (r *Registry) EndpointChange(changed bool) {
	r.epTotal.Inc()
	if changed {
		r.epPending.Inc()
	}
}

// SyncStarted is the checkout of pending changes at the start of a sync
// (ServicePortMap.Update, EndpointsMap.Update).
func (r *Registry) SyncStarted() {
	r.svcPending.Set(0)
	r.epPending.Set(0)
}

// SyncFinished is the end of syncProxyRules: the duration histograms
// (deferred, success or failure), the mode's counters and gauges, then,
// on success, the programming samples and last_timestamp.
func (r *Registry) SyncFinished(start, end time.Time, err error, programming []time.Duration, b proxy.Backend) {
	d := end.Sub(start).Seconds()
	r.syncDur.WithLabelValues(r.family).Observe(d)
	if s, ok := b.(Source); ok && r.fullDur != nil {
		c := s.KubeProxyMetrics()
		prev := r.last
		if r.lastFrom != b {
			prev = Counts{} // a restarted proxy: a new process, fresh counts
		}
		r.last, r.lastFrom = c, b
		if c.FullSyncs > prev.FullSyncs {
			r.fullDur.WithLabelValues(r.family).Observe(d)
		} else if c.PartialSyncs > prev.PartialSyncs {
			r.partialDur.WithLabelValues(r.family).Observe(d)
		}
		add := func(v *prometheus.CounterVec, now, before int) {
			if v != nil && now > before {
				v.WithLabelValues(r.family).Add(float64(now - before))
			}
		}
		add(r.restoreFail, c.RestoreFailures, prev.RestoreFailures)
		add(r.partialFail, c.PartialRestoreFailures, prev.PartialRestoreFailures)
		add(r.nftFail, c.SyncFailures, prev.SyncFailures)
		add(r.clean, c.CleanupFailures, prev.CleanupFailures)
		for _, t := range slices.Sorted(maps.Keys(c.RulesTotal)) {
			if r.rulesTotal == nil {
				break
			}
			r.rulesTotal.WithLabelValues(t, r.family).Set(float64(c.RulesTotal[t]))
		}
		for _, t := range slices.Sorted(maps.Keys(c.RulesLast)) {
			if r.rulesLast == nil {
				break
			}
			r.rulesLast.WithLabelValues(t, r.family).Set(float64(c.RulesLast[t]))
		}
		if err == nil {
			for _, p := range []string{"internal", "external"} {
				r.noLocal.WithLabelValues(p, r.family).Set(float64(c.NoLocalEndpoints[p]))
			}
		}
	}
	if err != nil {
		return
	}
	for _, v := range programming {
		r.progDur.WithLabelValues(r.family).Observe(v.Seconds())
	}
	r.lastTS.WithLabelValues(r.family).Set(unix(end))
}

// Kind is a metric's type and label names, as registered.
type Kind struct {
	Histogram bool
	Labels    []string
}

var kinds = func() map[string]Kind {
	fam := []string{"ip_family"}
	k := map[string]Kind{
		"kubeproxy_sync_proxy_rules_endpoint_changes_pending": {},
		"kubeproxy_sync_proxy_rules_endpoint_changes_total":   {},
		"kubeproxy_sync_proxy_rules_service_changes_pending":  {},
		"kubeproxy_sync_proxy_rules_service_changes_total":    {},
		"kubeproxy_sync_proxy_rules_iptables_total":           {Labels: []string{"ip_family", "table"}},
		"kubeproxy_sync_proxy_rules_iptables_last":            {Labels: []string{"ip_family", "table"}},
		"kubeproxy_sync_proxy_rules_no_local_endpoints_total": {Labels: []string{"ip_family", "traffic_policy"}},
	}
	for _, n := range []string{
		"kubeproxy_sync_proxy_rules_duration_seconds", "kubeproxy_sync_full_proxy_rules_duration_seconds",
		"kubeproxy_sync_partial_proxy_rules_duration_seconds", "kubeproxy_network_programming_duration_seconds",
	} {
		k[n] = Kind{Histogram: true, Labels: fam}
	}
	for _, n := range []string{
		"kubeproxy_sync_proxy_rules_last_timestamp_seconds", "kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds",
		"kubeproxy_sync_proxy_rules_iptables_restore_failures_total", "kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total",
		"kubeproxy_sync_proxy_rules_nftables_sync_failures_total", "kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total",
	} {
		k[n] = Kind{Labels: fam}
	}
	return k
}()

// KindOf reports a metric's type and labels; false for a name no mode
// registers here.
func KindOf(name string) (Kind, bool) {
	k, ok := kinds[name]
	return k, ok
}
