package sli

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func TestScrapeIntervalFor(t *testing.T) {
	for n, want := range map[int]time.Duration{1: 30 * time.Second, 100: 30 * time.Second, 1000: 30 * time.Second, 1001: time.Minute, 5000: time.Minute} {
		if got := ScrapeIntervalFor(n); got != want {
			t.Errorf("ScrapeIntervalFor(%d) = %v, want %v", n, got, want)
		}
	}
}

func TestBucketQuantile(t *testing.T) {
	inf := math.Inf(1)
	for _, c := range []struct {
		name string
		q    float64
		bs   buckets
		want float64
	}{
		// rank 10 of 20 lands at the top of the first bucket, from 0.
		{"first bucket from zero", 0.5, buckets{{1, 10}, {2, 20}, {inf, 20}}, 1},
		// rank 15: 5 of the second bucket's 10.
		{"interpolated", 0.75, buckets{{1, 10}, {2, 20}, {inf, 20}}, 1.5},
		// rank past the last finite bucket: its bound.
		{"in +Inf", 0.99, buckets{{1, 10}, {2, 10}, {inf, 20}}, 2},
		{"no observations", 0.5, buckets{{1, 0}, {inf, 0}}, math.NaN()},
		{"no +Inf", 0.5, buckets{{1, 1}, {2, 2}}, math.NaN()},
		// A lowest bound of 0 is returned as it is.
		{"zero bucket", 0.5, buckets{{0, 10}, {1, 10}, {inf, 10}}, 0},
		// 2's count below 1's is lifted to it (monotonic envelope): rank 9
		// of 10 in the first bucket.
		{"not monotonic", 0.9, buckets{{1, 10}, {2, 7}, {inf, 10}}, 0.9},
		{"unsorted input", 0.75, buckets{{inf, 20}, {2, 20}, {1, 10}}, 1.5},
	} {
		got := bucketQuantile(c.q, append(buckets(nil), c.bs...))
		if !(got == c.want || math.IsNaN(got) && math.IsNaN(c.want)) {
			t.Errorf("%s: bucketQuantile(%v) = %v, want %v", c.name, c.q, got, c.want)
		}
	}
}

func TestQuantileOverTime(t *testing.T) {
	// rank 0.99*4 = 3.96 between 4 and 5.
	if got := quantile(0.99, []float64{5, 1, 3, 4, 2}); math.Abs(got-4.96) > 1e-12 {
		t.Errorf("quantile = %v, want 4.96", got)
	}
	// NaN sorts first: [NaN, 1, 2], rank 1.98 between 1 and 2.
	if got := quantile(0.99, []float64{2, math.NaN(), 1}); math.Abs(got-1.98) > 1e-12 {
		t.Errorf("quantile with NaN = %v, want 1.98", got)
	}
	if got := quantile(0.5, nil); !math.IsNaN(got) {
		t.Errorf("quantile of nothing = %v, want NaN", got)
	}
}

