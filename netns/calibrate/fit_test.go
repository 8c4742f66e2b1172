package calibrate

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/proxysim/proxysim/netns"
	"github.com/proxysim/proxysim/sim"
	"github.com/proxysim/proxysim/sim/costprofile"
)

// synthetic makes iptables-legacy samples whose kernel time follows known
// laws: writes 2µs per restore line (plus 1ms), listings 1µs per saved
// line, with 3% noise; a partial sync's payload is small, its time follows
// the table (4 lines per service port or endpoint).
func synthetic(seed uint64) []Sample {
	r := rand.New(rand.NewPCG(seed, 1))
	noisy := func(s float64) time.Duration { return time.Duration(s * (1 + 0.03*(2*r.Float64()-1)) * 1e9) }
	var out []Sample
	for _, sh := range Default().Shapes {
		table := 20 + 4*sh.Services*(1+sh.EndpointsPerService)
		for range 3 {
			for _, kind := range []string{string(costprofile.FullNew), PartialEndpoint, PartialService, string(costprofile.FullRestart)} {
				w := sim.SyncWork{ServicePorts: sh.Services, Endpoints: sh.Services * sh.EndpointsPerService, IPTables: &sim.IPTablesWork{Restores: 1, Saves: 1}}
				var write float64
				switch kind {
				case string(costprofile.FullNew):
					w.Full = true
					w.IPTables.NAT.Lines, w.IPTables.SavedLines = table, 10
					write = 1e-3 + 2e-6*float64(table)
				case string(costprofile.FullRestart):
					w.Full = true
					w.IPTables.NAT.Lines, w.IPTables.SavedLines = table, table
					write = 1e-3 + 3e-6*float64(table)
				default:
					w.IPTables.NAT.Lines, w.IPTables.SavedLines = 20+sh.Services/10, table
					write = 1e-3 + 1e-6*float64(table)
				}
				out = append(out, Sample{Dataplane: costprofile.IPTablesLegacy, Shape: sh, Kind: kind, Work: w,
					Kernel: netnsTime(noisy(write), noisy(1e-6*float64(w.IPTables.SavedLines)+2e-4))})
			}
		}
	}
	return out
}

func TestFitFindsTheMeasureAndPredictsHeldOutSizes(t *testing.T) {
	ss := synthetic(1)
	p, err := Fit("synthetic", ss)
	if err != nil {
		t.Fatal(err)
	}
	mp, err := p.Mode(costprofile.IPTablesLegacy)
	if err != nil {
		t.Fatal(err)
	}
	want := map[costprofile.Kind]costprofile.Measure{costprofile.Partial: "size", costprofile.Listing: "savedLines"}
	for _, term := range mp.Kernel {
		if m, ok := want[term.Kind]; ok && term.Measure != m {
			t.Errorf("%s follows %s, want %s", term.Kind, term.Measure, m)
		}
	}
	for _, k := range MeasuredKinds {
		e, ok := mp.HeldOut[k]
		if !ok || e > 0.05 {
			t.Errorf("held-out error of %s: %v (measured: %v), want under 5%%", k, e, ok)
		}
	}
	for k, e := range SelfError(p, ss)[costprofile.IPTablesLegacy] {
		if e > 0.05 {
			t.Errorf("self error of %s: %.3f", k, e)
		}
	}
	// The same samples give the same profile.
	q, _ := Fit("synthetic", ss)
	a, _ := p.Marshal()
	b, _ := q.Marshal()
	if string(a) != string(b) {
		t.Error("Fit is not deterministic")
	}
}

// A law the measures cannot follow shows in the held-out error.
func TestHeldOutErrorShowsNoise(t *testing.T) {
	ss := synthetic(2)
	r := rand.New(rand.NewPCG(3, 3))
	for i := range ss {
		ss[i].Kernel.Write = time.Duration(float64(ss[i].Kernel.Write) * math.Exp(2*r.NormFloat64()))
	}
	p, err := Fit("noisy", ss)
	if err != nil {
		t.Fatal(err)
	}
	if e := p.Modes[0].HeldOut[PartialService]; e < 0.25 {
		t.Errorf("held-out error %.3f of a sync time that follows nothing", e)
	}
}

func netnsTime(write, list time.Duration) (k netns.KernelTime) {
	k.Write, k.List = write, list
	return k
}

// The self error compares a profile with its own points, the median of a
// sync's repeats: one repeat in three slowed four-fold (a busy machine) is
// not a miss, while a profile that is off for every repeat is.
func TestSelfErrorByPoint(t *testing.T) {
	ss := synthetic(1)
	p, err := Fit("synthetic", ss)
	if err != nil {
		t.Fatal(err)
	}
	noisy := append([]Sample(nil), ss...)
	seen := map[string]bool{}
	for i, s := range noisy {
		k := s.Shape.String() + s.Kind
		if !seen[k] {
			seen[k] = true
			noisy[i].Kernel.Write *= 4
		}
	}
	for k, e := range SelfError(p, noisy)[costprofile.IPTablesLegacy] {
		if e > 0.05 {
			t.Errorf("one slow repeat in three: self error of %s is %.3f, want under 5%%", k, e)
		}
	}
	slow := append([]Sample(nil), ss...)
	for i := range slow {
		slow[i].Kernel.Write *= 3
		slow[i].Kernel.List *= 3
	}
	for k, e := range SelfError(p, slow)[costprofile.IPTablesLegacy] {
		if e < 0.6 {
			t.Errorf("every repeat three times slower: self error of %s is %.3f, want about 67%%", k, e)
		}
	}
}
