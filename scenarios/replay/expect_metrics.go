package replay

import (
	"fmt"
	"math"
	"sort"
	"strconv"

	dto "github.com/prometheus/client_model/go"
	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/sim/kpmetrics"
)

func checkMetricsExpectation(e *scenarios.MetricsExpectation, r *Run) {
	if e.Metrics == nil {
		return
	}
	reg := r.Metrics()
	if reg == nil {
		return // refused at load time
	}
	mfs, err := reg.Gatherer().Gather()
	if err != nil {
		r.Fail(scenarios.Pos{Path: "metrics"}, "metrics", "a scrape", err.Error())
		return
	}
	byName := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		byName[mf.GetName()] = mf
	}
	for _, key := range e.Keys() {
		c := e.Metrics[key]
		if c == nil {
			continue
		}
		name, labels, _ := scenarios.ParseSelector(key)
		var series []*dto.Metric
		if mf := byName[name]; mf != nil {
			for _, m := range mf.GetMetric() {
				if matches(m, labels) {
					series = append(series, m)
				}
			}
		}
		what := "metrics." + key
		kind, _ := kpmetrics.KindOf(name)
		if !kind.Histogram {
			var sum float64
			for _, m := range series {
				if g := m.GetGauge(); g != nil {
					sum += g.GetValue()
				} else {
					sum += m.GetCounter().GetValue()
				}
			}
			got := num(sum)
			if len(series) == 0 {
				got = "no series"
			}
			if c.Value != nil && (len(series) == 0 || !closeTo(sum, float64(*c.Value))) {
				r.Fail(c.Src.At("value"), what+".value", num(float64(*c.Value)), got)
			}
			if c.AtLeast != nil && (len(series) == 0 || sum < float64(*c.AtLeast)) {
				r.Fail(c.Src.At("atLeast"), what+".atLeast", "at least "+num(float64(*c.AtLeast)), got)
			}
			if c.AtMost != nil && (len(series) == 0 || sum > float64(*c.AtMost)) {
				r.Fail(c.Src.At("atMost"), what+".atMost", "at most "+num(float64(*c.AtMost)), got)
			}
			continue
		}
		h := mergeHistograms(series)
		if c.Count != nil && h.count != uint64(*c.Count) {
			r.Fail(c.Src.At("count"), what+".count", fmt.Sprint(*c.Count), fmt.Sprint(h.count))
		}
		if c.Sum != nil && !closeTo(h.sum, float64(*c.Sum)) {
			r.Fail(c.Src.At("sum"), what+".sum", num(float64(*c.Sum)), num(h.sum))
		}
		if q := c.Quantile; q != nil && q.Q != nil {
			v := h.quantile(float64(*q.Q))
			got := num(v)
			qs := fmt.Sprintf("%s.quantile(%s)", what, num(float64(*q.Q)))
			if q.Value != nil && !closeTo(v, float64(*q.Value)) {
				r.Fail(q.Src.At("value"), qs, num(float64(*q.Value)), got)
			}
			if q.AtLeast != nil && !(v >= float64(*q.AtLeast)) {
				r.Fail(q.Src.At("atLeast"), qs, "at least "+num(float64(*q.AtLeast)), got)
			}
			if q.AtMost != nil && !(v <= float64(*q.AtMost)) {
				r.Fail(q.Src.At("atMost"), qs, "at most "+num(float64(*q.AtMost)), got)
			}
		}
	}
}

func matches(m *dto.Metric, want map[string]string) bool {
	n := 0
	for _, lp := range m.GetLabel() {
		if v, ok := want[lp.GetName()]; ok {
			if v != lp.GetValue() {
				return false
			}
			n++
		}
	}
	return n == len(want)
}

// closeTo compares values computed in float64 (sums of seconds) with the
// written ones: equal to within 1e-9, or a few ulps for unix timestamps
// (1e-12 relative is under a millisecond there).
func closeTo(a, b float64) bool {
	return a == b || math.Abs(a-b) <= math.Max(1e-9, 1e-12*math.Max(math.Abs(a), math.Abs(b)))
}

func num(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func mergeHistograms(series []*dto.Metric) histogram {
	var h histogram
	for _, m := range series {
		hm := m.GetHistogram()
		if hm == nil {
			continue
		}
		if h.bounds == nil {
			for _, b := range hm.GetBucket() {
				h.bounds = append(h.bounds, b.GetUpperBound())
			}
			h.cum = make([]float64, len(h.bounds))
		}
		for i, b := range hm.GetBucket() {
			h.cum[i] += float64(b.GetCumulativeCount())
		}
		h.count += hm.GetSampleCount()
		h.sum += hm.GetSampleSum()
	}
	if h.bounds != nil && !math.IsInf(h.bounds[len(h.bounds)-1], 1) {
		h.bounds = append(h.bounds, math.Inf(1))
		h.cum = append(h.cum, float64(h.count))
	}
	return h
}

// histogram is one or more series' buckets added up.
type histogram struct {
	bounds []float64 // upper bounds, +Inf last
	cum    []float64 // cumulative counts
	count  uint64
	sum    float64
}

// quantile is PromQL's histogram_quantile over classic buckets
// (prometheus/promql/quantile.go bucketQuantile): NaN without samples; the
// bucket holding rank q*count found by cumulative count; a rank in the
// +Inf bucket gives the highest finite bound; a first bucket with a bound
// <= 0 gives that bound; otherwise linear interpolation inside the bucket,
// from 0 for the first one.
func (h histogram) quantile(q float64) float64 {
	if h.count == 0 || len(h.bounds) < 2 {
		return math.NaN()
	}
	total := h.cum[len(h.cum)-1]
	rank := q * total
	b := sort.Search(len(h.cum)-1, func(i int) bool { return h.cum[i] >= rank })
	if b == len(h.bounds)-1 {
		return h.bounds[len(h.bounds)-2]
	}
	if b == 0 && h.bounds[0] <= 0 {
		return h.bounds[0]
	}
	start, below := 0.0, 0.0
	if b > 0 {
		start, below = h.bounds[b-1], h.cum[b-1]
	}
	end := h.bounds[b]
	in := h.cum[b] - below
	if in == 0 {
		return end
	}
	return start + (end-start)*(rank-below)/in
}
