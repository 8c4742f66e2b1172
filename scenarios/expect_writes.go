package scenarios

import (
	"fmt"
	"time"
)

// WritesExpect counts the API writes a controller (or other writer, by its
// trace name, such as endpointslice-controller) made, optionally only
// within a window [from, to].
type WritesExpect struct {
	By      string     `yaml:"by"`
	Count   *int       `yaml:"count"`
	AtLeast *int       `yaml:"atLeast"`
	AtMost  *int       `yaml:"atMost"`
	Between []Duration `yaml:"between"`
	Src     Src
}

type writesExpect struct {
	Writes *WritesExpect `yaml:"writes"`
}

func (e *writesExpect) Validate(v *Validator) {
	we := e.Writes
	if we == nil {
		return
	}
	if we.By == "" {
		v.Errorf(we.Src.At("by"), "required: the writer, as the trace names it (endpointslice-controller, ...)")
	}
	v.d.validateCounts(we.Src, we.Between, we.Count, we.AtLeast, we.AtMost)
	if we.Count == nil && we.AtLeast == nil && we.AtMost == nil {
		v.Errorf(Pos{we.Src.Line, we.Src.Column, we.Src.Path}, "say what to expect: count, atLeast or atMost")
	}
}

func (e *writesExpect) Check(r *Run) {
	we := e.Writes
	if we == nil {
		return
	}
	var in []time.Duration
	for _, at := range r.World().Writes(we.By) {
		if len(we.Between) == 2 && (at < we.Between[0].D() || at > we.Between[1].D()) {
			continue
		}
		in = append(in, at)
	}
	n := len(in)
	got := fmt.Sprintf("%d %v", n, in)
	if we.Count != nil && n != *we.Count {
		r.Fail(we.Src.At("count"), "writes.count", fmt.Sprint(*we.Count), got)
	}
	if we.AtLeast != nil && n < *we.AtLeast {
		r.Fail(we.Src.At("atLeast"), "writes.atLeast", fmt.Sprintf("at least %d", *we.AtLeast), got)
	}
	if we.AtMost != nil && n > *we.AtMost {
		r.Fail(we.Src.At("atMost"), "writes.atMost", fmt.Sprintf("at most %d", *we.AtMost), got)
	}
}
