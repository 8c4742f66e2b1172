package scenarios

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

type WritesExpectation struct {
	Writes *WritesExpect `yaml:"writes"`
}

func (e *WritesExpectation) Validate(v *Validator) {
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
