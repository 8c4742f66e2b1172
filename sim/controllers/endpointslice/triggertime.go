package endpointslice

import (
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/proxysim/proxysim/sim/controllers/podindex"
)

// TriggerTimes computes the trigger-time annotation the way upstream's
// TriggerTimeTracker does (k8s.io/endpointslice util/trigger_time_tracker.go,
// ComputeEndpointLastChangeTriggerTime): per Service it remembers the
// Service's creationTimestamp and each pod's Ready lastTransitionTime as of
// the previous sync, and returns the earliest of those that moved forward
// since; for a Service it has never seen, the Service's creationTimestamp.
// Shared by the EndpointSlice and Endpoints controllers, each with its own.
type TriggerTimes struct {
	services map[string]*triggerState
}

type triggerState struct {
	service time.Time
	pods    map[string]time.Time
}

func NewTriggerTimes() *TriggerTimes { return &TriggerTimes{services: map[string]*triggerState{}} }

// Compute returns the trigger time for a sync of svc with pods, and
// replaces what it remembers of svc.
func (t *TriggerTimes) Compute(key string, svc *v1.Service, pods []*v1.Pod) time.Time {
	prev, known := t.services[key]
	if prev == nil {
		prev = &triggerState{}
	}
	next := &triggerState{service: svc.CreationTimestamp.Time, pods: map[string]time.Time{}}
	var earliest time.Time
	moved := func(at time.Time) {
		if earliest.IsZero() || at.Before(earliest) {
			earliest = at
		}
	}
	for _, p := range pods {
		c := podindex.ReadyCondition(p)
		if c == nil || c.LastTransitionTime.IsZero() {
			continue
		}
		at := c.LastTransitionTime.Time
		next.pods[p.Name] = at
		if at.After(prev.pods[p.Name]) {
			moved(at)
		}
	}
	if next.service.After(prev.service) {
		moved(next.service)
	}
	t.services[key] = next
	if !known {
		return svc.CreationTimestamp.Time
	}
	return earliest
}

// Forget drops a Service's state (the Service is gone).
func (t *TriggerTimes) Forget(key string) { delete(t.services, key) }
