package replay

import (
	"fmt"
	"net/netip"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/proxysim/proxysim/scenarios"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Defaults of a Deployment's RollingUpdate strategy are 25% each; a
// scenario gives counts.
const (
	defaultReadyAfter  = 5 * time.Second
	defaultGracePeriod = 30 * time.Second
)

// rollout is one rolling update in progress.
type rollout struct {
	r                   *Run
	ru                  *scenarios.RollingUpdate
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

func doRolloutStep(rs *scenarios.RolloutStep, r *Run) error {
	ru := rs.RollingUpdate
	if ru == nil {
		return nil
	}
	ro := &rollout{r: r, ru: ru, ns: scenarios.NamespaceOf("Pod", ru.Namespace), surge: 1, readyAfter: defaultReadyAfter, grace: defaultGracePeriod, oldLeft: ru.Replicas, where: r.where()}
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
	r.Step("rollingUpdate", scenarios.KeyOf("Pod", ro.ns, ru.From+"-*"), fmt.Sprintf("%d replicas to %s-*, maxSurge %d, maxUnavailable %d", ru.Replicas, ru.To, ro.surge, ro.unavail))
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
		ro.r.Step("delete", scenarios.KeyOf("Pod", ro.ns, name), "rolling update, grace period "+ro.grace.String())
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
	ro.r.Step("apply", scenarios.KeyOf("Pod", ro.ns, p.Name), "rolling update")
	if err := w.Create(p); err != nil {
		return err
	}
	rp := ro.r.r
	w.Clock.AfterFunc(delay, func() {
		err := doPodReadyStep(&scenarios.PodReadyStep{PodReady: &scenarios.PodReady{Namespace: ro.ns, Name: p.Name, Ready: ptrTrue()}}, ro.r)
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
