package sim_test

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/proxysim/proxysim/fakes"
	"github.com/proxysim/proxysim/sim"
	"github.com/proxysim/proxysim/sim/ipvs"
	"github.com/proxysim/proxysim/sim/runner"
	"github.com/proxysim/proxysim/sim/trace"
	"github.com/proxysim/proxysim/sim/vclock"
)

// ipvsWorld is 3 services of 2 endpoints each on the fake IPVS, with the
// cooldown runner (minSyncPeriod 1s) and the given cost.
func ipvsWorld(t *testing.T, cost sim.CostModel, traceWork bool) *sim.World {
	t.Helper()
	clk := vclock.New(vclock.Epoch)
	dp, _, _, _ := fakes.Dataplane("6.1.0", clk)
	w := sim.New(t, sim.Config{
		Clock:      clk,
		Runner:     runner.Config{Generation: runner.Cooldown, MinInterval: time.Second, MaxInterval: time.Hour},
		Cost:       cost,
		NewBackend: ipvs.Backend(ipvs.Config{}, dp),
		TraceWork:  traceWork,
	})
	svcs, slices := fakes.Cluster(3, 2)
	fakes.Start(t, w, svcs, slices)
	// At 1s one endpoint of svc-00001 goes unready, at 1.01s another of
	// svc-00002 (during the first run, if it lasts).
	for i, at := range []time.Duration{time.Second, time.Second + 10*time.Millisecond} {
		w.At(at, func() {
			s := slices[i+1].DeepCopy()
			ready := false
			s.Endpoints[0].Conditions.Ready = &ready
			if err := w.Update(s); err != nil {
				t.Error(err)
			}
		})
	}
	return w
}

// perCall costs 10ms per netlink call of the sync.
var perCall = sim.WorkCostFunc(func(w sim.SyncWork) time.Duration {
	if w.IPVS == nil {
		return 0
	}
	return time.Duration(w.IPVS.NetlinkCalls()) * 10 * time.Millisecond
})

// A work-based cost is evaluated once the proxier computed the run: the run
// ends at its start plus the linear part plus the work's cost, and the
// cooldown runner counts minSyncPeriod from that end.
func TestWorkCostSetsTheRunsEnd(t *testing.T) {
	w := ipvsWorld(t, sim.CostModel{Fixed: 5 * time.Millisecond, Work: perCall}, false)
	w.RunUntil(5 * time.Second)
	syncs := w.Syncs()
	if len(syncs) != 3 {
		t.Fatalf("syncs %+v, want the initial one and two runs", syncs)
	}
	// The first run: the changed service's real servers listed, listed
	// again by graceful termination, one deleted: 3 calls.
	first := syncs[1]
	if n := first.Work.IPVS.NetlinkCalls(); n != 3 {
		t.Fatalf("first run: %d netlink calls (%v), want 3", n, first.Work)
	}
	if want := time.Second + 5*time.Millisecond + 30*time.Millisecond; first.Start != time.Second || first.End != want {
		t.Errorf("first run %v..%v, want 1s..%v", first.Start, first.End, want)
	}
	// The second change waited for the cooldown from the first run's end,
	// and its run costs the same.
	second := syncs[2]
	if want := first.End + time.Second; second.Start != want || second.End != want+35*time.Millisecond {
		t.Errorf("second run %v..%v, want %v..%v", second.Start, second.End, want, want+35*time.Millisecond)
	}
	// The direct initial sync takes no time, whatever its work.
	if syncs[0].Start != syncs[0].End || syncs[0].Work.IPVS.NetlinkCalls() == 0 {
		t.Errorf("initial sync %+v: want no duration and some work", syncs[0])
	}
}

