package upstream

// The compute part of a cost profile: kube-proxy v1.36.3's own CPU per
// sync, timed on its proxiers (iptables and nftables, the dataplane write
// discarded as in BenchmarkProxierCompute) over the clusters `proxysim
// calibrate` programs into the kernel, and fitted over the size proxysim's
// proxier reports for the same sync. calibrate (main module) measures the
// kernel part; this, the part only kube-proxy's code can give. `make
// calibrate-compute PROFILE=file.json` writes the fitted terms into a
// profile (docs/cost-profiles.md); without -calibrate-compute the test is
// skipped.
//
// kube-proxy's nftables NewProxier runs nft, so the make target runs the
// test binary under `unshare -rn`: nothing reaches the host's tables.

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"github.com/proxysim/proxysim/netns/calibrate"
	"github.com/proxysim/proxysim/sim"
	"github.com/proxysim/proxysim/sim/clustergen"
	"github.com/proxysim/proxysim/sim/costprofile"
)

var (
	calibrateCompute = flag.String("calibrate-compute", "", "a cost profile (JSON) whose compute terms are measured on kube-proxy's proxiers and rewritten (make calibrate-compute)")
	computeQuick     = flag.Bool("calibrate-compute-quick", false, "with -calibrate-compute: calibrate's --quick clusters")
	computeRepeats   = flag.Int("calibrate-compute-repeats", 3, "with -calibrate-compute: timings per sync kind and cluster")
	computeMaxError  = flag.Float64("calibrate-compute-max-error", 0, "with -calibrate-compute: fail when a term's held-out error is over this (0: no bound; CI: 0.5)")
)

// computeSample is one timed sync of kube-proxy's proxier, and the work
// proxysim's proxier reported for the same sync.
type computeSample struct {
	shape   calibrate.Shape
	kind    string // full, partial-endpoint, partial-service
	work    sim.SyncWork
	seconds []float64 // CPU seconds per sync, one per repeat
}

