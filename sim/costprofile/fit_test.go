package costprofile

import (
	"math"
	"math/rand/v2"
	"testing"
)

// points samples f at sizes from 100 to 100,000, three timings each with
// ±noise relative jitter (seeded).
func points(f func(float64) float64, noise float64, seed uint64) []Point {
	rng := rand.New(rand.NewPCG(seed, 2))
	var pts []Point
	for _, x := range []float64{100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000} {
		var s []float64
		for range 3 {
			s = append(s, f(x)*(1+noise*(2*rng.Float64()-1)))
		}
		pts = append(pts, Point{Size: x, Seconds: s})
	}
	return pts
}

func TestFitFindsTheShape(t *testing.T) {
	for _, c := range []struct {
		name string
		f    func(float64) float64
		want Form
	}{
		{"linear", func(x float64) float64 { return 0.002 + 3e-6*x }, Linear},
		// A quadratic with a visible square term: a linear fit is off by
		// far more than the noise at both ends.
		{"quadratic", func(x float64) float64 { return 0.01 + 1e-6*x + 4e-10*x*x }, Quadratic},
		{"power 1.5", func(x float64) float64 { return 0.005 + 2e-7*math.Pow(x, 1.5) }, Power},
	} {
		pts := points(c.f, 0.02, 1)
		got, err := Fit(pts)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		// Power can take any of the others' shapes: accept it when it is
		// as good, but a linear truth must not come out as quadratic with
		// a large error and vice versa.
		if got.Form != c.want && !(got.Form == Power && got.HeldOutError < 0.03) {
			t.Errorf("%s: fitted %v, want %s (%s)", c.name, got, c.want, got.Considered)
		}
		if got.HeldOutError > 0.03 || got.FitError > 0.03 {
			t.Errorf("%s: errors too large for 2%% noise: %v", c.name, got)
		}
		for _, x := range []float64{300, 3000, 30000} {
			if rel := math.Abs(got.At(x)-c.f(x)) / c.f(x); rel > 0.05 {
				t.Errorf("%s: at %v predicts %v, truth %v (%.1f%% off)", c.name, x, got.At(x), c.f(x), 100*rel)
			}
		}
	}
}

// The held-out error is the measure the issue asks for: a linear fit of a
// clearly curved cost must report a large one (so a bad model shows).
func TestHeldOutErrorShowsAWrongShape(t *testing.T) {
	pts := points(func(x float64) float64 { return 0.001 + 1e-9*x*x }, 0.01, 3)
	c, _ := fitFormCurve(Linear, pts)
	if c.HeldOutError < 0.25 {
		t.Errorf("a line through x² reports a held-out error of %.1f%%, want well above 25%%", 100*c.HeldOutError)
	}
}

// fitFormCurve is Fit restricted to one form.
func fitFormCurve(f Form, pts []Point) (Curve, error) {
	saved := Forms
	Forms = []Form{f}
	defer func() { Forms = saved }()
	return Fit(pts)
}

func TestFitIsDeterministic(t *testing.T) {
	pts := points(func(x float64) float64 { return 0.003 + 1e-6*x*math.Log1p(x) }, 0.05, 9)
	a, _ := Fit(pts)
	b, _ := Fit(pts)
	if a.String() != b.String() || a.Considered != b.Considered {
		t.Errorf("two fits differ: %v / %v", a, b)
	}
}

func TestFitRefusesBadPoints(t *testing.T) {
	if _, err := Fit(points(func(float64) float64 { return 1 }, 0, 1)[:3]); err != ErrTooFewPoints {
		t.Errorf("3 points: %v, want ErrTooFewPoints", err)
	}
	dup := []Point{{1, []float64{1}}, {1, []float64{1}}, {2, []float64{1}}, {3, []float64{1}}}
	if _, err := Fit(dup); err == nil {
		t.Error("a size twice: no error")
	}
	empty := []Point{{1, []float64{1}}, {2, nil}, {3, []float64{1}}, {4, []float64{1}}}
	if _, err := Fit(empty); err == nil {
		t.Error("a size without timings: no error")
	}
}

func TestCurveValidate(t *testing.T) {
	for _, c := range []Curve{{Form: "cubic", Params: []float64{1, 2}}, {Form: Linear, Params: []float64{1}}, {Form: Power, Params: []float64{1, math.NaN(), 1}}} {
		if c.Validate() == nil {
			t.Errorf("%+v: no error", c)
		}
	}
	if err := (Curve{Form: Quadratic, Params: []float64{1, 2, 3}}).Validate(); err != nil {
		t.Error(err)
	}
}
