// Package sli computes the network programming latency SLI the way
// ClusterLoader2's NetworkProgrammingLatency measurement computes it, from
// the samples each node's kube-proxy observed, and beside it the exact
// quantiles of the same samples (the truth the measurement approximates).
//
// The measurement reads kube-proxy's histogram through Prometheus (FACTS
// §2.4; perf-tests clusterloader2 pkg/measurement/common/slos/
// network_programming.go and pkg/prometheus/manifests/prometheus-rules.yaml,
// Prometheus v2.25.0 as CL2 deploys it). This package follows that path:
//
//  1. Prometheus scrapes every kube-proxy's
//     kubeproxy_network_programming_duration_seconds histogram every scrape
//     interval, each node at its own phase in the interval;
//  2. the recording rule histogram_quantile(q, sum(rate(..._bucket[5m])) by
//     (le)) runs every evaluation interval for q = 0.5, 0.9 and 0.99, pooling
//     every node's buckets;
//  3. at the end, quantile_over_time(0.99, rule[run]) of each of the three
//     series gives Perc50, Perc90 and Perc99.
//
// Sums over nodes are exact (big.Float accumulators wide enough that no
// addition rounds), so an Aggregate built from any partition of the nodes
// and merged gives the same bytes as one built from all of them. Nothing
// here reads the wall clock: instants are offsets from the run's start.
package sli

import (
	"fmt"
	"math"
	"math/big"
	"slices"
	"sort"
	"time"

	"github.com/proxysim/proxysim/sim/kpmetrics"
)

// Quantiles are the recording rule's three quantiles, in CL2's order.
var Quantiles = []float64{0.5, 0.9, 0.99}

// Config is how the measurement samples the run.
type Config struct {
	// ScrapeInterval: how often Prometheus scrapes each kube-proxy; zero
	// means ScrapeIntervalFor(Nodes).
	ScrapeInterval time.Duration
	// EvalInterval: how often the recording rule runs; zero means 30s,
	// prometheus-operator's default (CL2's Prometheus object sets none).
	EvalInterval time.Duration
	// RateWindow is the rule's rate() range; zero means 5m.
	RateWindow time.Duration
	// Nodes is the cluster's size, for the default scrape interval.
	Nodes int
	// Buckets are the histogram's finite upper bounds, increasing (as
	// Prometheus has them; others are sorted); nil means kube-proxy's
	// (kpmetrics.ProgrammingBuckets).
	Buckets []float64
}

// ScrapeIntervalFor is the kube-proxy scrape interval CL2 configures for a
// cluster of n nodes: 30s up to 1,000 nodes, 60s above (perf-tests
// prometheus-serviceMonitorKubeProxy.yaml: min(60, 30*(1+n/1001)) seconds).
func ScrapeIntervalFor(n int) time.Duration {
	return time.Duration(min(60, 30*(1+n/1001))) * time.Second
}

func (c Config) withDefaults() Config {
	if c.ScrapeInterval <= 0 {
		c.ScrapeInterval = ScrapeIntervalFor(c.Nodes)
	}
	if c.EvalInterval <= 0 {
		c.EvalInterval = 30 * time.Second
	}
	if c.RateWindow <= 0 {
		c.RateWindow = 5 * time.Minute
	}
	if c.Buckets == nil {
		c.Buckets = kpmetrics.ProgrammingBuckets
	}
	if !slices.IsSorted(c.Buckets) {
		c.Buckets = slices.Clone(c.Buckets)
		slices.Sort(c.Buckets)
	}
	return c
}

// Observation is one sample kube-proxy observed into the histogram: at At
// (since the run's start) a latency of Seconds.
type Observation struct {
	At      time.Duration
	Seconds float64
}

// Node is one kube-proxy's part of the run.
type Node struct {
	Name string
	// Phase is when in each scrape interval Prometheus scrapes this node
	// (Prometheus spreads its targets by a hash of their labels; a
	// simulation picks a phase per node, seeded).
	Phase time.Duration
	// Observations in time order.
	Observations []Observation
	// Restarts are the instants the node's kube-proxy started again: its
	// counters start from zero, and the series is absent until its first
	// observation (client_golang creates a labelled child on first use).
	Restarts []time.Duration
}

