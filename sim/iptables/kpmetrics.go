package iptables

import "github.com/proxysim/proxysim/sim/kpmetrics"

// KubeProxyMetrics hands the proxier's exact metric values to the replay's
// Prometheus registry (sim/kpmetrics), which reads them after every sync.
func (p *Proxier) KubeProxyMetrics() kpmetrics.Counts {
	m := p.metrics.clone()
	return kpmetrics.Counts{
		Mode:                   "iptables",
		RestoreFailures:        m.RestoreFailures,
		PartialRestoreFailures: m.PartialRestoreFailures,
		FullSyncs:              m.FullSyncs,
		PartialSyncs:           m.PartialSyncs,
		RulesTotal:             m.RulesTotal,
		RulesLast:              m.RulesLast,
		NoLocalEndpoints:       m.NoLocalEndpoints,
	}
}