func TestRateExtrapolation(t *testing.T) {
	mk := func(ts []int64, vs []float64) []scrape {
		var out []scrape
		for i := range ts {
			out = append(out, scrape{t: ts[i], counts: []float64{vs[i]}})
		}
		return out
	}
	// Samples every 30s over [0, 300s], the first 15s in and the last
	// 15s before the end, both within 1.1 average intervals: extrapolated
	// to both edges, 270s of sampling -> 300s, then per second.
	ts := []int64{15000, 45000, 75000, 105000, 135000, 165000, 195000, 225000, 255000, 285000}
	vs := []float64{10, 10, 12, 12, 12, 15, 15, 15, 15, 19}
	if got, want := rate(mk(ts, vs), 0, 0, 300000, 5*time.Minute), 9.0*(300.0/270.0)/300; math.Abs(got-want) > 1e-15 {
		t.Errorf("rate = %v, want %v", got, want)
	}
	// A counter reset (19 -> 2) adds the value before it.
	vs2 := []float64{10, 10, 12, 12, 12, 15, 15, 15, 19, 2}
	if got, want := rate(mk(ts, vs2), 0, 0, 300000, 5*time.Minute), (2-10+19.0)*(300.0/270.0)/300; math.Abs(got-want) > 1e-15 {
		t.Errorf("rate over a reset = %v, want %v", got, want)
	}
	// A counter that starts at 1 and rises to 4: the zero point (1/3 of
	// the 270s before the first sample = 90s) is further than the 15s to
	// the range's start, so the start is extrapolated by 15s.
	vs3 := []float64{1, 1, 1, 1, 1, 1, 1, 1, 1, 4}
	if got, want := rate(mk(ts, vs3), 0, 0, 300000, 5*time.Minute), 3.0*(300.0/270.0)/300; math.Abs(got-want) > 1e-15 {
		t.Errorf("rate from 1 = %v, want %v", got, want)
	}
	// Far from the start (first sample 200s in, the zero point 45s
	// before it): only half an average interval is added there.
	ts4 := []int64{200000, 230000, 260000, 290000}
	vs4 := []float64{3, 3, 6, 9}
	if got, want := rate(mk(ts4, vs4), 0, 0, 300000, 5*time.Minute), 6.0*((90.0+15+10)/90.0)/300; math.Abs(got-want) > 1e-15 {
		t.Errorf("rate far from the start = %v, want %v", got, want)
	}
	// A counter at 0 at its first sample: its zero point is that sample,
	// so nothing is added before it.
	vs5 := []float64{0, 3, 3, 6}
	if got, want := rate(mk(ts4, vs5), 0, 0, 300000, 5*time.Minute), 6.0*((90.0+0+10)/90.0)/300; math.Abs(got-want) > 1e-15 {
		t.Errorf("rate far from the start = %v, want %v", got, want)
	}
}

// One node, one sample of 2.3s: it reaches the rule only once the series
// exists at a scrape before it (the first observation creates the series,
// so its own increase is never seen). The second observation, of 2.3s
// again, is: the rule interpolates inside the le=3 bucket.
func TestOneNodeThroughTheRule(t *testing.T) {
	a := New(Config{Nodes: 1}, 20*time.Minute)
	if err := a.Add(Node{Name: "n1", Observations: []Observation{{100 * time.Second, 2.3}, {400 * time.Second, 2.3}}}); err != nil {
		t.Fatal(err)
	}
	r := a.Result()
	if r.Samples != 2 || r.True99 != 2.3 || r.True50 != 2.3 {
		t.Fatalf("truth: %d samples, p50 %v p99 %v; want 2 samples of 2.3", r.Samples, r.True50, r.True99)
	}
	near := func(x, want float64) bool { return math.Abs(x-want) < 1e-9 }
	if !near(r.Perc50, 2.5) || !near(r.Perc90, 2.9) || !near(r.Perc99, 2.99) {
		t.Errorf("Perc50/90/99 = %v/%v/%v, want 2.5/2.9/2.99", r.Perc50, r.Perc90, r.Perc99)
	}
	var withData int
	for _, p := range r.Series {
		if !math.IsNaN(p.Quantiles[2]) {
			withData++
			// Only windows holding the scrapes before and after the
			// rise (390s and 420s) have data: evaluations at 420s..690s.
			if p.At < 420*time.Second || p.At > 690*time.Second {
				t.Errorf("data at %v, outside 420s..690s", p.At)
			}
		}
	}
	if withData != 10 {
		t.Errorf("%d evaluations with data, want 10 (420s to 690s every 30s)", withData)
	}
}

// A restarted kube-proxy starts its counters again: the rule sees the
// reset as a reset, not as a negative rate.
func TestRestartResetsCounters(t *testing.T) {
	a := New(Config{Nodes: 1}, 20*time.Minute)
	obs := []Observation{{10 * time.Second, 1.2}, {100 * time.Second, 1.2}, {200 * time.Second, 1.2}, {320 * time.Second, 7.5}, {380 * time.Second, 7.5}}
	if err := a.Add(Node{Name: "n1", Observations: obs, Restarts: []time.Duration{300 * time.Second}}); err != nil {
		t.Fatal(err)
	}
	r := a.Result()
	for _, p := range r.Series {
		for _, q := range p.Quantiles {
			if q < 0 {
				t.Fatalf("negative quantile %v at %v", q, p.At)
			}
		}
	}
	// The window at 390s holds 1.2s samples before the restart and the
	// 7.5s one after it (the first after a restart creates the series
	// again and is lost, the second is seen).
	if math.IsNaN(r.Perc99) || r.Perc99 <= 7 {
		t.Errorf("Perc99 = %v, want the 7.5s sample's bucket (7..8)", r.Perc99)
	}
}