// Aggregate accumulates nodes for one run of length End.
type Aggregate struct {
	cfg   Config
	end   time.Duration
	evals []time.Duration
	// sums[e][b] is sum over nodes of rate(bucket b) at evals[e]; the
	// last bucket is +Inf.
	sums    [][]*big.Float
	present []bool
	nodes   int
	// truth holds every observation, for the exact quantiles: those
	// added here, and those recorders kept (Truth).
	truth *Exact
	kept  exactSet
	term  big.Float // scratch for one rate
}

// accPrec is wide enough that adding float64 rates of any magnitude seen
// here never rounds, which makes the sums independent of order.
const accPrec = 2200

// New starts an aggregate for a run of length end.
func New(cfg Config, end time.Duration) *Aggregate {
	cfg = cfg.withDefaults()
	a := &Aggregate{cfg: cfg, end: end, truth: &Exact{}}
	for t := cfg.EvalInterval; t <= end; t += cfg.EvalInterval {
		a.evals = append(a.evals, t)
	}
	a.sums = make([][]*big.Float, len(a.evals))
	a.present = make([]bool, len(a.evals))
	return a
}

// Config is the aggregate's configuration, defaults applied.
func (a *Aggregate) Config() Config { return a.cfg }

func (a *Aggregate) sum(e, b int) *big.Float {
	if a.sums[e] == nil {
		a.sums[e] = make([]*big.Float, len(a.cfg.Buckets)+1)
	}
	if a.sums[e][b] == nil {
		a.sums[e][b] = new(big.Float).SetPrec(accPrec)
	}
	return a.sums[e][b]
}

// scrape is one sample of a node's cumulative bucket counts, at T
// milliseconds (Prometheus keeps timestamps in ms).
type scrape struct {
	at     time.Duration
	t      int64
	counts []float64 // per bucket, +Inf last
}

// Add adds a node's observations.
func (a *Aggregate) Add(n Node) error {
	if !slices.IsSortedFunc(n.Observations, func(x, y Observation) int { return cmpDur(x.At, y.At) }) {
		return fmt.Errorf("node %s: observations out of time order", n.Name)
	}
	if n.Phase < 0 || n.Phase >= a.cfg.ScrapeInterval {
		return fmt.Errorf("node %s: scrape phase %v outside [0, %v)", n.Name, n.Phase, a.cfg.ScrapeInterval)
	}
	// The observations and restarts in time order, a restart before the
	// observations of its instant.
	rec := NewRecorder(a.cfg, n.Phase, a.truth)
	r := 0
	for _, o := range n.Observations {
		for r < len(n.Restarts) && n.Restarts[r] <= o.At {
			rec.Restart(n.Restarts[r])
			r++
		}
		rec.Observe(o.At, o.Seconds)
	}
	for ; r < len(n.Restarts); r++ {
		rec.Restart(n.Restarts[r])
	}
	a.addScrapes(rec.scrapesUntil(a.end))
	return nil
}

// AddRecorded adds a node recorded as the run went, up to the
// aggregate's end; its values must be in the Exact given to Truth.
func (a *Aggregate) AddRecorded(name string, rec *Recorder) error {
	c := rec.Config()
	if c.ScrapeInterval != a.cfg.ScrapeInterval || !slices.Equal(c.Buckets, a.cfg.Buckets) {
		return fmt.Errorf("node %s: recorded with another scrape interval or buckets", name)
	}
	if rec.phase < 0 || rec.phase >= a.cfg.ScrapeInterval {
		return fmt.Errorf("node %s: scrape phase %v outside [0, %v)", name, rec.phase, a.cfg.ScrapeInterval)
	}
	a.addScrapes(rec.scrapesUntil(a.end))
	return nil
}

// Truth adds the values recorders put in e to the exact quantiles,
// without copying them: e is read when the result is.
func (a *Aggregate) Truth(e *Exact) { a.kept = append(a.kept, e) }

// addScrapes adds one node's rates at every evaluation.
func (a *Aggregate) addScrapes(scrapes []scrape) {
	a.nodes++
	lo := 0
	for e, t := range a.evals {
		tm := t.Milliseconds()
		start := tm - a.cfg.RateWindow.Milliseconds()
		for lo < len(scrapes) && scrapes[lo].t < start {
			lo++
		}
		hi := lo
		for hi < len(scrapes) && scrapes[hi].t <= tm {
			hi++
		}
		win := scrapes[lo:hi]
		if len(win) < 2 {
			continue
		}
		a.present[e] = true
		for b := range len(a.cfg.Buckets) + 1 {
			if r := rate(win, b, start, tm, a.cfg.RateWindow); r != 0 {
				s := a.sum(e, b)
				s.Add(s, a.term.SetFloat64(r))
			}
		}
	}
}

