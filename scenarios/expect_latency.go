package scenarios

import "time"

// latencyExpect bounds how long an object's latest change took to reach
// the dataplane.
type latencyExpect struct {
	Latency *LatencyExpect `yaml:"latency"`
}

func (e *latencyExpect) Validate(v *Validator) {
	l := e.Latency
	if l == nil {
		return
	}
	if !v.Exists(l.Object) {
		v.Errorf(l.Src.At("object"), "no object %q at this point (write \"Kind namespace/name\")", l.Object)
	}
	if l.Max == nil && l.Exact == nil {
		v.Errorf(Pos{l.Src.Line, l.Src.Column, l.Src.Path}, "say max or exact")
	}
}

func (e *latencyExpect) Check(r *Run) {
	l := e.Latency
	if l == nil {
		return
	}
	got, ok := latency(r, l.Object)
	switch {
	case !ok:
		r.Fail(l.Src.At("object"), "latency", "a sync that carried the latest change of "+l.Object, "none finished yet")
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
