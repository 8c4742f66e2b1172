// Package costprofile turns the work of a sync into the time it takes, from
// curves fitted over measured points: a cost profile.
//
// This file is the fitting. A curve is one of a few forms, chosen by how
// well each predicts points it was not fitted on (two-fold: fitted on every
// other size, judged on the rest, then the other way round), and refitted on
// every point once chosen. Errors are relative, because sizes span orders of
// magnitude and a millisecond off a 2 ms sync matters as much as a second
// off a 2 s one. It must stay deterministic: no randomness, no map order.
package costprofile

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Form is a curve's shape.
type Form string

const (
	// Linear is a + b·x.
	Linear Form = "linear"
	// Power is a + b·x^c, with c fitted in [0.3, 3].
	Power Form = "power"
	// NLogN is a + b·x·ln(1+x).
	NLogN Form = "nlogn"
	// Quadratic is a + b·x + c·x².
	Quadratic Form = "quadratic"
)

// Forms are the shapes Fit tries, simplest first: of the forms within a
// margin of the best held-out error, the first wins.
var Forms = []Form{Linear, NLogN, Power, Quadratic}

// Point is one measured size and its repeated timings, in seconds.
type Point struct {
	Size    float64   `json:"size"`
	Seconds []float64 `json:"seconds"`
}

// Median is the point's median timing.
func (p Point) Median() float64 { return Median(p.Seconds) }

// Curve is a fitted form.
type Curve struct {
	Form   Form      `json:"form"`
	Params []float64 `json:"params"`
	// HeldOutError is the median relative error of the two-fold check that
	// chose the form: each half predicted by a fit on the other.
	HeldOutError float64 `json:"heldOutError"`
	// FitError is the median relative error of the final fit on its own
	// points.
	FitError float64 `json:"fitError"`
	// Considered lists every form tried with its held-out error, for the
	// record ("linear 0.31, power 0.06, ...").
	Considered string `json:"considered,omitempty"`
}

// At is the curve's time in seconds at a size, never below zero.
func (c Curve) At(x float64) float64 {
	p := c.Params
	var y float64
	switch c.Form {
	case Linear:
		y = p[0] + p[1]*x
	case NLogN:
		y = p[0] + p[1]*x*math.Log1p(x)
	case Power:
		y = p[0] + p[1]*math.Pow(x, p[2])
	case Quadratic:
		y = p[0] + p[1]*x + p[2]*x*x
	}
	return math.Max(0, y)
}

func (c Curve) String() string {
	ps := make([]string, len(c.Params))
	for i, v := range c.Params {
		ps[i] = strconv.FormatFloat(v, 'g', 6, 64)
	}
	return fmt.Sprintf("%s(%s), held-out error %.1f%%, fit error %.1f%%", c.Form, strings.Join(ps, ", "), 100*c.HeldOutError, 100*c.FitError)
}

// Validate checks that a curve can be evaluated.
func (c Curve) Validate() error {
	want := map[Form]int{Linear: 2, NLogN: 2, Power: 3, Quadratic: 3}
	n, ok := want[c.Form]
	switch {
	case !ok:
		return fmt.Errorf("unknown form %q (want %s)", c.Form, formList())
	case len(c.Params) != n:
		return fmt.Errorf("form %s takes %d params, got %d", c.Form, n, len(c.Params))
	}
	for _, v := range c.Params {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("form %s: param %v is not a number", c.Form, v)
		}
	}
	return nil
}

func formList() string {
	s := make([]string, len(Forms))
	for i, f := range Forms {
		s[i] = string(f)
	}
	return strings.Join(s, ", ")
}

// ErrTooFewPoints: a fit needs at least four distinct sizes (two per half).
var ErrTooFewPoints = errors.New("a curve needs at least 4 distinct sizes")

// Fit fits every form to the points and keeps the simplest whose held-out
// error is within 25 % (plus 0.2 points) of the lowest.
func Fit(points []Point) (Curve, error) {
	pts := slices.Clone(points)
	sort.SliceStable(pts, func(i, j int) bool { return pts[i].Size < pts[j].Size })
	for i := 1; i < len(pts); i++ {
		if pts[i].Size == pts[i-1].Size {
			return Curve{}, fmt.Errorf("size %v measured twice: give its timings as one point", pts[i].Size)
		}
	}
	if len(pts) < 4 {
		return Curve{}, ErrTooFewPoints
	}
	for _, p := range pts {
		if len(p.Seconds) == 0 {
			return Curve{}, fmt.Errorf("size %v has no timings", p.Size)
		}
	}
	var even, odd []Point
	for i, p := range pts {
		if i%2 == 0 {
			even = append(even, p)
		} else {
			odd = append(odd, p)
		}
	}
	held := make([]float64, len(Forms))
	bestErr := math.Inf(1)
	var considered []string
	for i, f := range Forms {
		held[i] = math.Inf(1)
		a, okA := fitForm(f, even)
		b, okB := fitForm(f, odd)
		if !okA || !okB {
			considered = append(considered, fmt.Sprintf("%s -", f))
			continue
		}
		var errs []float64
		errs = append(errs, relErrors(Curve{Form: f, Params: a}, odd)...)
		errs = append(errs, relErrors(Curve{Form: f, Params: b}, even)...)
		held[i] = Median(errs)
		bestErr = math.Min(bestErr, held[i])
		considered = append(considered, fmt.Sprintf("%s %.3f", f, held[i]))
	}
	if math.IsInf(bestErr, 1) {
		return Curve{}, errors.New("no form fits these points")
	}
	// The simplest form (Forms' order) that is nearly as good as the best
	// wins: a third parameter must earn its place, or noise picks it.
	var best Curve
	for i, f := range Forms {
		if held[i] <= bestErr*1.25+0.002 {
			best = Curve{Form: f, HeldOutError: held[i]}
			break
		}
	}
	params, _ := fitForm(best.Form, pts)
	best.Params = params
	best.FitError = Median(relErrors(best, pts))
	best.Considered = strings.Join(considered, ", ")
	return best, nil
}

