package scenarios

import (
	"k8s.io/apimachinery/pkg/runtime"
)

// Validator is what a part of a scenario (a mode's settings, an action, an
// expectation) sees while the file is loaded: where to report problems and
// the timeline as it is at that point.
type Validator struct {
	d       *decoder
	s       *Scenario
	at      *Duration // the current step's instant; nil outside the timeline or when missing
	path    string    // the current step's path, such as timeline[3]
	known   map[string]bool
	state   map[string]runtime.Object
	scratch map[any]any
}

// Errorf reports a problem at p.
func (v *Validator) Errorf(p Pos, format string, args ...any) { v.d.addAt(p, format, args...) }

// At is the current step's instant (false outside the timeline, or when the
// step has none).
func (v *Validator) At() (Duration, bool) {
	if v.at == nil {
		return 0, false
	}
	return *v.at, true
}

// Exists reports whether an object ("Kind namespace/name") exists at this
// point of the timeline.
func (v *Validator) Exists(key string) bool { return v.known[key] }

// Scratch is state a mode keeps across the timeline while it is validated
// (which connections are open, say): the value stored under key, made by
// init the first time.
func (v *Validator) Scratch(key any, init func() any) any {
	if x, ok := v.scratch[key]; ok {
		return x
	}
	x := init()
	v.scratch[key] = x
	return x
}
