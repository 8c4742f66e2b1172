package sli

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// refScrapes is the scrape rule written directly over a node's kept
// observations: at each scrape instant, restarts up to it clear the
// counters (dropping what was not scraped before them), then every
// observation up to it counts.
func refScrapes(cfg Config, n Node, end time.Duration) []scrape {
	var out []scrape
	nb := len(cfg.Buckets) + 1
	counts := make([]float64, nb)
	exists := false
	i, r := 0, 0
	for t := n.Phase; t <= end; t += cfg.ScrapeInterval {
		for r < len(n.Restarts) && n.Restarts[r] <= t {
			for i < len(n.Observations) && n.Observations[i].At < n.Restarts[r] {
				i++
			}
			clear(counts)
			exists = false
			r++
		}
		for i < len(n.Observations) && n.Observations[i].At <= t {
			for b, ub := range cfg.Buckets {
				if n.Observations[i].Seconds <= ub {
					counts[b]++
				}
			}
			counts[nb-1]++
			exists = true
			i++
		}
		if exists {
			out = append(out, scrape{at: t, t: t.Milliseconds(), counts: slices.Clone(counts)})
		}
	}
	return out
}

// nodesWithRestarts are random nodes whose observations often fall on
// scrape instants and on restarts, the edges of the rules.
func nodesWithRestarts(n int, seed uint64, length time.Duration) []Node {
	rng := rand.New(rand.NewPCG(seed, 2))
	nodes := randomNodes(n, seed)
	for i := range nodes {
		nd := &nodes[i]
		var obs []Observation
		for _, o := range nd.Observations {
			if o.At > length {
				break
			}
			if rng.IntN(4) == 0 { // on a scrape instant
				o.At = nd.Phase + (o.At/(30*time.Second))*30*time.Second
			}
			if len(obs) > 0 && o.At < obs[len(obs)-1].At {
				o.At = obs[len(obs)-1].At
			}
			obs = append(obs, o)
			if rng.IntN(40) == 0 {
				nd.Restarts = append(nd.Restarts, o.At) // at an observation's instant
			} else if rng.IntN(60) == 0 {
				nd.Restarts = append(nd.Restarts, o.At+time.Duration(rng.IntN(5000))*time.Millisecond)
			}
		}
		nd.Observations = obs
		slices.Sort(nd.Restarts)
	}
	return nodes
}

// feed plays a node to a recorder as a run would: in time order, and at
// an instant with both, some observations before the restart.
func feed(rec *Recorder, n Node, rng *rand.Rand) {
	r := 0
	for _, o := range n.Observations {
		for r < len(n.Restarts) && (n.Restarts[r] < o.At || n.Restarts[r] == o.At && rng.IntN(2) == 0) {
			rec.Restart(n.Restarts[r])
			r++
		}
		rec.Observe(o.At, o.Seconds)
	}
	for ; r < len(n.Restarts); r++ {
		rec.Restart(n.Restarts[r])
	}
}

// TestRecorderIsTheScrapeRule checks the recorder against the rule written
// directly, fed in time order with restarts at observations' instants,
// queried at every end from before the last observation to past it.
func TestRecorderIsTheScrapeRule(t *testing.T) {
	cfg := Config{Nodes: 10}.withDefaults()
	rng := rand.New(rand.NewPCG(9, 9))
	for _, n := range nodesWithRestarts(30, 5, time.Hour) {
		rec := NewRecorder(cfg, n.Phase, nil)
		feed(rec, n, rng)
		last := time.Duration(0)
		if k := len(n.Observations); k > 0 {
			last = n.Observations[k-1].At
		}
		for _, end := range []time.Duration{last / 2, last, last + 17*time.Second, time.Hour} {
			want := refScrapes(cfg, n, end)
			got := rec.scrapesUntil(end)
			if len(want) == 0 && len(got) == 0 {
				continue
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				i := 0
				for i < min(len(got), len(want)) && fmt.Sprint(got[i]) == fmt.Sprint(want[i]) {
					i++
				}
				t.Fatalf("%s up to %v: %d scrapes, want %d; first difference at %d:\n got %v\nwant %v", n.Name, end, len(got), len(want), i, got[i:min(i+1, len(got))], want[i:min(i+1, len(want))])
			}
		}
		if rec.Samples() != int64(len(n.Observations)) {
			t.Fatalf("%s: %d samples, want %d", n.Name, rec.Samples(), len(n.Observations))
		}
	}
}

// TestRecordedIsAdded: nodes recorded as the run goes and added at the
// end give the same bytes as the same nodes' kept observations added.
func TestRecordedIsAdded(t *testing.T) {
	nodes := nodesWithRestarts(40, 11, time.Hour)
	end := 50 * time.Minute // some observations after the end
	kept := New(Config{Nodes: 40}, end)
	recorded := New(Config{Nodes: 40}, end)
	truth := &Exact{}
	rng := rand.New(rand.NewPCG(3, 3))
	for _, n := range nodes {
		if err := kept.Add(n); err != nil {
			t.Fatal(err)
		}
		rec := NewRecorder(recorded.Config(), n.Phase, truth)
		feed(rec, n, rng)
		if err := recorded.AddRecorded(n.Name, rec); err != nil {
			t.Fatal(err)
		}
	}
	recorded.Truth(truth)
	want, got := kept.Result(), recorded.Result()
	if fmt.Sprintf("%#v", got) != fmt.Sprintf("%#v", want) {
		t.Errorf("recorded differs from kept:\n got %+v\nwant %+v", got, want)
	}
	if want.Samples == 0 || len(want.Series) == 0 {
		t.Fatal("nothing measured")
	}
	other := NewRecorder(Config{ScrapeInterval: time.Minute}, 0, nil)
	if err := recorded.AddRecorded("x", other); err == nil {
		t.Error("a recorder of another scrape interval: no error")
	}
}

