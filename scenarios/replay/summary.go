package replay

import (
	"fmt"
	"math"
	"time"
)

// Summary is a replay in a few numbers, to compare replays of one scenario
// under different settings (proxysim sweep).
type Summary struct {
	Syncs        int // sync runs, the initial one included
	DataplaneOps int // dataplane write operations
	// Programming is the count of network_programming_duration
	// observations; P50 and P99 are estimated from their histogram as
	// programmingLatency expectations do (Prometheus's
	// histogram_quantile), Max is the largest observation. All three are
	// zero without observations.
	Programming   int
	P50, P99, Max time.Duration
	Failures      []string // each failed expectation, one line each
}

// Summarize sums a replay up.
func Summarize(r *Result) Summary {
	s := Summary{Syncs: len(r.Runs), DataplaneOps: r.DataplaneOps, Programming: len(r.Programming)}
	vals := make([]float64, len(r.Programming))
	for i, p := range r.Programming {
		vals[i] = p.Value.Seconds()
		s.Max = max(s.Max, p.Value)
	}
	if q, ok := histogramQuantile(0.5, vals); ok {
		s.P50 = secondsDuration(q)
	}
	if q, ok := histogramQuantile(0.99, vals); ok {
		s.P99 = secondsDuration(q)
	}
	for _, f := range r.Failures {
		s.Failures = append(s.Failures, oneLineFailure(f))
	}
	return s
}

func secondsDuration(v float64) time.Duration {
	return time.Duration(math.Round(v * float64(time.Second)))
}

// oneLineFailure is a failure in one line, by field path rather than line
// (a scenario changed by WithSettings has lines of its own).
func oneLineFailure(f Failure) string {
	return fmt.Sprintf("%s at %v: expected %s, got %s", f.Pos.Path, f.At, oneLine(f.Expected), oneLine(f.Got))
}