// rate is Prometheus v2.25's rate() of one bucket's counter over the
// samples of one range [start, end] (ms): the increase with counter resets
// corrected, extrapolated towards the range's edges (to the counter's zero
// point at most), per second of the range (promql/functions.go
// extrapolatedRate).
func rate(win []scrape, b int, start, end int64, rng time.Duration) float64 {
	first, last := win[0], win[len(win)-1]
	var correction, prev float64
	for _, s := range win {
		if s.counts[b] < prev {
			correction += prev
		}
		prev = s.counts[b]
	}
	result := last.counts[b] - first.counts[b] + correction
	toStart := float64(first.t-start) / 1000
	toEnd := float64(end-last.t) / 1000
	sampled := float64(last.t-first.t) / 1000
	avg := sampled / float64(len(win)-1)
	if result > 0 && first.counts[b] >= 0 {
		if toZero := sampled * (first.counts[b] / result); toZero < toStart {
			toStart = toZero
		}
	}
	threshold := avg * 1.1
	interval := sampled
	if toStart < threshold {
		interval += toStart
	} else {
		interval += avg / 2
	}
	if toEnd < threshold {
		interval += toEnd
	} else {
		interval += avg / 2
	}
	return result * (interval / sampled) / rng.Seconds()
}

// Merge adds another aggregate's nodes (same configuration and run).
func (a *Aggregate) Merge(o *Aggregate) error {
	if a.end != o.end || !slices.Equal(a.cfg.Buckets, o.cfg.Buckets) || a.cfg.ScrapeInterval != o.cfg.ScrapeInterval ||
		a.cfg.EvalInterval != o.cfg.EvalInterval || a.cfg.RateWindow != o.cfg.RateWindow {
		return fmt.Errorf("cannot merge SLI aggregates of different runs or configurations")
	}
	a.nodes += o.nodes
	a.truth.Merge(o.truth)
	a.kept = append(a.kept, o.kept...)
	for e := range a.evals {
		a.present[e] = a.present[e] || o.present[e]
		for b, s := range o.sums[e] {
			if s != nil {
				a.sum(e, b).Add(a.sum(e, b), s)
			}
		}
	}
	return nil
}

// Point is one evaluation of the recording rule: the three quantiles, in
// seconds (NaN when no sample fell in the window, as histogram_quantile
// gives).
type Point struct {
	At        time.Duration
	Quantiles [3]float64
}

// Result is the SLI of a run.
type Result struct {
	Nodes int
	// Samples is how many observations the nodes made in all.
	Samples int64
	// Perc50, Perc90 and Perc99 are CL2's figures in seconds:
	// quantile_over_time(0.99) of the rule's 0.5, 0.9 and 0.99 series,
	// sorted ascending as CL2 sorts them. NaN when the rule never had
	// data.
	Perc50, Perc90, Perc99 float64
	// Series is the recording rule at each evaluation that had data.
	Series []Point
	// True50, True90 and True99 are the exact quantiles of every
	// observation pooled (the smallest sample with at least that share of
	// samples at or below it).
	True50, True90, True99 float64
	// Pooled counts every observation in kube-proxy's buckets, cumulative,
	// +Inf last.
	Pooled []int64
}