// relErrors are |predicted - measured| / measured for each point's median.
func relErrors(c Curve, pts []Point) []float64 {
	out := make([]float64, 0, len(pts))
	for _, p := range pts {
		m := p.Median()
		if m <= 0 {
			continue
		}
		out = append(out, math.Abs(c.At(p.Size)-m)/m)
	}
	return out
}

// fitForm fits one form by least squares on relative error (each point
// weighted by 1/median²). Power's exponent is searched on a grid, the rest
// solved exactly for each exponent.
func fitForm(f Form, pts []Point) ([]float64, bool) {
	xs := make([]float64, len(pts))
	ys := make([]float64, len(pts))
	for i, p := range pts {
		xs[i], ys[i] = p.Size, p.Median()
	}
	switch f {
	case Linear:
		return leastSquares(xs, ys, func(x float64) []float64 { return []float64{1, x} })
	case NLogN:
		return leastSquares(xs, ys, func(x float64) []float64 { return []float64{1, x * math.Log1p(x)} })
	case Quadratic:
		if len(pts) < 3 {
			return nil, false
		}
		return leastSquares(xs, ys, func(x float64) []float64 { return []float64{1, x, x * x} })
	case Power:
		var best []float64
		bestErr := math.Inf(1)
		for c := 0.3; c <= 3.0001; c += 0.01 {
			c := math.Round(c*100) / 100
			p, ok := leastSquares(xs, ys, func(x float64) []float64 { return []float64{1, math.Pow(x, c)} })
			if !ok {
				continue
			}
			cur := Curve{Form: Power, Params: []float64{p[0], p[1], c}}
			var e float64
			for i := range xs {
				if ys[i] > 0 {
					d := (cur.At(xs[i]) - ys[i]) / ys[i]
					e += d * d
				}
			}
			if e < bestErr {
				bestErr, best = e, cur.Params
			}
		}
		return best, best != nil
	}
	return nil, false
}

// leastSquares solves the weighted normal equations for y ≈ Σ p_k·basis_k(x),
// with weights 1/y² (relative error). Each basis column is scaled to at
// most 1 first, so that x² of a million-size point does not swamp the
// constant term.
func leastSquares(xs, ys []float64, basis func(float64) []float64) ([]float64, bool) {
	k := len(basis(0))
	if len(xs) < k {
		return nil, false
	}
	rows := make([][]float64, len(xs))
	scale := make([]float64, k)
	for i, x := range xs {
		rows[i] = basis(x)
		for c, v := range rows[i] {
			scale[c] = math.Max(scale[c], math.Abs(v))
		}
	}
	for c := range scale {
		if scale[c] == 0 {
			scale[c] = 1
		}
	}
	a := make([][]float64, k)
	for i := range a {
		a[i] = make([]float64, k+1)
	}
	for i := range xs {
		if ys[i] <= 0 {
			continue
		}
		w := 1 / (ys[i] * ys[i])
		for r := range k {
			br := rows[i][r] / scale[r]
			for c := range k {
				a[r][c] += w * br * rows[i][c] / scale[c]
			}
			a[r][k] += w * br * ys[i]
		}
	}
	p, ok := solve(a)
	if !ok {
		return nil, false
	}
	for c := range p {
		p[c] /= scale[c]
	}
	return p, true
}

// solve is Gaussian elimination with partial pivoting on an augmented
// matrix.
func solve(a [][]float64) ([]float64, bool) {
	n := len(a)
	for col := range n {
		piv := col
		for r := col + 1; r < n; r++ {
			if math.Abs(a[r][col]) > math.Abs(a[piv][col]) {
				piv = r
			}
		}
		if math.Abs(a[piv][col]) < 1e-300 {
			return nil, false
		}
		a[col], a[piv] = a[piv], a[col]
		for r := range n {
			if r == col {
				continue
			}
			f := a[r][col] / a[col][col]
			for c := col; c <= n; c++ {
				a[r][c] -= f * a[col][c]
			}
		}
	}
	out := make([]float64, n)
	for i := range n {
		out[i] = a[i][n] / a[i][i]
		if math.IsNaN(out[i]) || math.IsInf(out[i], 0) {
			return nil, false
		}
	}
	return out, true
}

// Median is v's median (NaN when v is empty); v is left as it is.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