func TestCalibrateCompute(t *testing.T) {
	if *calibrateCompute == "" {
		t.Skip("-calibrate-compute FILE not given (make calibrate-compute)")
	}
	prof, err := costprofile.Load(*calibrateCompute)
	if err != nil {
		t.Fatal(err)
	}
	opts := calibrate.Default()
	if *computeQuick {
		opts = calibrate.Quick()
	}
	start := time.Now()
	load := calibrate.LoadAverage()
	for _, mode := range []string{"iptables", "nftables"} {
		var samples []computeSample
		for _, sh := range opts.Shapes {
			s, err := measureCompute(t, mode, sh, *computeRepeats)
			if err != nil {
				t.Fatalf("%s %s: %v", mode, sh, err)
			}
			for _, x := range s {
				t.Logf("%s %-9s %-16s size %6d  %s", mode, sh, x.kind, x.work.ServicePorts+x.work.Endpoints, secondsList(x.seconds))
			}
			samples = append(samples, s...)
		}
		full, err := fitCompute(samples, func(k string) bool { return k == "full" })
		if err != nil {
			t.Fatalf("%s full: %v", mode, err)
		}
		full.Kind = costprofile.Full
		partial, err := fitCompute(samples, func(k string) bool { return k != "full" })
		if err != nil {
			t.Fatalf("%s partial: %v", mode, err)
		}
		partial.Kind = costprofile.Partial
		t.Logf("%s compute: full %s over %s; partial %s over %s", mode, full.Curve, sizeName(full), partial.Curve, sizeName(partial))
		t.Logf("%s compute, full: %s", mode, full.Curve.Considered)
		t.Logf("%s compute, partial: %s", mode, partial.Curve.Considered)
		for _, tm := range []costprofile.Term{full, partial} {
			if *computeMaxError > 0 && tm.Curve.HeldOutError > *computeMaxError {
				t.Errorf("%s compute %s: held-out error %.1f %% is over the bound of %.0f %%", mode, tm.Kind, 100*tm.Curve.HeldOutError, 100**computeMaxError)
			}
		}
		dataplanes := []string{costprofile.NFTables}
		if mode == "iptables" {
			// One proxier, whichever iptables binary restores its payload.
			dataplanes = []string{costprofile.IPTablesNFT, costprofile.IPTablesLegacy}
		}
		for _, d := range dataplanes {
			m, err := prof.Mode(d)
			if err != nil {
				t.Logf("%s: not in the profile, left out", d)
				continue
			}
			m.Compute = []costprofile.Term{full, partial}
			m.ComputeSource = fmt.Sprintf("kube-proxy v1.36.3's %s proxier (e2e/upstream TestCalibrateCompute: CPU time per sync, the write discarded, %d repeats; %s, load %s)",
				mode, *computeRepeats, time.Now().UTC().Format("2006-01-02"), load)
		}
	}
	if err := prof.Validate(); err != nil {
		t.Fatal(err)
	}
	out, err := prof.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(*calibrateCompute, out, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s in %v", *calibrateCompute, time.Since(start).Round(time.Second))
}

// measureCompute times kube-proxy's proxier of one mode on one cluster:
// a full sync, a partial after one endpoint changed, one after one
// Service changed, each repeated.
func measureCompute(t testing.TB, mode string, sh calibrate.Shape, repeats int) ([]computeSample, error) {
	c, err := clustergen.Generate(calibrate.ClusterSpec(sh, 1))
	if err != nil {
		return nil, err
	}
	kp, ours, err := computePair(t, mode)
	if err != nil {
		return nil, err
	}
	kp.add(c.Services, c.Slices)
	ours.add(c.Services, c.Slices)

	slice := c.Slices[0].DeepCopy()
	slice.Endpoints[0].Conditions.Ready = ptrTo(!ptrOr(slice.Endpoints[0].Conditions.Ready, true))
	slices := []*discovery.EndpointSlice{slice, c.Slices[0]}
	svc := c.Services[0].DeepCopy()
	svc.Spec.SessionAffinity = v1.ServiceAffinityClientIP
	svc.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptrTo(int32(10800))}}
	svcs := []*v1.Service{svc, c.Services[0]}

	kinds := []struct {
		name string
		sync func(s computeSide, i int)
	}{
		{"full", func(s computeSide, i int) { s.sync(true, nil) }},
		{calibrate.PartialEndpoint, func(s computeSide, i int) { s.sync(false, slices[i%2]) }},
		{calibrate.PartialService, func(s computeSide, i int) { s.(serviceChanger).changeService(svcs[(i+1)%2], svcs[i%2]) }},
	}
	var out []computeSample
	for _, k := range kinds {
		k.sync(ours, 0)
		work, ok := ours.(sim.WorkReporter).TakeSyncWork()
		if !ok {
			return nil, fmt.Errorf("%s: proxysim's proxier reported no work", k.name)
		}
		k.sync(ours, 1) // back as it was
		ours.(sim.WorkReporter).TakeSyncWork()
		if work.Full != (k.name == "full") {
			return nil, fmt.Errorf("%s: proxysim's proxier ran a sync with full=%v", k.name, work.Full)
		}
		smp := computeSample{shape: sh, kind: k.name, work: work}
		// Each repeat times enough syncs to span ~50 ms of CPU (at least 2,
		// an even count, so the cluster ends as it began), and their garbage
		// collection with them.
		n := 2
		for r := 0; r < repeats; r++ {
			runtime.GC()
			cpu0, err := cpuTime()
			if err != nil {
				return nil, err
			}
			for i := 0; i < n; i++ {
				k.sync(kp, i)
			}
			cpu1, err := cpuTime()
			if err != nil {
				return nil, err
			}
			per := (cpu1 - cpu0).Seconds() / float64(n)
			smp.seconds = append(smp.seconds, per)
			if r == 0 && per > 0 && per < 0.025 {
				n = 2 * int(0.025/per)
			}
		}
		out = append(out, smp)
	}
	return out, nil
}

// serviceChanger is a computeSide whose Service can change.
type serviceChanger interface {
	changeService(old, cur *v1.Service)
}

