package scenarios

import (
	"github.com/proxysim/proxysim/sim/runner"
)

// The runner's own vocabulary, as kube-proxy's BoundedFrequencyRunner
// tests drive it: a Run() with no object change behind it, RetryAfter from
// outside a sync (burst generation), stopping the loop, and failing syncs.

func init() {
	RegisterAction(func() Action { return &RunStep{} })
	RegisterAction(func() Action { return &RetryAfterStep{} })
	RegisterAction(func() Action { return &StopStep{} })
	RegisterFault(func() Action { return &SyncsFault{} })
}

// RunStep asks the runner for a run: `run: true`.
type RunStep struct {
	Run *bool `yaml:"run"`
	Src Src
}

func (s *RunStep) Validate(v *Validator) {
	if s.Run != nil && !*s.Run {
		v.Errorf(s.Src.At("run"), "run: false asks for nothing; write run: true or leave it out")
	}
	s.checkRunning(v, s.Run != nil, "run")
}

// checkRunning refuses a runner action after a stop step: nothing would
// hear it until a restart.
func (s *RunStep) checkRunning(v *Validator, given bool, key string) {
	if given && stoppedAt(v) {
		v.Errorf(s.Src.At(key), "the runner was stopped by an earlier stop step (restart the proxy first)")
	}
}

// RetryAfterStep calls RetryAfter(D): `retryAfter: 5s`. Only the burst
// generation (kube-proxy up to v1.33) has it.
type RetryAfterStep struct {
	RetryAfter *Duration `yaml:"retryAfter"`
	Src        Src
}

func (s *RetryAfterStep) Validate(v *Validator) {
	if s.RetryAfter == nil {
		return
	}
	if g := v.generationOf(); g != 0 && g != runner.Burst {
		v.Errorf(s.Src.At("retryAfter"), "the %s runner of kube-proxy %s has no RetryAfter (it retries a failed sync by itself: use fault: {syncs: N}); retryAfter belongs to versions up to 1.33", g, v.s.Proxy.Version)
	}
	if stoppedAt(v) {
		v.Errorf(s.Src.At("retryAfter"), "the runner was stopped by an earlier stop step (restart the proxy first)")
	}
}

// StopStep stops the runner's loop: `stop: true`. A later restart builds a
// new proxy with a running runner.
type StopStep struct {
	Stop *bool `yaml:"stop"`
	Src  Src
}

type stoppedKey struct{}

// stoppedAt reports whether a stop step came before this point of the
// timeline, with no restart since.
func stoppedAt(v *Validator) bool {
	return *v.Scratch(stoppedKey{}, func() any { return new(bool) }).(*bool)
}

func (s *StopStep) Validate(v *Validator) {
	if s.Stop == nil {
		return
	}
	if !*s.Stop {
		v.Errorf(s.Src.At("stop"), "stop: false stops nothing; write stop: true or leave it out")
		return
	}
	*v.Scratch(stoppedKey{}, func() any { return new(bool) }).(*bool) = true
}

// SyncsFault fails the next N runner runs, then lets them succeed again:
// `fault: {syncs: N}`. A failed run programs nothing; the runner's retry
// rules apply.
type SyncsFault struct {
	Syncs *int `yaml:"syncs"`
	Src   Src
}

func (f *SyncsFault) Validate(v *Validator) {
	if f.Syncs != nil && *f.Syncs < 1 {
		v.Errorf(f.Src.At("syncs"), "want at least 1 failing sync, got %d", *f.Syncs)
	}
}
