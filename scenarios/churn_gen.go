package scenarios

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
)

// cluster.churn: the API churn of ClusterLoader2's load test as seeded
// random processes over cluster.generate's Services and Pods, expanded at
// load into timeline steps of the kinds a scenario writes by hand
// (podReady, rollingUpdate, delete, and creations). See
// docs/scenario-format.md, "cluster.churn", and docs/cluster.md.

// ChurnSpec is cluster.churn.
type ChurnSpec struct {
	Seed *int64 `yaml:"seed"`
	// Rate is the API changes per second of every process together (Pod
	// and Service writes; the slices the EndpointSlice controller writes
	// are not counted, as the SLO's prerequisite does not count them).
	Rate *float64 `yaml:"rate"`
	// From and Until bound when processes start (default: 0 and the
	// timeline's last instant); each ends by Until.
	From  *Duration `yaml:"from"`
	Until *Duration `yaml:"until"`
	// Processes are each process's share of the changes.
	Processes *shareMix `yaml:"processes"`
	// ReadyAfter is how long a new pod takes to turn Ready (rolling
	// updates, scaling up); GracePeriod how long a deleted pod
	// terminates; FlapFor how long a readiness flap keeps a pod not
	// ready; RestartFor how long a restarted pod is not ready;
	// ServiceDownFor how long a deleted Service is gone.
	ReadyAfter     *Duration `yaml:"readyAfter"`
	GracePeriod    *Duration `yaml:"gracePeriod"`
	FlapFor        *Duration `yaml:"flapFor"`
	RestartFor     *Duration `yaml:"restartFor"`
	ServiceDownFor *Duration `yaml:"serviceDownFor"`
	// MaxSurge bounds scaling up: a Deployment grows to at most its
	// generated replicas plus this many (default 2).
	MaxSurge *int `yaml:"maxScaleUp"`
	Src      Src
}

// The churn processes, as cluster.churn.processes names them.
const (
	procFlap    = "readinessFlaps"
	procRestart = "podRestarts"
	procRollout = "rollingUpdates"
	procScale   = "scaling"
	procService = "services"
)

var churnProcesses = []string{procFlap, procRestart, procRollout, procScale, procService}

// MaxChurnRate bounds cluster.churn.rate: far above the SLO's 20/s, and a
// run's steps still fit in memory.
const MaxChurnRate = 10_000

// churnFirstIP is where new pods' IPs start: 10.64.0.0/11, outside the
// generator's default Service, Pod and Node CIDRs.
var churnFirstIP = netip.MustParseAddr("10.64.0.0")

// ChurnChange is one API change a generated step makes (or, for a
// rolling update, will make), for counting.
type ChurnChange struct {
	At      time.Duration
	Process string
}

// deployment is one generated Deployment's pods (cluster.generate's
// deployments, or one Service's pods when it generates services):
// prefix-0 .. prefix-(replicas-1), labelled app: name; svc is the Service
// in front of it, if any.
type deployment struct {
	namespace string
	name      string
	svc       *v1.Service
	prefix    string
	replicas  int
	initial   int
	version   int
	ready     []bool
	template  *v1.Pod
	busyUntil time.Duration
	up        bool // the Service exists
}

// churnSettings are ChurnSpec with defaults applied.
type churnSettings struct {
	seed                                  uint64
	rate                                  float64
	from, until                           time.Duration
	shares                                map[string]int
	readyAfter, grace, flap, restart, svc time.Duration
	maxUp                                 int
}

func (c *ChurnSpec) settings(last time.Duration) churnSettings {
	st := churnSettings{until: last, readyAfter: 5 * time.Second, grace: 10 * time.Second, flap: 3 * time.Second,
		restart: 15 * time.Second, svc: 30 * time.Second, maxUp: 2, shares: map[string]int{}}
	if c.Seed != nil {
		st.seed = uint64(*c.Seed)
	}
	if c.Rate != nil {
		st.rate = *c.Rate
	}
	if c.From != nil {
		st.from = c.From.D()
	}
	if c.Until != nil {
		st.until = c.Until.D()
	}
	for _, d := range []struct {
		in  *Duration
		out *time.Duration
	}{{c.ReadyAfter, &st.readyAfter}, {c.GracePeriod, &st.grace}, {c.FlapFor, &st.flap}, {c.RestartFor, &st.restart}, {c.ServiceDownFor, &st.svc}} {
		if d.in != nil {
			*d.out = d.in.D()
		}
	}
	if c.MaxSurge != nil {
		st.maxUp = *c.MaxSurge
	}
	if c.Processes != nil {
		for _, e := range c.Processes.entries {
			st.shares[e.key] = e.share
		}
	} else {
		for _, p := range churnProcesses {
			st.shares[p] = hundredths / len(churnProcesses)
		}
	}
	return st
}