func computePair(t testing.TB, mode string) (computeSide, computeSide, error) {
	switch mode {
	case "iptables":
		return newIPTCompute(t, true), newIPTCompute(t, false), nil
	case "nftables":
		k, err := newKubeNFT()
		if err != nil {
			return nil, nil, fmt.Errorf("kube-proxy's nftables NewProxier (run under unshare -rn, as make calibrate-compute does): %w", err)
		}
		return k, newOurNFTCompute(), nil
	}
	return nil, nil, fmt.Errorf("unknown mode %q", mode)
}

// fitCompute fits one compute term over the samples of the kinds keep
// selects. The candidate sizes are every single measure, and Service ports
// plus a weight of endpoints (kube-proxy's proxiers walk both, at a
// different cost per item); the candidate whose curve best predicts
// held-out points wins, as calibrate picks the kernel's measures.
func fitCompute(samples []computeSample, keep func(string) bool) (costprofile.Term, error) {
	var cands []costprofile.Term
	for _, name := range costprofile.MeasureNames() {
		cands = append(cands, costprofile.Term{Measure: costprofile.Measure(name)})
	}
	for _, w := range endpointWeights {
		cands = append(cands, costprofile.Term{Measure: "servicePorts", Plus: []costprofile.Addend{{Measure: "endpoints", Weight: w}}})
	}
	var best costprofile.Term
	found := false
	var tried []string
	for _, t := range cands {
		by := map[float64][]float64{}
		for _, s := range samples {
			if keep(s.kind) {
				x := t.Size(s.work)
				by[x] = append(by[x], s.seconds...)
			}
		}
		var pts []costprofile.Point
		for x, secs := range by {
			pts = append(pts, costprofile.Point{Size: x, Seconds: secs})
		}
		sort.Slice(pts, func(i, j int) bool { return pts[i].Size < pts[j].Size })
		c, err := costprofile.Fit(pts)
		if err != nil {
			continue // a measure this mode's work lacks
		}
		tried = append(tried, fmt.Sprintf("%s %.3f", sizeName(t), c.HeldOutError))
		if !found || c.HeldOutError < best.Curve.HeldOutError {
			t.Curve, t.Points = c, pts
			best, found = t, true
		}
	}
	if !found {
		return costprofile.Term{}, fmt.Errorf("no measure fits (%d samples)", len(samples))
	}
	best.Curve.Considered = "sizes: " + strings.Join(tried, ", ") + "; forms: " + best.Curve.Considered
	return best, nil
}

// endpointWeights are the weights of an endpoint against a Service port
// that the fit tries.
var endpointWeights = []float64{0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75}

func sizeName(t costprofile.Term) string {
	s := string(t.Measure)
	for _, a := range t.Plus {
		s += fmt.Sprintf("+%g·%s", a.Weight, a.Measure)
	}
	return s
}

func secondsList(v []float64) string {
	out := make([]string, len(v))
	for i, x := range v {
		out[i] = fmt.Sprintf("%.2fms", 1e3*x)
	}
	return strings.Join(out, " ")
}

// fitCompute finds the weight of endpoints a proxier's time follows: over
// the calibrate shapes, a time of 2 µs per (service port + 0.3 endpoint)
// picks that size, where no single measure fits as well.
func TestFitComputeFindsTheWeight(t *testing.T) {
	var samples []computeSample
	for _, sh := range calibrate.Default().Shapes {
		w := sim.SyncWork{Full: true, ServicePorts: sh.Services, Endpoints: sh.Services * sh.EndpointsPerService}
		sec := 2e-6 * (float64(w.ServicePorts) + 0.3*float64(w.Endpoints))
		samples = append(samples, computeSample{shape: sh, kind: "full", work: w, seconds: []float64{sec, sec * 1.01, sec * 0.99}})
	}
	tm, err := fitCompute(samples, func(k string) bool { return k == "full" })
	if err != nil {
		t.Fatal(err)
	}
	if got := sizeName(tm); got != "servicePorts+0.3·endpoints" {
		t.Errorf("size %s, want servicePorts+0.3·endpoints (%s)", got, tm.Curve.Considered)
	}
	if tm.Curve.HeldOutError > 0.02 {
		t.Errorf("held-out error %.3f on exact points", tm.Curve.HeldOutError)
	}
	if _, err := fitCompute(samples, func(k string) bool { return k == "partial" }); err == nil {
		t.Error("no partial samples, yet a term")
	}
}
