package transcript

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/proxysim/proxysim/scenarios"
	_ "github.com/proxysim/proxysim/scenarios/controllers"
	_ "github.com/proxysim/proxysim/scenarios/iptablesmode"
	_ "github.com/proxysim/proxysim/scenarios/ipvsmode"
)

func record(t *testing.T, name string) *Transcript {
	t.Helper()
	s, err := scenarios.LoadLibrary(name)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := Record(s)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// TestRecord: cooldown-v1.34's churn is ten slice updates 20 ms apart
// from 1 s, its syncs those the scenario expects, each with a dataplane.
func TestRecord(t *testing.T) {
	tr := record(t, "cooldown-v1.34")
	if len(tr.Writes) != 10 || len(tr.Script) != 10 {
		t.Fatalf("want 10 writes, got %d (script %d)", len(tr.Writes), len(tr.Script))
	}
	for i, w := range tr.Writes {
		if want := time.Second + time.Duration(i)*20*time.Millisecond; w.At != want || w.Op != "update" || w.Kind != "EndpointSlice" {
			t.Errorf("write %d: %v %s %s, want %v update EndpointSlice", i, w.At, w.Op, w.Kind, want)
		}
	}
	var at []time.Duration
	for _, s := range tr.Syncs {
		at = append(at, s.Start)
		if !strings.Contains(s.Dataplane, "10.96.0.10:80") {
			t.Errorf("sync at %v: no virtual server in its dataplane:\n%s", s.Start, s.Dataplane)
		}
	}
	if want := []time.Duration{0, time.Second, 2 * time.Second, 32 * time.Second}; len(at) != len(want) || at[0] != want[0] || at[1] != want[1] || at[2] != want[2] || at[3] != want[3] {
		t.Errorf("syncs at %v, want %v", at, want)
	}
	if len(tr.Unsupported) != 0 {
		t.Errorf("nothing should be unsupported: %v", tr.Unsupported)
	}
	if u := record(t, "upstream-runner/v1.36-retry").Unsupported; len(u) == 0 || !strings.Contains(strings.Join(u, ";"), `step "run"`) {
		t.Errorf("direct runner calls must be listed as unsupported, got %v", u)
	}
}

// heard is a Target whose "proxy" is one EndpointSlice informer noting
// when it heard each update.
type heard struct {
	mu sync.Mutex
	at []time.Duration
	t0 time.Time
}

func (h *heard) Fail(int) {}

func (h *heard) Start(ctx context.Context, client kubernetes.Interface) (func(), error) {
	f := informers.NewSharedInformerFactory(client, 0)
	inf := f.Discovery().V1().EndpointSlices().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(_, _ any) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.at = append(h.at, time.Since(h.t0))
	}}); err != nil {
		return nil, err
	}
	f.Start(ctx.Done())
	return f.Shutdown, nil
}

// TestDrive: in a bubble, every write reaches an informer at its own
// virtual instant, and Drive ends at the scenario's length with nothing
// left running (synctest.Test would panic otherwise).
func TestDrive(t *testing.T) {
	tr := record(t, "cooldown-v1.34")
	synctest.Test(t, func(t *testing.T) {
		h := &heard{t0: time.Now()}
		if err := tr.Drive(h); err != nil {
			t.Fatal(err)
		}
		if len(h.at) != len(tr.Writes) {
			t.Fatalf("heard %d updates, want %d", len(h.at), len(tr.Writes))
		}
		for i, w := range tr.Writes {
			if h.at[i] != w.At {
				t.Errorf("update %d heard at %v, written at %v", i, h.at[i], w.At)
			}
		}
		if end := time.Since(h.t0); end != tr.Scenario.Length() {
			t.Errorf("Drive ended at %v, want the scenario's length %v", end, tr.Scenario.Length())
		}
	})
}

// TestRetoldForeignStep: an IPVS scenario retold for iptables whose first
// foreign step is a client connection is refused with that step named,
// before anything replays; the same scenario in its own mode records.
func TestRetoldForeignStep(t *testing.T) {
	s, err := scenarios.LoadLibrary("kernel-suite/graceful-termination")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Record(s); err != nil {
		t.Fatalf("in its own mode: %v", err)
	}
	_, err = Record(AsIPTables(s))
	want := `step "connect" (first at 1s) is the ipvs mode's own, on its dataplane; the iptables mode has none`
	if err == nil || err.Error() != want {
		t.Fatalf("retold: got %v, want %q", err, want)
	}
}