// SetCost switches to a work-based cost mid-story and says so in the
// trace; without Work, a model reads as it always did.
func TestSetCostToAWorkCost(t *testing.T) {
	w := ipvsWorld(t, sim.CostModel{}, false)
	w.At(500*time.Millisecond, func() { w.SetCost(sim.CostModel{Fixed: time.Millisecond, Work: perCall}) })
	w.RunUntil(5 * time.Second)
	syncs := w.Syncs()
	if got, want := syncs[1].End-syncs[1].Start, 31*time.Millisecond; got != want {
		t.Errorf("first run after SetCost lasted %v, want %v", got, want)
	}
	var notes []string
	for _, e := range w.Trace.Events() {
		if e.Kind == trace.Note && strings.HasPrefix(e.Detail, "sync cost now") {
			notes = append(notes, e.Detail)
		}
	}
	if want := "sync cost now fixed 1ms + 0s per service port + 0s per endpoint + a function of the sync's work"; len(notes) != 1 || notes[0] != want {
		t.Errorf("notes %q, want %q", notes, want)
	}
	for _, c := range []struct {
		m    sim.CostModel
		want string
	}{
		{sim.CostModel{}, "fixed 0s + 0s per service port + 0s per endpoint"},
		{sim.CostModel{Fixed: 50 * time.Millisecond, PerService: time.Millisecond, PerEndpoint: 2 * time.Microsecond}, "fixed 50ms + 1ms per service port + 2µs per endpoint"},
		{sim.CostModel{Runs: []time.Duration{time.Second, 2 * time.Second}, Work: perCall}, "[1s 2s]"},
	} {
		if got := c.m.String(); got != c.want {
			t.Errorf("%#v reads %q, want %q", c.m, got, c.want)
		}
	}
}

// run.work is recorded only when asked, one per sync, after the sync's
// dataplane operations; with it the rest of the trace is unchanged, and the
// work is the same on every run.
func TestRunWorkEvents(t *testing.T) {
	cost := sim.CostModel{Fixed: 5 * time.Millisecond, Work: perCall}
	plain := ipvsWorld(t, cost, false)
	plain.RunUntil(5 * time.Second)
	with := ipvsWorld(t, cost, true)
	with.RunUntil(5 * time.Second)
	again := ipvsWorld(t, cost, true)
	again.RunUntil(5 * time.Second)

	if !bytes.Equal(with.Trace.JSONL(), again.Trace.JSONL()) || !reflect.DeepEqual(with.Syncs(), again.Syncs()) {
		t.Fatalf("two runs reported different work")
	}
	var rest []trace.Event
	var work []trace.Event
	for _, e := range with.Trace.Events() {
		if e.Kind == trace.Work {
			work = append(work, e)
		} else {
			rest = append(rest, e)
		}
	}
	if !reflect.DeepEqual(rest, plain.Trace.Events()) {
		t.Errorf("with run.work, the rest of the trace changed")
	}
	for _, e := range plain.Trace.Events() {
		if e.Kind == trace.Work {
			t.Fatalf("run.work recorded without TraceWork: %v", trace.Line(e))
		}
	}
	syncs := with.Syncs()
	if len(work) != len(syncs) {
		t.Fatalf("%d run.work events for %d syncs", len(work), len(syncs))
	}
	for i, e := range work {
		if e.Run != syncs[i].N || e.Detail != syncs[i].Work.String() || e.At != trace.Duration(syncs[i].Start) {
			t.Errorf("event %s, want run %d at %v: %s", trace.Line(e), syncs[i].N, syncs[i].Start, syncs[i].Work)
		}
	}
	if want := "ipvs partial: virtual servers +0 ~0 -0, real servers +0 ~0 -1, addresses +0 -0, device 0; listed virtual servers 0 (0), real servers 2 (4), addresses 0 (0); size 3 service ports, 6 endpoints"; work[1].Detail != want {
		t.Errorf("run 2's work reads\n %s\nwant\n %s", work[1].Detail, want)
	}
}

// A sync the backend never saw (the proxy not initialized, or a failure
// injected before it) reports no mode's work, only the proxy's size.
func TestFailedSyncReportsNoDataplaneWork(t *testing.T) {
	w := ipvsWorld(t, sim.CostModel{Work: perCall}, true)
	w.FailSyncs(1)
	w.RunUntil(5 * time.Second)
	r := w.Syncs()[1]
	if r.Err == "" || r.Work.Mode() != "" || r.Work.ServicePorts != 3 || r.Start != r.End {
		t.Errorf("failed run %+v: want an error, no dataplane work, the size, and no duration", r)
	}
	if got := fmt.Sprint(r.Work); got != "no dataplane work reported; size 3 service ports, 6 endpoints" {
		t.Errorf("its work reads %q", got)
	}
}
