package replay

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/sim/kpmetrics"
)

// programmingBuckets are network_programming_duration_seconds' upper
// bounds (kpmetrics.ProgrammingBuckets, the metric's own), then +Inf.
var programmingBuckets = append(slices.Clone(kpmetrics.ProgrammingBuckets), math.Inf(1))

func checkProgrammingExpectation(e *scenarios.ProgrammingExpectation, r *Run) {
	p := e.ProgrammingLatency
	if p == nil {
		return
	}
	var vals []float64
	for _, s := range r.World().ProgrammingSamples() {
		if len(p.Between) == 2 && (s.At < p.Between[0].D() || s.At > p.Between[1].D()) {
			continue
		}
		vals = append(vals, s.Value.Seconds())
	}
	got := sampleSummary(vals)
	if p.Count != nil && len(vals) != *p.Count {
		r.Fail(p.Src.At("count"), "programmingLatency.count", fmt.Sprint(*p.Count), got)
	}
	check := func(key string, bound *scenarios.Duration, v float64, ok bool) {
		if bound == nil {
			return
		}
		if !ok {
			r.Fail(p.Src.At(key), "programmingLatency."+key, "at most "+bound.String(), "no samples")
			return
		}
		if v > bound.D().Seconds() {
			r.Fail(p.Src.At(key), "programmingLatency."+key, "at most "+bound.String(), got)
		}
	}
	q50, ok := histogramQuantile(0.5, vals)
	check("p50", p.P50, q50, ok)
	q99, ok := histogramQuantile(0.99, vals)
	check("p99", p.P99, q99, ok)
	mx := math.Inf(-1)
	for _, v := range vals {
		mx = math.Max(mx, v)
	}
	check("max", p.Max, mx, len(vals) > 0)
}

// sampleSummary says what the window holds, for failure messages.
func sampleSummary(vals []float64) string {
	if len(vals) == 0 {
		return "no samples"
	}
	q50, _ := histogramQuantile(0.5, vals)
	q99, _ := histogramQuantile(0.99, vals)
	s := append([]float64(nil), vals...)
	sort.Float64s(s)
	shown := s
	if len(shown) > 8 {
		shown = shown[:8]
	}
	parts := make([]string, len(shown))
	for i, v := range shown {
		parts[i] = seconds(v)
	}
	more := ""
	if len(s) > len(shown) {
		more = " ..."
	}
	return fmt.Sprintf("%d samples [%s%s], p50 %s, p99 %s, max %s", len(s), strings.Join(parts, " "), more, seconds(q50), seconds(q99), seconds(s[len(s)-1]))
}

func seconds(v float64) string {
	return time.Duration(math.Round(v * float64(time.Second))).String()
}

// histogramQuantile estimates the q-quantile of vals as Prometheus's
// histogram_quantile does over the histogram's buckets: find the bucket
// holding the rank q*count, interpolate linearly inside it (from the
// previous bound, or 0 for the first bucket; a first bucket with a bound
// <= 0 gives that bound); a rank in +Inf gives the largest finite bound.
func histogramQuantile(q float64, vals []float64) (float64, bool) {
	if len(vals) == 0 {
		return 0, false
	}
	h := histogram{bounds: programmingBuckets, cum: make([]float64, len(programmingBuckets)), count: uint64(len(vals))}
	for _, v := range vals {
		// An observation equal to a bound belongs to it (le).
		h.cum[sort.SearchFloat64s(programmingBuckets, v)]++
	}
	for i := 1; i < len(h.cum); i++ {
		h.cum[i] += h.cum[i-1]
	}
	return h.quantile(q), true
}
