package scenarios

import (
	"math"
	"net"
	"time"

	discovery "k8s.io/api/discovery/v1"
)

// ChurnStep flips one endpoint's ready condition, again and again.
type ChurnStep struct {
	Churn *Churn `yaml:"churn"`
}

func (cs *ChurnStep) Validate(v *Validator) {
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
