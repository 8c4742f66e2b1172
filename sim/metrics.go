package sim

import (
	"time"

	discovery "k8s.io/api/discovery/v1"

	"github.com/proxysim/proxysim/sim/proxy"
)

// MetricsSink hears the instants kube-proxy updates its metrics (FACTS
// §5.3), in virtual time; sim/kpmetrics.Registry is one.
type MetricsSink interface {
	// SyncQueued: Proxier.Sync asked the runner for a run.
	SyncQueued(t time.Time)
	// ServiceChange: a Service event reached the tracker, leaving pending
	// Services with a net change.
	ServiceChange(pending int)
	// EndpointChange: a labelled slice event of the proxy's family reached
	// the tracker; changed when it changed what is pending.
	EndpointChange(changed bool)
	// SyncStarted: a sync checked the pending changes out.
	SyncStarted()
	// SyncFinished: a sync returned, with the network programming
	// observations it made and the backend that ran it.
	SyncFinished(start, end time.Time, err error, programming []time.Duration, b proxy.Backend)
}

func (w *World) metricsSlice(s *discovery.EndpointSlice, changed bool) {
	if w.cfg.Metrics == nil || string(s.AddressType) != string(w.cfg.Family) ||
		s.Name == "" || s.Labels[discovery.LabelServiceName] == "" {
		return
	}
	w.cfg.Metrics.EndpointChange(changed)
}
