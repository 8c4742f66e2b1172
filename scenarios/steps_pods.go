package scenarios

// What kubelet does to a pod, as steps. Times written into the pod are
// whole seconds, as the API server stores them (metav1.Time's wire formats
// drop the fraction): a Ready transition at 10.3s reads 10s, which is what
// the EndpointSlice controller copies into the trigger-time annotation.

// PodReady sets a pod's Ready condition.
type PodReady struct {
	Namespace string `yaml:"namespace"`
	Name      string `yaml:"name"`
	Ready     *bool  `yaml:"ready"`
	Src       Src
}

// PodReadyStep: `podReady: {name: web-0, ready: false}`. The condition's
// lastTransitionTime moves only when its status changes, as kubelet's
// status manager does.
type PodReadyStep struct {
	PodReady *PodReady `yaml:"podReady"`
}

func (ps *PodReadyStep) Validate(v *Validator) {
	p := ps.PodReady
	if p == nil {
		return
	}
	v.d.validateRef("Pod", p.Namespace, p.Name, p.Src, v.known)
	if p.Ready == nil {
		v.Errorf(p.Src.At("ready"), "required: true or false")
	}
}
