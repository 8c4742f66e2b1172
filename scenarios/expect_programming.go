package scenarios

// ProgrammingLatencyExpect bounds kube-proxy's
// network_programming_duration_seconds observations (sim.ProgrammingSample),
// optionally only those made by syncs that ended in a window [from, to].
// P50 and P99 are estimated from the histogram as Prometheus's
// histogram_quantile does, so that they compare with a dashboard; Max is
// the largest observation itself.
type ProgrammingLatencyExpect struct {
	Count   *int       `yaml:"count"`
	P50     *Duration  `yaml:"p50"`
	P99     *Duration  `yaml:"p99"`
	Max     *Duration  `yaml:"max"`
	Between []Duration `yaml:"between"`
	Src     Src
}

type ProgrammingExpectation struct {
	ProgrammingLatency *ProgrammingLatencyExpect `yaml:"programmingLatency"`
}

func (e *ProgrammingExpectation) Validate(v *Validator) {
	p := e.ProgrammingLatency
	if p == nil {
		return
	}
	if p.Count == nil && p.P50 == nil && p.P99 == nil && p.Max == nil {
		v.Errorf(Pos{p.Src.Line, p.Src.Column, p.Src.Path}, "say what to expect: count, p50, p99 or max")
	}
	if p.Count != nil && *p.Count < 0 {
		v.Errorf(p.Src.At("count"), "a count cannot be negative")
	}
	if p.Between != nil && (len(p.Between) != 2 || p.Between[1] < p.Between[0]) {
		v.Errorf(p.Src.At("between"), "want [from, to] with from <= to")
	}
}
