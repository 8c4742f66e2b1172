package replay

import (
	"time"

	"github.com/proxysim/proxysim/scenarios"
)

func checkLatencyExpectation(e *scenarios.LatencyExpectation, r *Run) {
	l := e.Latency
	if l == nil {
		return
	}
	got, ok := latency(r, l.Object)
	what, where := "the latest change of "+l.Object, "object"
	if l.Pod != "" {
		k, _ := scenarios.PodKey(l.Pod)
		got, ok = r.World().PodLatency(k)
		what, where = "the latest readiness change of Pod "+k, "pod"
	}
	switch {
	case !ok:
		r.Fail(l.Src.At(where), "latency", "a sync that carried "+what, "none finished yet")
	case l.Exact != nil && got != l.Exact.D():
		r.Fail(l.Src.At("exact"), "latency", l.Exact.String(), got.String())
	case l.Max != nil && got > l.Max.D():
		r.Fail(l.Src.At("max"), "latency", "at most "+l.Max.String(), got.String())
	}
}

// latency is the propagation latency of an object's latest change: from its
// write to the end of the first sync that carried it.
func latency(r *Run, key string) (time.Duration, bool) {
	w := r.World()
	at, before, ok := w.LastChange(key)
	if !ok {
		return 0, false
	}
	runs := w.SyncsView()
	for _, run := range runs[before:] {
		if run.End >= 0 {
			return run.End - at, true
		}
	}
	return 0, false
}
