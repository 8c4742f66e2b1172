package scenarios

import (
	"fmt"
	"strings"
)

// LatencyExpectation bounds how long an object's latest change took to reach
// the dataplane.
type LatencyExpectation struct {
	Latency *LatencyExpect `yaml:"latency"`
}

func (e *LatencyExpectation) Validate(v *Validator) {
	l := e.Latency
	if l == nil {
		return
	}
	switch {
	case l.Pod != "" && l.Object != "":
		v.Errorf(l.Src.At("pod"), "give object or pod, not both")
	case l.Pod != "":
		if _, err := PodKey(l.Pod); err != nil {
			v.Errorf(l.Src.At("pod"), "%v", err)
		} else if !v.everPod(l.Pod) {
			v.Errorf(l.Src.At("pod"), "no Pod %q so far in the scenario", l.Pod)
		}
	case !v.Exists(l.Object):
		v.Errorf(l.Src.At("object"), "no object %q at this point (write \"Kind namespace/name\")", l.Object)
	}
	if l.Max == nil && l.Exact == nil {
		v.Errorf(Pos{l.Src.Line, l.Src.Column, l.Src.Path}, "say max or exact")
	}
}

// PodKey turns a scenario's Pod reference, "name" (in namespace default)
// or "namespace/name", into "namespace/name".
func PodKey(s string) (string, error) {
	ns, name, found := strings.Cut(s, "/")
	if !found {
		ns, name = "default", s
	}
	if ns == "" || name == "" || strings.Contains(name, "/") {
		return "", fmt.Errorf("want a Pod as \"name\" or \"namespace/name\", got %q", s)
	}
	return ns + "/" + name, nil
}

// everPod reports whether the scenario has had the pod at any point so far
// (its latency outlives it).
func (v *Validator) everPod(s string) bool {
	k, _ := PodKey(s)
	ns, name, _ := strings.Cut(k, "/")
	key := KeyOf("Pod", ns, name)
	return v.known[key] || v.gone()[key]
}

// gone holds the objects deleted so far in the timeline.
func (v *Validator) gone() map[string]bool {
	return v.Scratch("gone", func() any { return map[string]bool{} }).(map[string]bool)
}

// forget marks an object deleted at this point of the timeline.
func (v *Validator) forget(key string) {
	if v.known[key] {
		v.gone()[key] = true
	}
	delete(v.known, key)
	delete(v.state, key)
}

// forgetAt marks an object deleted from the instant at (a pod's graceful
// deletion ends then); steps from then on no longer see it.
func (v *Validator) forgetAt(key string, at Duration) {
	v.Scratch("leaving", func() any { return map[string]Duration{} }).(map[string]Duration)[key] = at
}

// expire forgets the objects whose graceful deletion has ended by the
// current step.
func (v *Validator) expire() {
	now, ok := v.At()
	if !ok {
		return
	}
	leaving := v.Scratch("leaving", func() any { return map[string]Duration{} }).(map[string]Duration)
	for k, at := range leaving {
		if at <= now {
			v.forget(k)
			delete(leaving, k)
		}
	}
}