// Result computes the SLI.
func (a *Aggregate) Result() Result {
	res := Result{Nodes: a.nodes}
	nb := len(a.cfg.Buckets) + 1
	var per [3][]float64
	for e, t := range a.evals {
		if !a.present[e] {
			continue
		}
		bs := make(buckets, nb)
		for b := range nb {
			ub := math.Inf(1)
			if b < len(a.cfg.Buckets) {
				ub = a.cfg.Buckets[b]
			}
			var v float64
			if a.sums[e] != nil && a.sums[e][b] != nil {
				v, _ = a.sums[e][b].Float64()
			}
			bs[b] = bucket{ub, v}
		}
		p := Point{At: t}
		for i, q := range Quantiles {
			p.Quantiles[i] = bucketQuantile(q, slices.Clone(bs))
			per[i] = append(per[i], p.Quantiles[i])
		}
		res.Series = append(res.Series, p)
	}
	over := make([]float64, 3)
	for i := range 3 {
		over[i] = quantile(0.99, per[i])
	}
	// CL2 sorts the three values and labels them in that order.
	sortNaNFirst(over)
	res.Perc50, res.Perc90, res.Perc99 = over[0], over[1], over[2]

	all := append(exactSet{a.truth}, a.kept...)
	res.Samples = all.len()
	res.Pooled = make([]int64, nb)
	nan := all.atMost(secondsKey(math.NaN()))
	for b, ub := range a.cfg.Buckets {
		res.Pooled[b] = all.atMost(secondsKey(ub)) - nan
	}
	res.Pooled[nb-1] = res.Samples
	res.True50, res.True90, res.True99 = exact(all, 0.5, res.Samples), exact(all, 0.9, res.Samples), exact(all, 0.99, res.Samples)
	return res
}

// exact is the smallest observed value with at least q of the samples at
// or below it.
func exact(all exactSet, q float64, total int64) float64 {
	if total == 0 {
		return math.NaN()
	}
	return secondsOf(all.rank(max(int64(math.Ceil(q*float64(total))), 1)))
}

type bucket struct{ upper, count float64 }
type buckets []bucket

// bucketQuantile is histogram_quantile over one set of buckets, as
// Prometheus v2.25 computes it (promql/quantile.go bucketQuantile: linear
// interpolation inside a bucket, a lower bound of 0 for the first, the
// second-highest bound when the rank falls in +Inf, counts made monotonic
// first; NaN without observations).
func bucketQuantile(q float64, bs buckets) float64 {
	if q < 0 {
		return math.Inf(-1)
	}
	if q > 1 {
		return math.Inf(1)
	}
	sort.SliceStable(bs, func(i, j int) bool { return bs[i].upper < bs[j].upper })
	if !math.IsInf(bs[len(bs)-1].upper, 1) {
		return math.NaN()
	}
	// Merge equal bounds, then take the running maximum of the counts.
	merged := bs[:1]
	for _, b := range bs[1:] {
		if b.upper == merged[len(merged)-1].upper {
			merged[len(merged)-1].count += b.count
		} else {
			merged = append(merged, b)
		}
	}
	bs = merged
	for i := 1; i < len(bs); i++ {
		bs[i].count = max(bs[i].count, bs[i-1].count)
	}
	if len(bs) < 2 {
		return math.NaN()
	}
	total := bs[len(bs)-1].count
	if total == 0 {
		return math.NaN()
	}
	rank := q * total
	i := sort.Search(len(bs)-1, func(i int) bool { return bs[i].count >= rank })
	if i == len(bs)-1 {
		return bs[len(bs)-2].upper
	}
	if i == 0 && bs[0].upper <= 0 {
		return bs[0].upper
	}
	lo, count := 0.0, bs[i].count
	if i > 0 {
		lo = bs[i-1].upper
		count -= bs[i-1].count
		rank -= bs[i-1].count
	}
	return lo + (bs[i].upper-lo)*(rank/count)
}

// quantile is quantile_over_time's φ-quantile of a series' values
// (Prometheus v2.25 promql/quantile.go quantile): NaN values sort first,
// and a rank between two values interpolates linearly.
func quantile(q float64, values []float64) float64 {
	if len(values) == 0 {
		return math.NaN()
	}
	if q < 0 {
		return math.Inf(-1)
	}
	if q > 1 {
		return math.Inf(1)
	}
	v := slices.Clone(values)
	sortNaNFirst(v)
	n := float64(len(v))
	rank := q * (n - 1)
	lower := math.Max(0, math.Floor(rank))
	upper := math.Min(n-1, lower+1)
	w := rank - math.Floor(rank)
	return v[int(lower)]*(1-w) + v[int(upper)]*w
}

func sortNaNFirst(v []float64) {
	slices.SortFunc(v, func(x, y float64) int {
		switch {
		case math.IsNaN(x) && math.IsNaN(y):
			return 0
		case math.IsNaN(x):
			return -1
		case math.IsNaN(y):
			return 1
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	})
}

func cmpDur(x, y time.Duration) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}
