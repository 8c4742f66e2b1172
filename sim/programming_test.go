package sim_test

import (
	"errors"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"github.com/proxysim/proxysim/fakes"
	"github.com/proxysim/proxysim/sim"
	"github.com/proxysim/proxysim/sim/proxy"
	"github.com/proxysim/proxysim/sim/runner"
)

// flakyBackend fails every sync while fail is set.
type flakyBackend struct{ fail bool }

func (f *flakyBackend) Sync(*proxy.SyncState) error {
	if f.fail {
		return errors.New("restore failed")
	}
	return nil
}

// kube-proxy's network programming samples: none for objects listed at
// startup, one per trigger time after a successful sync, none (and lost)
// on a failed one, and none for a Service whose slice was deleted before
// the sync.
func TestProgrammingSamples(t *testing.T) {
	be := &flakyBackend{}
	w := sim.New(t, sim.Config{Runner: runner.Config{Generation: runner.Cooldown, MinInterval: time.Second, MaxInterval: time.Hour, RetryInterval: 5 * time.Second}, Backend: be})
	svcs, slices := fakes.Cluster(2, 2)
	for i := range svcs {
		slices[i].Annotations = map[string]string{v1.EndpointsLastChangeTriggerTime: w.Clock.Now().Add(-time.Second).Format(time.RFC3339Nano)}
	}
	fakes.Start(t, w, svcs, slices)
	stamp := func(i int, at time.Time) {
		t.Helper()
		o, err := w.Get("EndpointSlice", [2]string{slices[i].Namespace, slices[i].Name})
		if err != nil {
			t.Fatal(err)
		}
		s := o.(*discovery.EndpointSlice).DeepCopy()
		s.Annotations[v1.EndpointsLastChangeTriggerTime] = at.UTC().Format(time.RFC3339Nano)
		if err := w.Update(s); err != nil {
			t.Fatal(err)
		}
	}
	w.Advance(10 * time.Second)
	if n := len(w.ProgrammingSamples()); n != 0 {
		t.Fatalf("%d samples from the startup list", n)
	}
	// A change at 10.2s triggered at 10s: the sync runs at once (the
	// cooldown has long ended) and ends at 10.2s.
	trig := w.Clock.Now()
	w.Advance(200 * time.Millisecond)
	stamp(0, trig)
	w.Advance(time.Second)
	got := w.ProgrammingSamples()
	if len(got) != 1 || got[0].Value != 200*time.Millisecond {
		t.Fatalf("samples %+v, want one of 200ms", got)
	}
	// A failed sync loses its trigger times: the retry observes nothing.
	be.fail = true
	stamp(1, w.Clock.Now())
	w.Advance(2 * time.Second)
	be.fail = false
	w.Advance(10 * time.Second)
	if n := len(w.ProgrammingSamples()); n != 1 {
		t.Fatalf("%d samples after a failed sync and its retry, want still 1", n)
	}
	// A slice updated then deleted before the sync: the deletion drops the
	// Service's pending times. Another Service's change just before starts
	// the cooldown that holds them.
	w.Advance(500 * time.Millisecond)
	stamp(1, w.Clock.Now())
	w.Advance(100 * time.Millisecond)
	stamp(0, w.Clock.Now())
	if err := w.Delete("EndpointSlice", slices[0].Namespace, slices[0].Name); err != nil {
		t.Fatal(err)
	}
	w.Advance(5 * time.Second)
	if got := w.ProgrammingSamples(); len(got) != 2 || got[1].Value != 0 {
		t.Fatalf("samples %+v after an update and delete, want the other Service's only", got)
	}
}