// validateChurn checks cluster.churn at its fields; last is the
// timeline's last instant.
func (d *decoder) validateChurn(s *Scenario, last time.Duration) bool {
	c := s.Cluster.Churn
	ok := true
	bad := func(key, format string, args ...any) {
		d.addAt(c.Src.At(key), format, args...)
		ok = false
	}
	if g := s.Cluster.Generate; g == nil || !g.Pods && g.Deployments == nil {
		bad("", "churn acts on generated Pods: it needs cluster.generate with pods: true or deployments")
	}
	if c.Rate == nil {
		bad("rate", "required: the API changes per second of every process together (ClusterLoader2's SLO assumes at most 20)")
	} else if !(*c.Rate > 0 && *c.Rate <= MaxChurnRate) {
		bad("rate", "want a rate above 0 and at most %d changes per second, got %v", MaxChurnRate, *c.Rate)
	}
	st := c.settings(last)
	if st.from < 0 {
		bad("from", "must not be negative, got %v", st.from)
	}
	if st.until <= st.from {
		bad("until", "churn until %v must come after it starts (%v)", st.until, st.from)
	}
	for _, f := range []struct {
		key string
		v   time.Duration
	}{{"readyAfter", st.readyAfter}, {"gracePeriod", st.grace}, {"flapFor", st.flap}, {"restartFor", st.restart}, {"serviceDownFor", st.svc}} {
		if f.v <= 0 {
			bad(f.key, "want a positive duration, got %v", f.v)
		}
	}
	if st.maxUp < 0 {
		bad("maxScaleUp", "must not be negative, got %d", st.maxUp)
	}
	if g := s.Cluster.Generate; g != nil && g.Deployments != nil && g.WithService != nil && g.WithService.hundredths == 0 && st.shares[procService] > 0 {
		bad("processes", "the services process deletes and creates Services, and withService: 0%% generates none: give services 0%%")
	}
	if c.Processes != nil {
		for _, e := range c.Processes.entries {
			if !slices.Contains(churnProcesses, e.key) {
				d.addAt(e.at, "unknown churn process %q: want %s", e.key, orList(churnProcesses))
				ok = false
			}
		}
	}
	return ok && !d.has(c.Src.Path)
}

// expandChurn adds cluster.churn's steps to the timeline, in time order
// after the file's own steps at the same instant.
func (d *decoder) expandChurn(s *Scenario, objects []Object, generated int) {
	if s.Cluster == nil || s.Cluster.Churn == nil {
		return
	}
	var last time.Duration
	for _, st := range s.Timeline {
		if st.At == nil || st.At.D() < last {
			return // the timeline's own problem, reported as such
		}
		last = st.At.D()
	}
	if !d.validateChurn(s, last) {
		return
	}
	bare := s.Cluster.Generate != nil && s.Cluster.Generate.Deployments != nil
	steps, changes, skipped := generateChurn(s.Cluster.Churn, last, objects, generated, bare)
	if planned := len(changes) + skipped; skipped*20 > planned {
		// More than 5% left out: the rate would not hold.
		d.addAt(s.Cluster.Churn.Src.At("rate"), "the generated Deployments cannot take %v changes/s: %d of %d changes found every Deployment busy with another process; lower the rate or the processes' durations, or generate more Services",
			*s.Cluster.Churn.Rate, skipped, planned)
		return
	}
	merged := make([]Step, 0, len(s.Timeline)+len(steps))
	i := 0
	for _, g := range steps {
		for i < len(s.Timeline) && *s.Timeline[i].At <= *g.At {
			merged = append(merged, s.Timeline[i])
			i++
		}
		merged = append(merged, g)
	}
	s.Timeline = append(merged, s.Timeline[i:]...)
}

