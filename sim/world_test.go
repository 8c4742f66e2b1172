package sim_test

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/proxysim/proxysim/fakes"
	"github.com/proxysim/proxysim/sim"
	"github.com/proxysim/proxysim/sim/runner"
	"github.com/proxysim/proxysim/sim/trace"
)

func kinds(w *sim.World, kind string) []trace.Event {
	var out []trace.Event
	for _, e := range w.Trace.Events() {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

func starts(w *sim.World) string {
	var s []string
	for _, e := range kinds(w, trace.Start) {
		s = append(s, fmt.Sprintf("%v %s", e.At, e.Why))
	}
	return strings.Join(s, ", ")
}

func TestInitialSyncWaitsForBothInformers(t *testing.T) {
	be := &sim.RecordingBackend{}
	w := sim.New(t, sim.Config{Runner: runner.Config{Generation: runner.Cooldown, MinInterval: time.Second, MaxInterval: time.Hour}, Backend: be})
	svcs, slices := fakes.Cluster(3, 2)
	fakes.Start(t, w, svcs, slices)
	w.Advance(time.Minute)
	if got := starts(w); got != "0s initial" {
		t.Fatalf("runs: %s", got)
	}
	if n := len(kinds(w, trace.Request)); n != 0 {
		t.Fatalf("%d Run() requests before initialization; want none", n)
	}
	ev := w.Trace.Events()
	var syncedSeen int
	for _, e := range ev {
		if e.Kind == trace.Synced {
			syncedSeen++
		}
		if e.Kind == trace.Start && syncedSeen != 2 {
			t.Fatalf("sync started after %d of 2 informers synced", syncedSeen)
		}
	}
	if len(be.Syncs) != 1 || be.Syncs[0].ServicePorts != 3 || be.Syncs[0].Endpoints != 6 {
		t.Fatalf("backend saw %+v; want one sync of 3 service ports and 6 endpoints", be.Syncs)
	}
}

// burst applies 100 EndpointSlice updates within 200ms, starting at 1s.
func burst(t *testing.T, gen runner.Generation) *sim.World {
	w := sim.New(t, sim.Config{Runner: runner.Config{Generation: gen, MinInterval: time.Second, MaxInterval: 30 * time.Second}})
	svcs, slices := fakes.Cluster(1, 1)
	if err := w.Create(svcs[0]); err != nil {
		t.Fatal(err)
	}
	if err := w.Create(slices[0]); err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		at := time.Second + time.Duration(i)*2*time.Millisecond
		addr := fmt.Sprintf("10.128.1.%d", i+2)
		w.At(at, func() {
			s := fakes.EndpointSlice("default", slices[0].Name, svcs[0].Name, 8080, addr)
			if err := w.Update(s); err != nil {
				t.Error(err)
			}
		})
	}
	w.RunUntil(40 * time.Second)
	return w
}

func TestBurstOfSliceUpdatesBurstGeneration(t *testing.T) {
	w := burst(t, runner.Burst)
	// Two tokens go at 1s and 1.002s; the other 98 updates coalesce into one
	// run minInterval after the last completion; then the periodic run.
	want := "0s initial, 1s request, 1.002s request, 2.002s deferred, 32.002s periodic"
	if got := starts(w); got != want {
		t.Fatalf("runs:\n got  %s\n want %s", got, want)
	}
}

func TestBurstOfSliceUpdatesCooldownGeneration(t *testing.T) {
	w := burst(t, runner.Cooldown)
	// One run at once, the other 99 updates collapse into one run when the
	// cooldown ends; the periodic run is maxInterval after that completion.
	want := "0s initial, 1s request, 2s request, 32s periodic"
	if got := starts(w); got != want {
		t.Fatalf("runs:\n got  %s\n want %s", got, want)
	}
}

func TestResyncDeliversNoOpUpdatesThatRequestNoSync(t *testing.T) {
	be := &sim.RecordingBackend{}
	w := sim.New(t, sim.Config{Runner: runner.Config{Generation: runner.Cooldown, MinInterval: time.Second, MaxInterval: time.Hour}, Backend: be})
	svcs, slices := fakes.Cluster(2, 3)
	fakes.Start(t, w, svcs, slices)
	w.RunUntil(31 * time.Minute)
	if n := len(kinds(w, trace.Resync)); n != 8 {
		t.Fatalf("resync events = %d; want 2 resyncs x 4 objects", n)
	}
	if n := len(kinds(w, trace.Request)); n != 0 {
		t.Fatalf("resync requested %d syncs; want none", n)
	}
	if got := starts(w); got != "0s initial" {
		t.Fatalf("runs: %s", got)
	}
}

func TestRealChangeAfterStartRequestsSync(t *testing.T) {
	be := &sim.RecordingBackend{}
	w := sim.New(t, sim.Config{Runner: runner.Config{Generation: runner.Cooldown, MinInterval: time.Second, MaxInterval: time.Hour}, Backend: be})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	svcs, slices := fakes.Cluster(1, 2)
	w.At(5*time.Second, func() {
		if err := w.Create(svcs[0]); err != nil {
			t.Error(err)
		}
	})
	w.At(5500*time.Millisecond, func() {
		if err := w.Create(slices[0]); err != nil {
			t.Error(err)
		}
	})
	w.At(10*time.Second, func() {
		if err := w.Delete("EndpointSlice", "default", slices[0].Name); err != nil {
			t.Error(err)
		}
	})
	w.RunUntil(20 * time.Second)
	if got, want := starts(w), "0s initial, 5s request, 6s request, 10s request"; got != want {
		t.Fatalf("runs:\n got  %s\n want %s", got, want)
	}
	last := be.Syncs[len(be.Syncs)-1]
	if last.Endpoints != 0 || be.Syncs[2].Endpoints != 2 {
		t.Fatalf("syncs %+v", be.Syncs)
	}
}

func replay(t *testing.T) []byte {
	w, err := sim.NewWorld(sim.Config{
		Runner:       runner.Config{Generation: runner.Burst, MinInterval: time.Second, MaxInterval: 10 * time.Second},
		Cost:         sim.CostModel{Fixed: 100 * time.Millisecond, PerEndpoint: time.Millisecond},
		ResyncPeriod: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	svcs, slices := fakes.Cluster(5, 3)
	fakes.Start(t, w, svcs, slices)
	for i := 0; i < 40; i++ {
		i := i
		w.At(time.Duration(i)*170*time.Millisecond, func() {
			s := slices[i%5].DeepCopy()
			s.Endpoints = s.Endpoints[:1+i%3]
			if err := w.Update(s); err != nil {
				t.Error(err)
			}
		})
	}
	w.RunUntil(3 * time.Minute)
	return w.Trace.JSONL()
}

func TestReplayIsByteIdentical(t *testing.T) {
	n := 100
	if testing.Short() {
		n = 10
	}
	want := replay(t)
	prev := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(prev)
	for i := 0; i < n; i++ {
		runtime.GOMAXPROCS(1 + i%2)
		if got := replay(t); !bytes.Equal(got, want) {
			t.Fatalf("replay %d (GOMAXPROCS %d) differs:\n%s\nvs\n%s", i, 1+i%2, got, want)
		}
	}
}

// Like the API server, the world does not write an update that changes
// nothing: no event reaches the proxy.
func TestNoOpUpdateSendsNoEvent(t *testing.T) {
	w := sim.New(t, sim.Config{Runner: runner.Config{Generation: runner.Cooldown, MinInterval: time.Second, MaxInterval: time.Hour}})
	svcs, slices := fakes.Cluster(1, 2)
	if err := w.Create(svcs[0]); err != nil {
		t.Fatal(err)
	}
	if err := w.Create(slices[0]); err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	before := len(kinds(w, trace.Object))
	w.At(time.Second, func() {
		if err := w.Update(slices[0]); err != nil {
			t.Error(err)
		}
	})
	w.RunUntil(2 * time.Second)
	if n := len(kinds(w, trace.Object)); n != before {
		t.Fatalf("a no-op update delivered %d events", n-before)
	}
}

// SyncNow syncs at once, outside the runner; a run in progress (one with a
// cost) ends first and the direct sync follows at that instant. Before
// the informers have synced it does nothing.
func TestSyncNowRunsDirectlyAfterARunInProgress(t *testing.T) {
	be := &sim.RecordingBackend{}
	w := sim.New(t, sim.Config{
		Runner:  runner.Config{Generation: runner.Cooldown, MinInterval: time.Second, MaxInterval: time.Hour},
		Cost:    sim.CostModel{Fixed: 2 * time.Second},
		Backend: be,
	})
	w.SyncNow("early") // not started: nothing synced yet
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	svcs, slices := fakes.Cluster(1, 2)
	w.At(5*time.Second, func() {
		if err := w.Create(svcs[0]); err != nil {
			t.Error(err)
		}
	})
	w.At(6*time.Second, func() { w.SyncNow("forced") }) // the 5s run lasts until 7s
	w.At(20*time.Second, func() {
		if err := w.Create(slices[0]); err != nil {
			t.Error(err)
		}
		w.SyncNow("forced") // the slice's run started at once and lasts until 22s
	})
	w.At(25*time.Second, func() { w.SyncNow("forced") }) // nothing running: at once
	w.RunUntil(30 * time.Second)
	if got, want := starts(w), "0s initial, 5s request, 7s forced, 20s request, 22s forced, 25s forced"; got != want {
		t.Fatalf("runs:\n got  %s\n want %s", got, want)
	}
	if n := len(be.Syncs); n != 6 || be.Syncs[5].Endpoints != 2 {
		t.Fatalf("syncs %+v", be.Syncs)
	}
}
