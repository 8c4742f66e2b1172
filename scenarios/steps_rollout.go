package scenarios

import (
	"fmt"
	"net/netip"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

type rolloutStep struct {
	RollingUpdate *RollingUpdate `yaml:"rollingUpdate"`
}

// Defaults of a Deployment's RollingUpdate strategy are 25% each; a
// scenario gives counts.
const (
	defaultReadyAfter  = 5 * time.Second
	defaultGracePeriod = 30 * time.Second
)

func (rs *rolloutStep) Validate(v *Validator) {
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

// rollout is one rolling update in progress.
type rollout struct {
	r                   *Run
	ru                  *RollingUpdate
	ns                  string
	surge, unavail      int
	readyAfter, grace   time.Duration
	stagger             time.Duration
	template            *v1.Pod
	nextIP              netip.Addr
	oldLeft, newCreated int // old pods not yet told to go; new pods made
	newReady            int
	where               string
}

func (rs *rolloutStep) Do(r *Run) error {
	ru := rs.RollingUpdate
	if ru == nil {
		return nil
	}
	ro := &rollout{r: r, ru: ru, ns: namespaceOf("Pod", ru.Namespace), surge: 1, readyAfter: defaultReadyAfter, grace: defaultGracePeriod, oldLeft: ru.Replicas, where: r.where()}
	if ru.MaxSurge != nil {
		ro.surge = *ru.MaxSurge
	}
	if ru.MaxUnavailable != nil {
		ro.unavail = *ru.MaxUnavailable
	}
	if ru.ReadyAfter != nil {
		ro.readyAfter = ru.ReadyAfter.D()
	}
	if ru.ReadyStagger != nil {
		ro.stagger = ru.ReadyStagger.D()
	}
	if ru.GracePeriod != nil {
		ro.grace = ru.GracePeriod.D()
	}
	ro.nextIP, _ = netip.ParseAddr(ru.FirstIP)
	first, err := r.World().Get("Pod", [2]string{ro.ns, ru.From + "-0"})
	if err != nil {
		return err
	}
	ro.template = first.(*v1.Pod)
	r.Step("rollingUpdate", KeyOf("Pod", ro.ns, ru.From+"-*"), fmt.Sprintf("%d replicas to %s-*, maxSurge %d, maxUnavailable %d", ru.Replicas, ru.To, ro.surge, ro.unavail))
	return ro.reconcile()
}

// reconcile scales old pods down and new ones up as far as the bounds
// allow; it runs at the start and whenever a new pod turns Ready.
func (ro *rollout) reconcile() error {
	min := ro.ru.Replicas - ro.unavail
	for ro.oldLeft > 0 && ro.oldLeft+ro.newReady-1 >= min {
		i := ro.ru.Replicas - ro.oldLeft
		ro.oldLeft--
		name := fmt.Sprintf("%s-%d", ro.ru.From, i)
		ro.r.Step("delete", KeyOf("Pod", ro.ns, name), "rolling update, grace period "+ro.grace.String())
		if err := ro.r.gracefulDelete(ro.ns, name, ro.grace); err != nil {
			return err
		}
	}
	for ro.newCreated < ro.ru.Replicas && ro.oldLeft+ro.newCreated < ro.ru.Replicas+ro.surge {
		if err := ro.create(); err != nil {
			return err
		}
	}
	return nil
}

func (ro *rollout) create() error {
	w := ro.r.World()
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ro.ns, Name: fmt.Sprintf("%s-%d", ro.ru.To, ro.newCreated), Labels: map[string]string{}},
		Spec:       *ro.template.Spec.DeepCopy(),
	}
	for k, v := range ro.template.Labels {
		p.Labels[k] = v
	}
	for k, v := range ro.ru.Labels {
		p.Labels[k] = v
	}
	ip := ro.nextIP.String()
	ro.nextIP = ro.nextIP.Next()
	p.Status = v1.PodStatus{
		Phase: v1.PodRunning, PodIP: ip, PodIPs: []v1.PodIP{{IP: ip}},
		Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionFalse, LastTransitionTime: metav1.NewTime(w.Clock.Now().Truncate(time.Second))}},
	}
	delay := ro.readyAfter + time.Duration(ro.newCreated)*ro.stagger
	ro.newCreated++
	ro.r.Step("apply", KeyOf("Pod", ro.ns, p.Name), "rolling update")
	if err := w.Create(p); err != nil {
		return err
	}
	rp := ro.r.r
	w.Clock.AfterFunc(delay, func() {
		err := (&podReadyStep{PodReady: &PodReady{Namespace: ro.ns, Name: p.Name, Ready: ptrTrue()}}).Do(ro.r)
		if err == nil {
			ro.newReady++
			err = ro.reconcile()
		}
		if err != nil && rp.churnErr == nil {
			rp.churnErr = fmt.Errorf("%s.rollingUpdate: %w", ro.where, err)
		}
	})
	return nil
}

func ptrTrue() *bool { t := true; return &t }
