package scenarios

import (
	"fmt"
	"math"
	"net"
	"time"

	discovery "k8s.io/api/discovery/v1"
)

// churnStep flips one endpoint's ready condition, again and again.
type churnStep struct {
	Churn *Churn `yaml:"churn"`
}

func (cs *churnStep) Validate(v *Validator) {
	c, d := cs.Churn, v.d
	if c == nil {
		return
	}
	d.validateRef("EndpointSlice", c.Namespace, c.Name, c.Src, v.known)
	if net.ParseIP(c.Endpoint) == nil {
		d.addAt(c.Src.At("endpoint"), "%q is not an IP address", c.Endpoint)
	} else if sl, ok := v.state[KeyOf("EndpointSlice", c.Namespace, c.Name)].(*discovery.EndpointSlice); ok && !hasEndpoint(sl, c.Endpoint) {
		d.addAt(c.Src.At("endpoint"), "%s has no endpoint %s at this point", KeyOf("EndpointSlice", c.Namespace, c.Name), c.Endpoint)
	}
	if c.Count < 1 {
		d.addAt(c.Src.At("count"), "want at least 1 change")
	}
	if c.Every <= 0 {
		d.addAt(c.Src.At("every"), "want a positive interval")
	} else if at, ok := v.At(); c.Count > 0 && ok {
		if _, ok := churnEnd(at, c.Count, c.Every); !ok {
			d.addAt(c.Src.At("count"), "the last of %d changes every %v after %v would pass the largest instant proxysim can represent (%v)", c.Count, c.Every, at, time.Duration(math.MaxInt64))
		}
	}
}

func (cs *churnStep) Do(r *Run) error {
	c := cs.Churn
	if c == nil {
		return nil
	}
	w := r.World()
	ns := c.Namespace
	if ns == "" {
		ns = "default"
	}
	r.Step("churn", KeyOf("EndpointSlice", ns, c.Name), fmt.Sprintf("%d flips of %s every %v", c.Count, c.Endpoint, c.Every))
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
	return fmt.Errorf("%s has no endpoint %s", KeyOf("EndpointSlice", ns, name), ip)
}
