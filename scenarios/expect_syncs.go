package scenarios

// SyncsExpectation counts sync runs and pins when they started.
type SyncsExpectation struct {
	Syncs *SyncExpect `yaml:"syncs"`
}

func (e *SyncsExpectation) Validate(v *Validator) {
	sy, d := e.Syncs, v.d
	if sy == nil {
		return
	}
	d.validateCounts(sy.Src, sy.Between, sy.Count, sy.AtLeast, sy.AtMost)
	if sy.Count == nil && sy.AtLeast == nil && sy.AtMost == nil && sy.At == nil {
		d.addAt(Pos{sy.Src.Line, sy.Src.Column, sy.Src.Path}, "say what to expect: count, atLeast, atMost or at")
	}
}
