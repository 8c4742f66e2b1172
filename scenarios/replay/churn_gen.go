package replay

import (
	"time"

	"github.com/proxysim/proxysim/scenarios"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func doCreateStep(c *scenarios.CreateStep, r *Run) error {
	objs := make([]scenarios.Object, len(c.Objects))
	now := metav1.NewTime(r.World().Clock.Now().Truncate(time.Second))
	for i, o := range c.Objects {
		objs[i] = o
		objs[i].Obj = o.Obj.DeepCopyObject() // the world keeps what it is given
		if p, ok := objs[i].Obj.(*v1.Pod); ok {
			// A new pod's Ready condition changes as it is created.
			for k := range p.Status.Conditions {
				p.Status.Conditions[k].LastTransitionTime = now
			}
		}
	}
	return r.apply("apply", objs)
}
