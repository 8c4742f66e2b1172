package scenarios

// restartStep restarts the proxy: the API server and the dataplane keep
// their state.
type restartStep struct {
	Restart bool `yaml:"restart"`
}

func (*restartStep) Validate(*Validator) {}

func (rs *restartStep) Do(r *Run) error {
	if !rs.Restart {
		return nil
	}
	r.Step("restart", "", "")
	return r.World().Restart()
}
