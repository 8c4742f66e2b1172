package calibrate

import (
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/proxysim/proxysim/sim"
	"github.com/proxysim/proxysim/sim/costprofile"
)

// candidates are the measures each term may follow, per dataplane family:
// the fit keeps the one whose curve predicts held-out sizes best.
func candidates(dataplane string, k costprofile.Kind) []costprofile.Measure {
	ipt := dataplane != costprofile.NFTables
	switch {
	case k == costprofile.Listing && ipt:
		// A listing prints what is there: a new node's table is empty
		// whatever the cluster's size.
		return []costprofile.Measure{"savedLines"}
	case k == costprofile.Listing:
		return []costprofile.Measure{"objectsListed"}
	case ipt && k == costprofile.FullNew:
		return []costprofile.Measure{"restoreLines", "restoreRules", "size"}
	case ipt && k == costprofile.FullRestart:
		// A restart may follow the table already there (legacy rewrites
		// the whole table) rather than the payload.
		return []costprofile.Measure{"restoreLines", "restoreRules", "size", "savedLines"}
	case ipt:
		// Not savedLines: in a large cluster a partial sync reads nothing
		// back. tableRules for iptables-legacy, which reads and replaces
		// the whole table however small the payload (libiptc's
		// iptc_init/iptc_commit).
		return []costprofile.Measure{"restoreLines", "restoreRules", "size", "tableRules"}
	case k == costprofile.FullNew:
		return []costprofile.Measure{"ops", "size"}
	}
	return []costprofile.Measure{"ops", "opsPlusTable", "size", "objectsListed"}
}

// termKind is the profile kind a measured kind is fitted into.
func termKind(kind string) costprofile.Kind {
	switch kind {
	case PartialService, PartialEndpoint:
		return costprofile.Partial
	}
	return costprofile.Kind(kind)
}

// xy is a sample's point for a term: the measure and the writes' time, or
// for the listing one call's share of both (see ModeProfile.KernelSeconds).
func xy(s Sample, k costprofile.Kind, m costprofile.Measure) (x, y float64, ok bool) {
	x = costprofile.Measures[m](s.Work)
	if k != costprofile.Listing {
		return x, s.Kernel.Write.Seconds(), true
	}
	n := float64(costprofile.Listings(s.Work))
	if n == 0 {
		return 0, 0, false
	}
	return x / n, s.Kernel.List.Seconds() / n, true
}

// pointsOf groups samples into points by a measure: the repeats of a
// shape did the same work, so they land on one size.
func pointsOf(ss []Sample, k costprofile.Kind, m costprofile.Measure) []costprofile.Point {
	by := map[float64]*costprofile.Point{}
	var sizes []float64
	for _, s := range ss {
		if termKind(s.Kind) != k && k != costprofile.Listing {
			continue
		}
		x, y, ok := xy(s, k, m)
		if !ok {
			continue
		}
		p := by[x]
		if p == nil {
			p = &costprofile.Point{Size: x}
			by[x] = p
			sizes = append(sizes, x)
		}
		p.Seconds = append(p.Seconds, y)
	}
	slices.Sort(sizes)
	out := make([]costprofile.Point, len(sizes))
	for i, x := range sizes {
		out[i] = *by[x]
	}
	return out
}

// fitTerm fits a term over every candidate measure and keeps the best
// held-out one.
func fitTerm(dataplane string, k costprofile.Kind, ss []Sample) (costprofile.Term, error) {
	var best costprofile.Term
	var errs []string
	found := false
	for _, m := range candidates(dataplane, k) {
		pts := pointsOf(ss, k, m)
		c, err := costprofile.Fit(pts)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", m, err))
			continue
		}
		if !found || c.HeldOutError < best.Curve.HeldOutError {
			best = costprofile.Term{Kind: k, Measure: m, Curve: c, Points: pts}
			found = true
		}
	}
	if !found {
		return best, fmt.Errorf("%s %s: no measure fits (%s)", dataplane, k, strings.Join(errs, "; "))
	}
	return best, nil
}