func randomNodes(n int, seed uint64) []Node {
	rng := rand.New(rand.NewPCG(seed, 1))
	var nodes []Node
	for i := range n {
		nd := Node{Name: fmt.Sprintf("node-%04d", i), Phase: time.Duration(rng.IntN(30000)) * time.Millisecond}
		at := time.Duration(0)
		for {
			at += time.Duration(rng.IntN(20000)) * time.Millisecond
			if at > time.Hour {
				break
			}
			nd.Observations = append(nd.Observations, Observation{At: at, Seconds: math.Round(rng.ExpFloat64()*2000) / 1000})
		}
		nodes = append(nodes, nd)
	}
	return nodes
}

// Any split of the nodes, merged, gives the same bytes as one aggregate
// of all of them: shards can compute the SLI apart.
func TestMergeIsExact(t *testing.T) {
	nodes := randomNodes(60, 7)
	whole := New(Config{Nodes: 60}, time.Hour)
	for _, n := range nodes {
		if err := whole.Add(n); err != nil {
			t.Fatal(err)
		}
	}
	want := fmt.Sprintf("%#v", whole.Result())
	for _, shards := range []int{2, 3, 7} {
		parts := make([]*Aggregate, shards)
		for i := range parts {
			parts[i] = New(Config{Nodes: 60}, time.Hour)
		}
		// Round-robin, so each part sums its nodes in another order.
		for i := len(nodes) - 1; i >= 0; i-- {
			if err := parts[i%shards].Add(nodes[i]); err != nil {
				t.Fatal(err)
			}
		}
		for _, p := range parts[1:] {
			if err := parts[0].Merge(p); err != nil {
				t.Fatal(err)
			}
		}
		if got := fmt.Sprintf("%#v", parts[0].Result()); got != want {
			t.Errorf("%d shards merged differ from one aggregate", shards)
		}
	}
	if err := whole.Merge(New(Config{Nodes: 60}, 2*time.Hour)); err == nil {
		t.Error("merging runs of different lengths: no error")
	}
}

// Over steady traffic from many nodes, the measurement's p99 lands in the
// truth's bucket neighbourhood: within one bucket width (1s here) of it.
func TestSteadyTrafficApproachesTheTruth(t *testing.T) {
	nodes := randomNodes(40, 3)
	a := New(Config{Nodes: 40}, time.Hour)
	for _, n := range nodes {
		if err := a.Add(n); err != nil {
			t.Fatal(err)
		}
	}
	r := a.Result()
	if r.Samples < 10000 {
		t.Fatalf("only %d samples", r.Samples)
	}
	// quantile_over_time(0.99) of 5-minute p99s sits above the run's p99.
	if r.Perc99 < r.True99-1 || r.Perc99 > r.True99+2 {
		t.Errorf("Perc99 %v, true p99 %v: more than a bucket apart", r.Perc99, r.True99)
	}
	if r.Perc50 > r.Perc90 || r.Perc90 > r.Perc99 {
		t.Errorf("not ascending: %v %v %v", r.Perc50, r.Perc90, r.Perc99)
	}
}

func TestBadNodes(t *testing.T) {
	a := New(Config{Nodes: 1}, time.Hour)
	if err := a.Add(Node{Name: "x", Observations: []Observation{{2 * time.Second, 1}, {time.Second, 1}}}); err == nil {
		t.Error("observations out of order: no error")
	}
	if err := a.Add(Node{Name: "y", Phase: time.Minute}); err == nil {
		t.Error("phase past the scrape interval: no error")
	}
}

func BenchmarkAggregate100NodesHour(b *testing.B) {
	nodes := randomNodes(100, 1)
	b.ReportAllocs()
	for b.Loop() {
		a := New(Config{Nodes: 100}, time.Hour)
		for _, n := range nodes {
			_ = a.Add(n)
		}
		_ = a.Result()
	}
}
