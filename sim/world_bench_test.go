package sim_test

import (
	"runtime"
	"testing"
	"time"

	discovery "k8s.io/api/discovery/v1"

	"github.com/proxysim/proxysim/fakes"
	"github.com/proxysim/proxysim/sim"
	"github.com/proxysim/proxysim/sim/costprofile"
	"github.com/proxysim/proxysim/sim/ipvs"
	"github.com/proxysim/proxysim/sim/kpmetrics"
	"github.com/proxysim/proxysim/sim/runner"
	"github.com/proxysim/proxysim/sim/vclock"
)

// BenchmarkVirtualHour replays one virtual hour of a 1,000-service cluster
// (10 endpoints each) with 10 EndpointSlice changes per second, through the
// fake API server, the real informers, trackers and runner (minSyncPeriod 1s,
// cooldown runner) and the IPVS proxier programming the fake IPVS of kernel
// 6.1. It reports how many times faster than real time the replay ran, the
// events per second, and the allocations and bytes per object update, counted
// over the whole replay (setup, informers, syncs, dataplane) and divided by
// the number of updates.
func BenchmarkVirtualHour(b *testing.B) { virtualHour(b, false, nil, false) }

// BenchmarkVirtualHourMetrics is BenchmarkVirtualHour with kube-proxy's
// metrics registry (sim/kpmetrics) filled along the way.
func BenchmarkVirtualHourMetrics(b *testing.B) { virtualHour(b, true, nil, false) }

// BenchmarkVirtualHourWorkCost is BenchmarkVirtualHour with a work-based
// sync cost on top of the linear one (1ns per netlink call, so that the
// runs stay as they were within nanoseconds), and with each sync's work
// traced too (run.work): what reading the work costs a replay. Every sync
// reports its work in all three benchmarks.
func BenchmarkVirtualHourWorkCost(b *testing.B) {
	perCall := sim.WorkCostFunc(func(w sim.SyncWork) time.Duration {
		if w.IPVS == nil {
			return 0
		}
		return time.Duration(w.IPVS.NetlinkCalls())
	})
	b.Run("cost", func(b *testing.B) { virtualHour(b, false, perCall, false) })
	b.Run("cost+trace", func(b *testing.B) { virtualHour(b, false, perCall, true) })
}

func virtualHour(b *testing.B, metrics bool, work sim.WorkCost, traceWork bool) {
	const (
		services   = 1000
		perService = 10
		rate       = 10 // changes per virtual second
		hour       = time.Hour
	)
	svcs, slices := fakes.Cluster(services, perService)
	b.ReportAllocs()
	var events, updates, syncs int
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	for i := 0; i < b.N; i++ {
		clk := vclock.New(vclock.Epoch)
		dp, _, _, _ := fakes.Dataplane("6.1.0", clk)
		w, err := sim.NewWorld(sim.Config{
			Clock:      clk,
			Runner:     runner.Config{Generation: runner.Cooldown, MinInterval: time.Second, MaxInterval: 30 * time.Second},
			Cost:       sim.CostModel{Fixed: 50 * time.Millisecond, PerEndpoint: 2 * time.Microsecond, Work: work},
			NewBackend: ipvs.Backend(ipvs.Config{}, dp),
			Metrics:    metricsSink(b, metrics),
			TraceWork:  traceWork,
		})
		if err != nil {
			b.Fatal(err)
		}
		for j := range svcs {
			_ = w.Create(svcs[j])
			_ = w.Create(slices[j])
		}
		if err := w.Start(); err != nil {
			b.Fatal(err)
		}
		// Change k flips one endpoint of slice k%services between ready and
		// not ready, so every change is a real change. The new object shares
		// all but what it changes with the original: the world never keeps
		// or alters what it is given (it stores a copy), so the benchmark
		// measures the replay, not the test building its updates.
		var k int
		var tick func()
		tick = func() {
			s := *slices[k%services]
			s.Endpoints = append([]discovery.Endpoint(nil), s.Endpoints...)
			ready := (k/services)%2 == 1
			s.Endpoints[k%perService].Conditions.Ready = &ready
			k++
			if err := w.Update(&s); err != nil {
				b.Error(err)
			}
			if w.Now() < hour {
				w.Clock.AfterFunc(time.Second/rate, tick)
			}
		}
		w.Clock.AfterFunc(time.Second/rate, tick)
		w.RunUntil(hour)
		events += w.Trace.Len()
		updates += k
		syncs += len(w.SyncsView())
		w.Close()
	}
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(b.N)*hour.Seconds()/elapsed.Seconds(), "x-realtime")
	b.ReportMetric(float64(events)/elapsed.Seconds(), "events/s")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(updates), "allocs/update")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(updates), "B/update")
	b.ReportMetric(float64(syncs)/float64(b.N), "syncs/hour")
}

func metricsSink(b *testing.B, on bool) sim.MetricsSink {
	if !on {
		return nil
	}
	r, err := kpmetrics.New("ipvs", "IPv4")
	if err != nil {
		b.Fatal(err)
	}
	return r
}

// BenchmarkVirtualHourProfile is BenchmarkVirtualHour without and with a
// cost profile (sim/costprofile) evaluated on every sync's work, in one
// run, so that the two compare on the same machine state. The profile is
// an IPVS part (calibrate measures no IPVS; its form and size are those of
// a measured part: power and linear curves over netlink calls) costing
// microseconds, so that the syncs stay nearly as they were.
func BenchmarkVirtualHourProfile(b *testing.B) {
	curve := func(form costprofile.Form, params ...float64) costprofile.Curve {
		return costprofile.Curve{Form: form, Params: params}
	}
	part := &costprofile.ModeProfile{Dataplane: costprofile.IPVS, Kernel: []costprofile.Term{
		{Kind: costprofile.FullNew, Measure: "netlinkCalls", Curve: curve(costprofile.Power, 1e-5, 1e-8, 1.2)},
		{Kind: costprofile.FullRestart, Measure: "netlinkCalls", Curve: curve(costprofile.Power, 1e-5, 1e-8, 1.3)},
		{Kind: costprofile.Partial, Measure: "netlinkCalls", Curve: curve(costprofile.Linear, 1e-5, 1e-8)},
	}}
	b.Run("none", func(b *testing.B) { virtualHour(b, false, nil, false) })
	b.Run("profile", func(b *testing.B) { virtualHour(b, false, part, false) })
}