// TestRetoldForeignFault: a fault step whose fault is the IPVS mode's own
// (failing dataplane operations) is refused by its key.
func TestRetoldForeignFault(t *testing.T) {
	s, err := scenarios.LoadLibrary("ipvs-error-is-not-a-failure")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Record(AsIPTables(s))
	if err == nil || !strings.Contains(err.Error(), `step "fault.dataplaneOps"`) || !strings.Contains(err.Error(), "is the ipvs mode's own") {
		t.Fatalf("retold: got %v", err)
	}
}

// TestRecordPods: with Options.Pods a controller story's Pod writes are
// kept apart from the proxy's (the label change at 10s), the slice writes
// name proxysim's controller as their writer, and recording them changes
// nothing else.
func TestRecordPods(t *testing.T) {
	s, err := scenarios.LoadLibrary("iptables-pod-label-change")
	if err != nil {
		t.Fatal(err)
	}
	plain, err := Record(s)
	if err != nil {
		t.Fatal(err)
	}
	with, err := RecordWith(s, Options{Pods: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(plain.Pods) != 0 {
		t.Errorf("Record kept %d Pod writes", len(plain.Pods))
	}
	if len(with.Pods) != 1 {
		t.Fatalf("want the one Pod write (the label change), got %d", len(with.Pods))
	}
	p := with.Pods[0]
	pod, ok := p.Obj.(*v1.Pod)
	if !ok || p.At != 10*time.Second || p.Op != "update" || p.By != "" || pod.Name != "web-v1-1" || pod.Labels["app"] != "canary" {
		t.Errorf("Pod write: %v %s by %q %T", p.At, p.Op, p.By, p.Obj)
	}
	if len(with.Writes) != len(plain.Writes) || len(with.Script) != len(plain.Script) || len(with.Syncs) != len(plain.Syncs) {
		t.Fatalf("recording Pods changed the rest: %d/%d writes, %d/%d syncs", len(with.Writes), len(plain.Writes), len(with.Syncs), len(plain.Syncs))
	}
	seqs := map[int]bool{p.Seq: true}
	for i, w := range with.Writes {
		if w.Kind != "EndpointSlice" || w.By != "endpointslice-controller" {
			t.Errorf("write %d: %s by %q, want an EndpointSlice by endpointslice-controller", i, w.Kind, w.By)
		}
		if w.At != plain.Writes[i].At || w.Op != plain.Writes[i].Op {
			t.Errorf("write %d: %v %s, without Pods %v %s", i, w.At, w.Op, plain.Writes[i].At, plain.Writes[i].Op)
		}
		seqs[w.Seq] = true
	}
	if len(seqs) != len(with.Writes)+1 || with.Writes[0].Seq >= p.Seq || with.Writes[1].Seq <= p.Seq {
		t.Errorf("Seq must order the writes as they happened: slices %d, %d; pod %d", with.Writes[0].Seq, with.Writes[1].Seq, p.Seq)
	}
	for i := range with.Syncs {
		if with.Syncs[i].Start != plain.Syncs[i].Start || with.Syncs[i].Dataplane != plain.Syncs[i].Dataplane || with.Syncs[i].Heard != plain.Syncs[i].Heard {
			t.Errorf("sync %d differs when Pods are recorded", i)
		}
	}
	// The initial sync at 0 heard no write, the request right after it
	// the slice written at 0, the one at 11s the update too.
	for i, want := range []int{0, 1, 2} {
		if got := with.Syncs[i].Heard; got != want {
			t.Errorf("sync %d at %v (%s) heard %d writes, want %d", i+1, with.Syncs[i].Start, with.Syncs[i].Why, got, want)
		}
	}
}

// TestSyncsHeard: two slices written at one instant, each followed by its
// own sync (minSyncPeriod 0): each sync heard the writes before it, not
// the ones after it at the same instant.
func TestSyncsHeard(t *testing.T) {
	tr := record(t, "iptables-terminating-pod-publish-not-ready")
	if len(tr.Syncs) != 9 || len(tr.Writes) != 8 {
		t.Fatalf("%d syncs, %d writes; want 9 and 8", len(tr.Syncs), len(tr.Writes))
	}
	for i, s := range tr.Syncs {
		if s.Heard != i {
			t.Errorf("sync %d at %v heard %d writes, want %d", i+1, s.Start, s.Heard, i)
		}
	}
}