// Fit makes a profile from samples: for each dataplane, a kernel term per
// kind (full-new, full-restart, partial, listing), each over the measure
// that predicts best, and the held-out error of each measured kind (see
// HeldOut). The compute part is left to e2e/upstream's calibrate-compute.
func Fit(name string, ss []Sample) (*costprofile.Profile, error) {
	p := &costprofile.Profile{Name: name}
	for _, d := range dataplanesOf(ss) {
		mine := filter(ss, func(s Sample) bool { return s.Dataplane == d })
		mp := costprofile.ModeProfile{Dataplane: d}
		for _, k := range []costprofile.Kind{costprofile.FullNew, costprofile.FullRestart, costprofile.Partial, costprofile.Listing} {
			t, err := fitTerm(d, k, mine)
			if err != nil {
				return nil, err
			}
			mp.Kernel = append(mp.Kernel, t)
		}
		mp.HeldOut = HeldOut(d, mp.Kernel, mine)
		p.Modes = append(p.Modes, mp)
	}
	return p, p.Validate()
}

func dataplanesOf(ss []Sample) []string {
	var out []string
	for _, s := range ss {
		if !slices.Contains(out, s.Dataplane) {
			out = append(out, s.Dataplane)
		}
	}
	return out
}

func filter(ss []Sample, keep func(Sample) bool) []Sample {
	var out []Sample
	for _, s := range ss {
		if keep(s) {
			out = append(out, s)
		}
	}
	return out
}

// MeasuredKinds are the kinds calibrate makes syncs of, and the listing.
var MeasuredKinds = []string{string(costprofile.FullNew), string(costprofile.FullRestart), PartialService, PartialEndpoint, string(costprofile.Listing)}

// HeldOut is, per measured kind, the median relative error of each term
// (its measure kept) refitted on half the cluster shapes (every other one
// by size) in predicting the median time of each shape of the other half,
// both ways round.
func HeldOut(dataplane string, terms []costprofile.Term, ss []Sample) map[string]float64 {
	shapes := shapesOf(ss)
	half := map[Shape]int{}
	for i, sh := range shapes {
		half[sh] = i % 2
	}
	out := map[string]float64{}
	for _, kind := range MeasuredKinds {
		k := termKind(kind)
		var term *costprofile.Term
		for i := range terms {
			if terms[i].Kind == k {
				term = &terms[i]
			}
		}
		if term == nil {
			continue
		}
		var errs []float64
		for h := range 2 {
			train := filter(ss, func(s Sample) bool { return half[s.Shape] != h })
			c, err := costprofile.Fit(pointsOf(train, k, term.Measure))
			if err != nil {
				continue
			}
			for _, sh := range shapes {
				if half[sh] != h {
					continue
				}
				// The repeats of a sync did the same work; a shape's
				// listings differ by what was listed.
				byX := map[float64][]float64{}
				var xs []float64
				for _, s := range ss {
					if s.Shape != sh || s.Kind != kind && kind != string(costprofile.Listing) {
						continue
					}
					x, y, ok := xy(s, k, term.Measure)
					if !ok {
						continue
					}
					if _, seen := byX[x]; !seen {
						xs = append(xs, x)
					}
					byX[x] = append(byX[x], y)
				}
				for _, x := range xs {
					if m := costprofile.Median(byX[x]); m > 0 {
						errs = append(errs, math.Abs(c.At(x)-m)/m)
					}
				}
			}
		}
		if len(errs) > 0 {
			out[kind] = round4(costprofile.Median(errs))
		}
	}
	return out
}

func round4(v float64) float64 { return math.Round(v*1e4) / 1e4 }

// shapesOf lists the shapes measured, smallest cluster first.
func shapesOf(ss []Sample) []Shape {
	var out []Shape
	for _, s := range ss {
		if !slices.Contains(out, s.Shape) {
			out = append(out, s.Shape)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		sa, sb := a.Services*(1+a.EndpointsPerService), b.Services*(1+b.EndpointsPerService)
		if sa != sb {
			return sa < sb
		}
		return a.Services < b.Services
	})
	return out
}

