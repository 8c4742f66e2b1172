package replay

import (
	"fmt"

	"github.com/proxysim/proxysim/scenarios"
	discovery "k8s.io/api/discovery/v1"
)

func doChurnStep(cs *scenarios.ChurnStep, r *Run) error {
	c := cs.Churn
	if c == nil {
		return nil
	}
	w := r.World()
	ns := c.Namespace
	if ns == "" {
		ns = "default"
	}
	r.Step("churn", scenarios.KeyOf("EndpointSlice", ns, c.Name), fmt.Sprintf("%d flips of %s every %v", c.Count, c.Endpoint, c.Every))
	// One flip at a time: each schedules the next, so a churn of any
	// length holds one timer.
	every := c.Every.D()
	left := c.Count
	rp, where := r.r, r.where()
	var flip func()
	flip = func() {
		if err := rp.flip(ns, c.Name, c.Endpoint); err != nil {
			rp.churnErr = fmt.Errorf("%s.churn: %w", where, err)
			return
		}
		if left--; left > 0 {
			w.Clock.AfterFunc(every, flip)
		}
	}
	w.At(w.Now(), flip)
	return nil
}

// flip toggles one endpoint's ready condition.
func (r *replayer) flip(ns, name, ip string) error {
	cur, err := r.w.Get("EndpointSlice", [2]string{ns, name})
	if err != nil {
		return err
	}
	s := cur.(*discovery.EndpointSlice).DeepCopy()
	for i := range s.Endpoints {
		e := &s.Endpoints[i]
		for _, a := range e.Addresses {
			if a == ip {
				ready := e.Conditions.Ready != nil && !*e.Conditions.Ready
				e.Conditions.Ready = &ready
				return r.w.Update(s)
			}
		}
	}
	return fmt.Errorf("%s has no endpoint %s", scenarios.KeyOf("EndpointSlice", ns, name), ip)
}
