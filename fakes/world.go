package fakes

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"github.com/proxysim/proxysim/sim"
)

// Start creates each Service and then its slice in w, and starts the
// world: the set-up of a test that syncs a ready-made cluster (Cluster's).
func Start(tb testing.TB, w *sim.World, svcs []*v1.Service, slices []*discovery.EndpointSlice) {
	tb.Helper()
	for i := range svcs {
		if err := w.Create(svcs[i]); err != nil {
			tb.Fatal(err)
		}
		if err := w.Create(slices[i]); err != nil {
			tb.Fatal(err)
		}
	}
	if err := w.Start(); err != nil {
		tb.Fatal(err)
	}
}