// SelfError is, per dataplane and measured kind, the median relative
// error of the profile's whole kernel prediction for a sync (its kind
// read off the work, writes plus listing: what a replay is charged) against
// the kernel time measured. Its own points are what a profile is fitted
// to: the repeats of one sync (same dataplane, cluster, kind and work) are
// one point, compared by their median time, so one noisy repeat does not
// count as a miss. With the profile's own samples it is what CI checks;
// with a replay's, how far the kernel was from it.
func SelfError(p *costprofile.Profile, ss []Sample) map[string]map[string]float64 {
	type key struct {
		dataplane, kind, work string
		shape                 Shape
	}
	times := map[key][]float64{}
	works := map[key]sim.SyncWork{}
	var keys []key
	for _, s := range ss {
		if _, err := p.Mode(s.Dataplane); err != nil {
			continue
		}
		m := s.Kernel.Total().Seconds()
		if m <= 0 {
			continue
		}
		k := key{s.Dataplane, s.Kind, s.Work.String(), s.Shape}
		if _, seen := times[k]; !seen {
			keys = append(keys, k)
			works[k] = s.Work
		}
		times[k] = append(times[k], m)
	}
	errs := map[string]map[string][]float64{}
	for _, k := range keys {
		mp, _ := p.Mode(k.dataplane)
		m := costprofile.Median(times[k])
		if errs[k.dataplane] == nil {
			errs[k.dataplane] = map[string][]float64{}
		}
		errs[k.dataplane][k.kind] = append(errs[k.dataplane][k.kind], math.Abs(mp.KernelSeconds(works[k])-m)/m)
	}
	out := map[string]map[string]float64{}
	for d, byKind := range errs {
		out[d] = map[string]float64{}
		for k, v := range byKind {
			out[d][k] = round4(costprofile.Median(v))
		}
	}
	return out
}

// WriteTable prints one line per dataplane, shape and kind: the kernel
// time's median, min and max over the repeats, its two parts, the
// profile's prediction, and proxysim's own wall time for the sync.
func WriteTable(w io.Writer, res *Result) {
	fmt.Fprintf(w, "%-16s %-9s %-17s %4s %10s %10s %10s %10s %10s %10s %10s\n",
		"dataplane", "cluster", "kind", "n", "median", "min", "max", "write", "list", "predicted", "proxysim")
	type key struct {
		d    string
		sh   Shape
		kind string
	}
	var keys []key
	by := map[key][]Sample{}
	for _, s := range res.Samples {
		k := key{s.Dataplane, s.Shape, s.Kind}
		if _, ok := by[k]; !ok {
			keys = append(keys, k)
		}
		by[k] = append(by[k], s)
	}
	for _, k := range keys {
		ss := by[k]
		var tot, wr, li, wall []float64
		for _, s := range ss {
			tot = append(tot, s.Kernel.Total().Seconds())
			wr = append(wr, s.Kernel.Write.Seconds())
			li = append(li, s.Kernel.List.Seconds())
			wall = append(wall, (s.Wall - s.Kernel.Total()).Seconds())
		}
		pred := "-"
		if res.Profile != nil {
			if mp, err := res.Profile.Mode(k.d); err == nil {
				pred = ms(mp.KernelSeconds(ss[0].Work))
			}
		}
		fmt.Fprintf(w, "%-16s %-9s %-17s %4d %10s %10s %10s %10s %10s %10s %10s\n", k.d, k.sh, k.kind, len(ss),
			ms(costprofile.Median(tot)), ms(slices.Min(tot)), ms(slices.Max(tot)), ms(costprofile.Median(wr)), ms(costprofile.Median(li)), pred, ms(costprofile.Median(wall)))
	}
}

func ms(sec float64) string {
	return time.Duration(math.Round(sec * 1e9)).Round(10 * time.Microsecond).String()
}

// Summary prints each dataplane's terms (measure, form, held-out error)
// and its held-out and self errors per measured kind.
func Summary(w io.Writer, p *costprofile.Profile, self map[string]map[string]float64) {
	for _, mp := range p.Modes {
		fmt.Fprintf(w, "%s:\n", mp.Dataplane)
		for _, t := range mp.Kernel {
			fmt.Fprintf(w, "  %-13s over %-13s %s\n", t.Kind, t.Measure, t.Curve)
		}
		fmt.Fprintf(w, "  %-17s %9s %9s\n", "kind", "held-out", "self")
		for _, k := range MeasuredKinds {
			h, ok := mp.HeldOut[k]
			hs := "-"
			if ok {
				hs = fmt.Sprintf("%.1f%%", 100*h)
			}
			ss := "-"
			if v, ok := self[mp.Dataplane][k]; ok {
				ss = fmt.Sprintf("%.1f%%", 100*v)
			}
			fmt.Fprintf(w, "  %-17s %9s %9s\n", k, hs, ss)
		}
	}
}