// generateChurn makes the churn's steps in time order, and every change
// they make. objects[:generated] are cluster.generate's; with bare, the
// generated pods no Service selects are Deployments too.
func generateChurn(c *ChurnSpec, last time.Duration, objects []Object, generated int, bare bool) ([]Step, []ChurnChange, int) {
	st := c.settings(last)
	rng := rand.New(rand.NewPCG(st.seed, 0x636875726e)) // "churn"
	src := Src{Line: c.Src.Line, Column: c.Src.Column, Path: c.Src.Path}
	// The Deployments: each Service's pods in the order of the Services,
	// then the generated Deployments without a Service in the order of
	// their pods (the generator's).
	var deps []*deployment
	byName := map[string]*deployment{}
	var nodeNames []string
	for _, o := range objects {
		switch obj := o.Obj.(type) {
		case *v1.Service:
			dp := &deployment{namespace: obj.Namespace, name: obj.Name, svc: obj, prefix: obj.Name, up: true}
			deps = append(deps, dp)
			byName[obj.Namespace+"/"+obj.Name] = dp
		case *v1.Node:
			nodeNames = append(nodeNames, obj.Name)
		}
	}
	for i, o := range objects {
		p, ok := o.Obj.(*v1.Pod)
		if !ok {
			continue
		}
		key := p.Namespace + "/" + p.Labels["app"]
		dp := byName[key]
		if dp == nil && i < generated && bare {
			app := p.Labels["app"]
			dp = &deployment{namespace: p.Namespace, name: app, prefix: app, up: true}
			deps = append(deps, dp)
			byName[key] = dp
		}
		if dp == nil {
			continue
		}
		if dp.template == nil {
			dp.template = p
		}
		dp.replicas++
		dp.ready = append(dp.ready, podIsReady(p))
	}
	deps = slices.DeleteFunc(deps, func(dp *deployment) bool { return dp.replicas == 0 })
	if len(deps) == 0 {
		return nil, nil, 0
	}
	pods := 0
	for _, dp := range deps {
		dp.initial = dp.replicas
		pods += dp.replicas
	}
	// Each process is drawn with a weight that makes its share of the
	// changes its share of the mix: a rolling update makes 4 changes a
	// pod (create, Ready, terminating, gone), the others 2.
	weights := make([]int64, len(churnProcesses))
	var total int64
	for i, p := range churnProcesses {
		per := int64(2 * len(deps))
		if p == procRollout {
			per = int64(4 * pods)
		}
		weights[i] = int64(st.shares[p]) * 1_000_000 * int64(len(deps)) / per
		total += weights[i]
	}
	nextIP := churnFirstIP
	var steps []Step
	var changes []ChurnChange
	step := func(at time.Duration, a Action) {
		d := Duration(at)
		steps = append(steps, Step{At: &d, Src: src, Actions: []Action{a}})
	}
	change := func(at time.Duration, p string, n int) {
		for range n {
			changes = append(changes, ChurnChange{at, p})
		}
	}
	// pick draws a Deployment free from t to end: a few random draws,
	// then the first free one from a random place on. None: the event is
	// left out (counted in skipped).
	skipped := 0
	pick := func(t, end time.Duration, ok func(*deployment) bool) *deployment {
		free := func(dp *deployment) bool { return dp.busyUntil <= t && dp.up && end <= st.until && ok(dp) }
		for range 8 {
			if dp := deps[rng.IntN(len(deps))]; free(dp) {
				return dp
			}
		}
		from := rng.IntN(len(deps))
		for i := range deps {
			if dp := deps[(from+i)%len(deps)]; free(dp) {
				return dp
			}
		}
		return nil
	}
	t := st.from
	for {
		// Which process, then when the next event comes: the mean gap is
		// this event's changes over the rate, jittered ±50%.
		x := rng.Int64N(total)
		p := len(churnProcesses) - 1
		for i, w := range weights {
			if x < w {
				p = i
				break
			}
			x -= w
		}
		proc := churnProcesses[p]
		n := 2
		before := len(steps)
		// Whether the event could end by until: one that cannot is not
		// the Deployments' shortage.
		fits := true
		free := func(*deployment) bool { return true }
		switch proc {
		case procFlap, procRestart:
			off := st.flap
			if proc == procRestart {
				off = st.restart
			}
			fits = t+off <= st.until
			if dp := pick(t, t+off, free); dp != nil {
				k := rng.IntN(dp.replicas)
				name := fmt.Sprintf("%s-%d", dp.prefix, k)
				now := dp.ready[k]
				step(t, &PodReadyStep{PodReady: &PodReady{Namespace: dp.namespace, Name: name, Ready: ptrBool(!now), Src: src}})
				step(t+off, &PodReadyStep{PodReady: &PodReady{Namespace: dp.namespace, Name: name, Ready: ptrBool(now), Src: src}})
				change(t, proc, 1)
				change(t+off, proc, 1)
				dp.busyUntil = t + off + time.Second
			}
		case procRollout:
			end := func(dp *deployment) time.Duration {
				return t + time.Duration(dp.replicas)*st.readyAfter + st.grace + time.Second
			}
			fits = t+st.readyAfter+st.grace+time.Second <= st.until
			dp := pick(t, t, func(dp *deployment) bool { return end(dp) <= st.until })
			if dp != nil {
				n = 4 * dp.replicas
				dp.version++
				to := fmt.Sprintf("%s-v%d", dp.name, dp.version)
				zero, one := 0, 1
				ra, gr := Duration(st.readyAfter), Duration(st.grace)
				step(t, &RolloutStep{RollingUpdate: &RollingUpdate{Namespace: dp.namespace, From: dp.prefix, To: to, Replicas: dp.replicas,
					MaxSurge: &one, MaxUnavailable: &zero, ReadyAfter: &ra, GracePeriod: &gr, FirstIP: nextIP.String(), Src: src}})
				for i := range dp.replicas {
					nextIP = nextIP.Next()
					change(t+time.Duration(i)*st.readyAfter, proc, 1)
					change(t+time.Duration(i+1)*st.readyAfter, proc, 2)
					change(t+time.Duration(i+1)*st.readyAfter+st.grace, proc, 1)
				}
				dp.prefix = to
				for i := range dp.ready {
					dp.ready[i] = true
				}
				dp.busyUntil = end(dp)
			}
		case procScale:
			up := rng.IntN(2) == 0
			fits = t+max(st.readyAfter, st.grace)+time.Second <= st.until
			dp := pick(t, t+max(st.readyAfter, st.grace)+time.Second, func(dp *deployment) bool {
				if up {
					return dp.replicas < dp.initial+st.maxUp
				}
				return dp.replicas > 1
			})
			if dp != nil {
				ns := dp.namespace
				if up {
					pod := dp.template.DeepCopy()
					pod.Name = fmt.Sprintf("%s-%d", dp.prefix, dp.replicas)
					pod.ResourceVersion, pod.UID = "", ""
					if len(nodeNames) > 0 {
						pod.Spec.NodeName = nodeNames[rng.IntN(len(nodeNames))]
					}
					ip := nextIP.String()
					nextIP = nextIP.Next()
					pod.Status.PodIP, pod.Status.PodIPs = ip, []v1.PodIP{{IP: ip}}
					pod.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionFalse}}
					key := KeyOf("Pod", ns, pod.Name)
					step(t, &CreateStep{Objects: []Object{{Obj: pod, Kind: "Pod", Key: key, Pos: src.At("")}}})
					step(t+st.readyAfter, &PodReadyStep{PodReady: &PodReady{Namespace: ns, Name: pod.Name, Ready: ptrBool(true), Src: src}})
					change(t, proc, 1)
					change(t+st.readyAfter, proc, 1)
					dp.replicas++
					dp.ready = append(dp.ready, true)
					dp.busyUntil = t + st.readyAfter + time.Second
				} else {
					gr := Duration(st.grace)
					name := fmt.Sprintf("%s-%d", dp.prefix, dp.replicas-1)
					step(t, &DeleteStep{Delete: &ObjectRef{Kind: "Pod", Namespace: ns, Name: name, GracePeriod: &gr, Src: src}})
					change(t, proc, 1)
					change(t+st.grace, proc, 1)
					dp.replicas--
					dp.ready = dp.ready[:dp.replicas]
					dp.busyUntil = t + st.grace + time.Second
				}
			}
		case procService:
			fits = t+st.svc <= st.until
			fronted := func(dp *deployment) bool { return dp.svc != nil }
			if dp := pick(t, t+st.svc, fronted); dp != nil {
				svc := dp.svc
				step(t, &DeleteStep{Delete: &ObjectRef{Kind: "Service", Namespace: svc.Namespace, Name: svc.Name, Src: src}})
				step(t+st.svc, &CreateStep{Objects: []Object{{Obj: svc.DeepCopy(), Kind: "Service", Key: KeyOf("Service", svc.Namespace, svc.Name), Pos: src.At("")}}})
				change(t, proc, 1)
				change(t+st.svc, proc, 1)
				dp.busyUntil = t + st.svc + time.Second
			}
		}
		if len(steps) == before && fits {
			skipped += n
		}
		gap := time.Duration(float64(n) / st.rate * (0.5 + rng.Float64()) * float64(time.Second))
		t += max(gap, time.Millisecond)
		if t >= st.until {
			break
		}
	}
	slices.SortStableFunc(steps, func(a, b Step) int { return cmpDuration(a.At.D(), b.At.D()) })
	slices.SortStableFunc(changes, func(a, b ChurnChange) int { return cmpDuration(a.At, b.At) })
	return steps, changes, skipped
}

func ptrBool(b bool) *bool { return &b }

// CreateStep creates objects the churn made (a Pod scaled up, a Service
// back): apply's action, without a manifest to decode.
type CreateStep struct {
	Objects []Object
}

func (c *CreateStep) Validate(v *Validator) {
	for _, o := range c.Objects {
		v.known[o.Key] = true
		v.state[o.Key] = o.Obj
	}
}

func podIsReady(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

func cmpDuration(a, b time.Duration) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
