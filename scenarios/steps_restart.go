package scenarios

// restartStep restarts the proxy: the API server and the dataplane keep
// their state.
type restartStep struct {
	Restart bool `yaml:"restart"`
}

func (rs *restartStep) Validate(v *Validator) {
	if rs.Restart {
		// a new proxy brings a running runner: a stop before is undone
		*v.Scratch(stoppedKey{}, func() any { return new(bool) }).(*bool) = false
	}
}

func (rs *restartStep) Do(r *Run) error {
	if !rs.Restart {
		return nil
	}
	r.Step("restart", "", "")
	return r.World().Restart()
}
