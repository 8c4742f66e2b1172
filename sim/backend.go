package sim

import (
	"github.com/proxysim/proxysim/sim/proxy"
)

// RecordingBackend programs nothing: it keeps what each sync saw, for tests
// of the sync pipeline that do not care about a dataplane.
type RecordingBackend struct {
	Syncs []BackendSync
	// Fail, when set, makes the next syncs fail with this error.
	Fail error
}

// BackendSync is one sync as the backend saw it.
type BackendSync struct {
	ServicePorts, Endpoints int
	ChangedServices         int
	ChangedEndpoints        int
}

func (b *RecordingBackend) Sync(s *proxy.SyncState) error {
	n := 0
	for _, eps := range s.Endpoints {
		n += len(eps)
	}
	b.Syncs = append(b.Syncs, BackendSync{
		ServicePorts:     len(s.Services),
		Endpoints:        n,
		ChangedServices:  len(s.ServiceChanges.Updated),
		ChangedEndpoints: len(s.EndpointsChanges.Updated),
	})
	return b.Fail
}
