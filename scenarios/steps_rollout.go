package scenarios

import (
	"fmt"
	"net/netip"
)

// RollingUpdate replaces Replicas pods named From-0..From-(Replicas-1) with
// new ones named To-0.., the way a Deployment's rolling update does:
// never more than Replicas+MaxSurge pods that are not terminating, never
// fewer than Replicas-MaxUnavailable ready ones (kubernetes
// pkg/controller/deployment/rolling.go, reconcileNewReplicaSet and
// reconcileOldReplicaSets, without the ReplicaSet in between). New pods
// copy the first old pod (labels merged with Labels), get IPs counting up
// from FirstIP, and turn Ready ReadyAfter after they are created (the i-th
// new pod i*ReadyStagger later still, as real pods never start in step); old pods
// are deleted with GracePeriod (terminating, then gone).
type RollingUpdate struct {
	Namespace      string            `yaml:"namespace"`
	From           string            `yaml:"from"`
	To             string            `yaml:"to"`
	Replicas       int               `yaml:"replicas"`
	MaxSurge       *int              `yaml:"maxSurge"`
	MaxUnavailable *int              `yaml:"maxUnavailable"`
	ReadyAfter     *Duration         `yaml:"readyAfter"`
	ReadyStagger   *Duration         `yaml:"readyStagger"`
	GracePeriod    *Duration         `yaml:"gracePeriod"`
	FirstIP        string            `yaml:"firstIP"`
	Labels         map[string]string `yaml:"labels"`
	Src            Src
}

type RolloutStep struct {
	RollingUpdate *RollingUpdate `yaml:"rollingUpdate"`
}

func (rs *RolloutStep) Validate(v *Validator) {
	ru := rs.RollingUpdate
	if ru == nil {
		return
	}
	if ru.Replicas < 1 {
		v.Errorf(ru.Src.At("replicas"), "want at least 1 replica")
	}
	surge, unavail := 1, 0
	if ru.MaxSurge != nil {
		surge = *ru.MaxSurge
	}
	if ru.MaxUnavailable != nil {
		unavail = *ru.MaxUnavailable
	}
	if surge < 0 || unavail < 0 {
		v.Errorf(ru.Src.At("maxSurge"), "maxSurge and maxUnavailable cannot be negative")
	} else if surge == 0 && unavail == 0 {
		v.Errorf(ru.Src.At("maxSurge"), "maxSurge and maxUnavailable cannot both be 0 (as a Deployment's)")
	}
	if ru.From == "" || ru.To == "" || ru.From == ru.To {
		v.Errorf(ru.Src.At("to"), "give from and to, two different pod name prefixes")
	}
	if _, err := netip.ParseAddr(ru.FirstIP); err != nil {
		v.Errorf(ru.Src.At("firstIP"), "want the first new pod IP, got %q", ru.FirstIP)
	}
	for i := 0; i < ru.Replicas; i++ {
		old := KeyOf("Pod", ru.Namespace, fmt.Sprintf("%s-%d", ru.From, i))
		if !v.known[old] {
			v.Errorf(ru.Src.At("from"), "no %s at this point", old)
			break
		}
		v.forget(old)
	}
	for i := 0; i < ru.Replicas; i++ {
		n := KeyOf("Pod", ru.Namespace, fmt.Sprintf("%s-%d", ru.To, i))
		if v.known[n] {
			v.Errorf(ru.Src.At("to"), "%s exists already", n)
			break
		}
		v.known[n] = true
	}
}
