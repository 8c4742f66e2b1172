package replay

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/proxysim/proxysim/scenarios"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func doPodReadyStep(ps *scenarios.PodReadyStep, r *Run) error {
	p := ps.PodReady
	if p == nil {
		return nil
	}
	ns := scenarios.NamespaceOf("Pod", p.Namespace)
	w := r.World()
	r.Step("podReady", scenarios.KeyOf("Pod", ns, p.Name), fmt.Sprintf("ready=%v", *p.Ready))
	cur, err := w.Get("Pod", [2]string{ns, p.Name})
	if err != nil {
		return err
	}
	pod := cur.(*v1.Pod).DeepCopy()
	status := v1.ConditionFalse
	if *p.Ready {
		status = v1.ConditionTrue
	}
	now := metav1.NewTime(w.Clock.Now().Truncate(time.Second))
	found := false
	for i := range pod.Status.Conditions {
		c := &pod.Status.Conditions[i]
		if c.Type != v1.PodReady {
			continue
		}
		found = true
		if c.Status != status {
			c.Status, c.LastTransitionTime = status, now
		}
	}
	if !found {
		pod.Status.Conditions = append(pod.Status.Conditions, v1.PodCondition{Type: v1.PodReady, Status: status, LastTransitionTime: now})
	}
	return w.Update(pod)
}

// gracefulDelete is the delete step of a Pod with a gracePeriod: the API
// server sets deletionTimestamp (now + grace) and
// deletionGracePeriodSeconds, the pod terminates, and kubelet removes it
// when the grace period ends. Its Ready condition is left as it is:
// whether a terminating pod still passes its readiness probe is up to the
// scenario (podReady).
func (r *Run) gracefulDelete(ns, name string, grace time.Duration) error {
	w := r.World()
	cur, err := w.Get("Pod", [2]string{ns, name})
	if err != nil {
		return err
	}
	pod := cur.(*v1.Pod).DeepCopy()
	if pod.DeletionTimestamp == nil {
		secs := int64(grace / time.Second)
		at := metav1.NewTime(w.Clock.Now().Add(grace).Truncate(time.Second))
		pod.DeletionTimestamp, pod.DeletionGracePeriodSeconds = &at, &secs
		if err := w.Update(pod); err != nil {
			return err
		}
	}
	rp, where := r.r, r.where()
	w.Clock.AfterFunc(grace, func() {
		err := w.Delete("Pod", ns, name)
		if err != nil && !apierrors.IsNotFound(err) && rp.churnErr == nil {
			rp.churnErr = fmt.Errorf("%s.delete: %w", where, err)
		}
	})
	return nil
}
