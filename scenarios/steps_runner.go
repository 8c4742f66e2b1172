package scenarios

import (
	"fmt"

	"github.com/proxysim/proxysim/sim/runner"
)

// The runner's own vocabulary, as kube-proxy's BoundedFrequencyRunner
// tests drive it: a Run() with no object change behind it, RetryAfter from
// outside a sync (burst generation), stopping the loop, and failing syncs.

func init() {
	RegisterAction(func() Action { return &runStep{} })
	RegisterAction(func() Action { return &retryAfterStep{} })
	RegisterAction(func() Action { return &stopStep{} })
	RegisterFault(func() Action { return &syncsFault{} })
}

// runStep asks the runner for a run: `run: true`.
type runStep struct {
	Run *bool `yaml:"run"`
	Src Src
}

func (s *runStep) Validate(v *Validator) {
	if s.Run != nil && !*s.Run {
		v.Errorf(s.Src.At("run"), "run: false asks for nothing; write run: true or leave it out")
	}
	s.checkRunning(v, s.Run != nil, "run")
}

// checkRunning refuses a runner action after a stop step: nothing would
// hear it until a restart.
func (s *runStep) checkRunning(v *Validator, given bool, key string) {
	if given && stoppedAt(v) {
		v.Errorf(s.Src.At(key), "the runner was stopped by an earlier stop step (restart the proxy first)")
	}
}

func (s *runStep) Do(r *Run) error {
	if s.Run == nil || !*s.Run {
		return nil
	}
	r.Step("run", "", "Run()")
	r.World().RequestRun()
	return nil
}

// retryAfterStep calls RetryAfter(D): `retryAfter: 5s`. Only the burst
// generation (kube-proxy up to v1.33) has it.
type retryAfterStep struct {
	RetryAfter *Duration `yaml:"retryAfter"`
	Src        Src
}

func (s *retryAfterStep) Validate(v *Validator) {
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

func (s *retryAfterStep) Do(r *Run) error {
	if s.RetryAfter == nil {
		return nil
	}
	r.Step("retryAfter", "", fmt.Sprintf("RetryAfter(%v)", s.RetryAfter))
	return r.World().RetryAfter(s.RetryAfter.D())
}

// stopStep stops the runner's loop: `stop: true`. A later restart builds a
// new proxy with a running runner.
type stopStep struct {
	Stop *bool `yaml:"stop"`
	Src  Src
}

type stoppedKey struct{}

// stoppedAt reports whether a stop step came before this point of the
// timeline, with no restart since.
func stoppedAt(v *Validator) bool {
	return *v.Scratch(stoppedKey{}, func() any { return new(bool) }).(*bool)
}

func (s *stopStep) Validate(v *Validator) {
	if s.Stop == nil {
		return
	}
	if !*s.Stop {
		v.Errorf(s.Src.At("stop"), "stop: false stops nothing; write stop: true or leave it out")
		return
	}
	*v.Scratch(stoppedKey{}, func() any { return new(bool) }).(*bool) = true
}

func (s *stopStep) Do(r *Run) error {
	if s.Stop == nil || !*s.Stop {
		return nil
	}
	r.Step("stop", "", "")
	r.World().StopRunner()
	return nil
}

// syncsFault fails the next N runner runs, then lets them succeed again:
// `fault: {syncs: N}`. A failed run programs nothing; the runner's retry
// rules apply.
type syncsFault struct {
	Syncs *int `yaml:"syncs"`
	Src   Src
}

func (f *syncsFault) Validate(v *Validator) {
	if f.Syncs != nil && *f.Syncs < 1 {
		v.Errorf(f.Src.At("syncs"), "want at least 1 failing sync, got %d", *f.Syncs)
	}
}

func (f *syncsFault) Do(r *Run) error {
	if f.Syncs == nil || *f.Syncs < 1 {
		return nil
	}
	r.Step("fault", "", fmt.Sprintf("next %d syncs fail", *f.Syncs))
	r.World().FailSyncs(*f.Syncs)
	return nil
}
