package scenarios

// OpsExpectation counts dataplane write operations, as the trace records them
// whatever the mode, the proxier's startup writes included.
type OpsExpectation struct {
	DataplaneOps *CountExpect `yaml:"dataplaneOps"`
}

func (e *OpsExpectation) Validate(v *Validator) {
	c, d := e.DataplaneOps, v.d
	if c == nil {
		return
	}
	d.validateCounts(c.Src, c.Between, c.Count, c.AtLeast, c.AtMost)
	if c.Count == nil && c.AtLeast == nil && c.AtMost == nil {
		d.addAt(Pos{c.Src.Line, c.Src.Column, c.Src.Path}, "say what to expect: count, atLeast or atMost")
	}
}
