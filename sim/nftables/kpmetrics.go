package nftables

import "github.com/proxysim/proxysim/sim/kpmetrics"

// KubeProxyMetrics hands the proxier's exact metric values to the replay's
// Prometheus registry (sim/kpmetrics), which reads them after every sync.
func (p *Proxier) KubeProxyMetrics() kpmetrics.Counts {
	m := p.metrics
	return kpmetrics.Counts{
		Mode:             "nftables",
		SyncFailures:     m.SyncFailures,
		CleanupFailures:  m.CleanupFailures,
		FullSyncs:        m.FullSyncs,
		PartialSyncs:     m.PartialSyncs,
		NoLocalEndpoints: map[string]int{"internal": m.NoLocalEndpointsInternal, "external": m.NoLocalEndpointsExternal},
	}
}
