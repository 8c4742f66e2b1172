package scenarios

// RestartStep restarts the proxy: the API server and the dataplane keep
// their state.
type RestartStep struct {
	Restart bool `yaml:"restart"`
}

func (rs *RestartStep) Validate(v *Validator) {
	if rs.Restart {
		// a new proxy brings a running runner: a stop before is undone
		*v.Scratch(stoppedKey{}, func() any { return new(bool) }).(*bool) = false
	}
}
