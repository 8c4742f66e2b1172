package scenarios

// FaultStep injects failures: the mode's own (dataplane operations that
// fail, say) and a broken watch.
type FaultStep struct {
	Fault *Fault `yaml:"fault"`
}

// FaultOf is the Fault a `fault:` step's action injects; nil for any
// other action.
func FaultOf(a Action) *Fault {
	if fs, ok := a.(*FaultStep); ok {
		return fs.Fault
	}
	return nil
}

// Only is the action of a `fault:` step that injects parts (some of f's
// Parts) and no watch break: what is left of f when a replay cannot honour
// the rest (scenarios/bubble).
func (f *Fault) Only(parts []Action) Action {
	return &FaultStep{Fault: &Fault{Src: f.Src, Parts: parts, keys: f.keys}}
}

func (fs *FaultStep) Validate(v *Validator) {
	f := fs.Fault
	if f == nil {
		return
	}
	for _, p := range f.Parts {
		p.Validate(v)
	}
	if len(f.Parts) == 0 && f.WatchBreak == nil {
		v.Errorf(Pos{f.Src.Line, f.Src.Column, f.Src.Path}, "a fault needs %s", orList(append(append([]string(nil), f.keys...), "watchBreak")))
	}
}