// TestExactIsTheSortedOrder checks order statistics and bucket counts
// against a sort, across chunk boundaries, with NaN, zeros and
// negative values.
func TestExactIsTheSortedOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	var e Exact
	var all []float64
	for i := range chunkLen + 5000 {
		v := math.Round(rng.NormFloat64()*3000) / 1000
		switch i % 997 {
		case 0:
			v = math.NaN()
		case 1:
			v = math.Copysign(0, -1)
		}
		reps := 1
		if i%50 == 0 {
			reps = 1 + i%7 // runs of one value, as a sync's batch of pod changes gives
		}
		for range reps {
			e.AddSeconds(v)
			all = append(all, v)
		}
		if i == chunkLen/2 {
			e.Seconds(1) // a query halfway: runs and chunks sorted, then more added
		}
	}
	sortNaNFirst(all)
	for _, r := range []int64{1, 2, 500, int64(len(all)) / 2, int64(len(all)) - 1, int64(len(all))} {
		got, want := e.Seconds(r), all[r-1]
		if !(got == want || math.IsNaN(got) && math.IsNaN(want)) {
			t.Errorf("rank %d: %v, want %v", r, got, want)
		}
	}
	for _, ub := range []float64{-1, 0, 0.25, 3, math.Inf(1)} {
		var want int64
		for _, v := range all {
			if v <= ub {
				want++
			}
		}
		if got := e.AtMostSeconds(ub); got != want {
			t.Errorf("at most %v: %d, want %d", ub, got, want)
		}
	}
	var d Exact
	ds := []time.Duration{5, -3, 7, 5, 5, 5, 0, 0, 1 << 40, 7, 7}
	for _, v := range ds {
		d.AddDuration(v)
	}
	slices.Sort(ds)
	for r := range ds {
		if got := d.Duration(int64(r + 1)); got != ds[r] {
			t.Errorf("duration rank %d: %v, want %v", r+1, got, ds[r])
		}
	}
}

// TestExactPackedIsTheSortedOrder checks the packed chunks against a sort:
// over two full chunks and part of a third, differences of every size
// (repeats, a byte, up to the whole key space), at many ranks and bounds,
// and through Merge and Data.
func TestExactPackedIsTheSortedOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	var e Exact
	var all []time.Duration
	for i := range 2*chunkLen + 12345 {
		var d time.Duration
		switch i % 5 {
		case 0:
			d = time.Duration(rng.Int64N(1000)) // dense: repeats and one-byte differences
		case 1:
			d = time.Duration(rng.Int64()) // the whole positive range
		case 2:
			d = -time.Duration(rng.Int64N(1 << 40))
		default:
			d = time.Duration(rng.Int64N(int64(20 * time.Second)))
		}
		e.AddDuration(d)
		all = append(all, d)
		if i%3 == 0 {
			e.AddDuration(d) // a repeat right after: a run
			all = append(all, d)
		}
	}
	slices.Sort(all)
	n := int64(len(all))
	if e.Len() != n {
		t.Fatalf("Len %d, want %d", e.Len(), n)
	}
	check := func(name string, x *Exact) {
		t.Helper()
		for r := int64(1); r <= n; r += 104729 {
			if got := x.Duration(r); got != all[r-1] {
				t.Errorf("%s: rank %d: %v, want %v", name, r, got, all[r-1])
			}
		}
		for _, r := range []int64{1, 2, 127, 128, 129, chunkLen, chunkLen + 1, n - 1, n} {
			if got := x.Duration(r); got != all[r-1] {
				t.Errorf("%s: rank %d: %v, want %v", name, r, got, all[r-1])
			}
		}
		for _, ub := range []time.Duration{-1 << 41, -1, 0, 500, 999, time.Second, 1 << 50, 1<<63 - 1} {
			want, _ := slices.BinarySearch(all, ub+1)
			if ub == 1<<63-1 {
				want = len(all)
			}
			if got := (exactSet{x}).atMost(uint64(ub) ^ 1<<63); got != int64(want) {
				t.Errorf("%s: at most %v: %d, want %d", name, ub, got, want)
			}
		}
	}
	check("added", &e)
	var m Exact
	m.Merge(&e)
	check("merged", &m)
	back, err := ExactFromData(e.Data())
	if err != nil {
		t.Fatal(err)
	}
	check("from data", back)
}

// TestAddDurationNIsRepeatedAdds checks that adding a value n times at
// once gives the quantiles n single adds do, a large n as a run.
func TestAddDurationNIsRepeatedAdds(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	var once, each Exact
	for i := range 20000 {
		d := time.Duration(rng.Int64N(50))
		n := rng.Int64N(4)
		if i%1000 == 0 {
			n = 150000 // a start-up's batch
		}
		once.AddDurationN(d, n)
		for range n {
			each.AddDuration(d)
		}
	}
	if once.Len() != each.Len() {
		t.Fatalf("AddDurationN: %d values, repeated AddDuration: %d", once.Len(), each.Len())
	}
	if len(once.Data().Runs) == 0 {
		t.Error("AddDurationN kept no run for a batch of 150,000")
	}
	for r := int64(1); r <= once.Len(); r += 997 {
		if a, b := once.Duration(r), each.Duration(r); a != b {
			t.Errorf("rank %d: AddDurationN %v, repeated AddDuration %v", r, a, b)
		}
	}
}
