package sim

import (
	"github.com/proxysim/proxysim/sim/proxy"
)

// RecordingBackend programs nothing: it keeps what each sync saw, for tests
// of the sync pipeline that do not care about a dataplane.
type RecordingBackend struct {
	Syncs []SyncRecord
	// Fail, when set, makes the next syncs fail with this error.
	Fail error
}

// SyncRecord is one sync as the backend saw it.
type SyncRecord struct {
	ServicePorts, Endpoints int
	ChangedServices         int
	ChangedEndpoints        int
}

func (b *RecordingBackend) Sync(s *proxy.SyncState) error {
	n := 0
	for _, eps := range s.Endpoints {
		n += len(eps)
	}
	b.Syncs = append(b.Syncs, SyncRecord{
		ServicePorts:     len(s.Services),
		Endpoints:        n,
		ChangedServices:  len(s.ServiceChanges.Updated),
		ChangedEndpoints: len(s.EndpointsChanges.Updated),
	})
	return b.Fail
}
