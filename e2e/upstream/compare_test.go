// Package upstream runs proxysim's change trackers and endpoint selection
// side by side with kube-proxy's own (k8s.io/kubernetes/pkg/proxy), on the
// same seeded, randomized sequences of Service and EndpointSlice changes,
// and requires identical results. It is a separate module so that the main
// module never depends on k8s.io/kubernetes.
package upstream

import (
	"flag"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	kproxy "k8s.io/kubernetes/pkg/proxy"

	"github.com/proxysim/proxysim/sim/proxy"
)

// coverage counts what the comparisons saw, so a run can show it compared
// something.
var coverage struct {
	servicePorts, endpoints, clusterSel, localSel int
}

var (
	sequences = flag.Int("sequences", 10000, "random change sequences to compare")
	steps     = flag.Int("steps", 40, "changes per sequence")
	seed0     = flag.Int64("seed", 1, "first seed")
)

const nodeName = "node-a"

// pair holds both implementations, fed identically.
type pair struct {
	family v1.IPFamily
	zone   string

	kSvc  *kproxy.ServiceChangeTracker
	kEp   *kproxy.EndpointsChangeTracker
	kSvcs kproxy.ServicePortMap
	kEps  kproxy.EndpointsMap

	ourSvc  *proxy.ServiceChangeTracker
	ourEp   *proxy.EndpointSliceTracker
	ourSvcs proxy.ServiceMap
	ourEps  proxy.EndpointsMap
}

func newPair(family v1.IPFamily, zone string) *pair {
	return &pair{
		family: family, zone: zone,
		kSvc:  kproxy.NewServiceChangeTracker(family, nil, nil),
		kEp:   kproxy.NewEndpointsChangeTracker(family, nodeName, nil, nil),
		kSvcs: kproxy.ServicePortMap{}, kEps: kproxy.EndpointsMap{},
		ourSvc:  proxy.NewServiceChangeTracker(family),
		ourEp:   proxy.NewEndpointSliceTracker(family, nodeName, proxy.EndpointSliceTrackerOptions{}),
		ourSvcs: proxy.ServiceMap{}, ourEps: proxy.EndpointsMap{},
	}
}

func TestTrackersMatchKubeProxy(t *testing.T) {
	var compared, ops, syncs int
	for i := 0; i < *sequences; i++ {
		seed := *seed0 + int64(i)
		n, s, err := runSequence(seed)
		ops += n
		syncs += s
		if err != nil {
			t.Fatalf("seed %d: %v\n(replay: go test -run TestTrackersMatchKubeProxy -sequences 1 -seed %d -v)", seed, err, seed)
		}
		compared++
	}
	t.Logf("%d random sequences, %d changes, %d syncs: proxysim and kube-proxy agree on every tracker result, map and endpoint selection", compared, ops, syncs)
	t.Logf("compared %d service ports, %d endpoints, %d non-empty cluster and %d non-empty local selections",
		coverage.servicePorts, coverage.endpoints, coverage.clusterSel, coverage.localSel)
	if coverage.endpoints == 0 || coverage.localSel == 0 {
		t.Fatal("the generator produced nothing worth comparing")
	}
}

func runSequence(seed int64) (ops, syncs int, err error) {
	r := rand.New(rand.NewSource(seed))
	family := v1.IPv4Protocol
	if r.Intn(5) == 0 {
		family = v1.IPv6Protocol
	}
	zone := []string{"zone-a", "zone-b", ""}[r.Intn(3)]
	p := newPair(family, zone)
	// iptables: also loadBalancerSourceRanges (no big slices: the
	// trackers' sequences stay small).
	g := &gen{r: r, iptables: true, services: map[string]*v1.Service{}, slices: map[string]*discovery.EndpointSlice{}}
	for step := 0; step < *steps; step++ {
		what, err := p.apply(g)
		ops++
		if err != nil {
			return ops, syncs, fmt.Errorf("step %d (%s): %w", step, what, err)
		}
		if r.Intn(4) == 0 || step == *steps-1 {
			syncs++
			if err := p.sync(); err != nil {
				return ops, syncs, fmt.Errorf("sync after step %d (%s): %w", step, what, err)
			}
		}
	}
	return ops, syncs, nil
}

// apply makes one random change and compares the trackers' answers.
func (p *pair) apply(g *gen) (string, error) {
	switch g.r.Intn(10) {
	case 0, 1, 2:
		prev, cur := g.serviceChange()
		k, o := p.kSvc.Update(prev, cur), p.ourSvc.Update(prev, cur)
		if k != o {
			return "service " + describeSvc(prev, cur), fmt.Errorf("ServiceChangeTracker.Update: kube-proxy %v, proxysim %v", k, o)
		}
		return "service " + describeSvc(prev, cur), nil
	default:
		slice, remove := g.sliceChange()
		k := p.kEp.EndpointSliceUpdate(slice, remove)
		o, _ := p.ourEp.Update(slice, remove)
		what := fmt.Sprintf("slice %s/%s remove=%v", slice.Namespace, slice.Name, remove)
		if k != o {
			return what, fmt.Errorf("EndpointSliceUpdate: kube-proxy %v, proxysim %v", k, o)
		}
		return what, nil
	}
}

func describeSvc(prev, cur *v1.Service) string {
	s := cur
	if s == nil {
		s = prev
	}
	return fmt.Sprintf("%s/%s prev=%v cur=%v", s.Namespace, s.Name, prev != nil, cur != nil)
}

// sync applies pending changes on both sides and compares everything.
func (p *pair) sync() error {
	kRes := p.kSvcs.Update(p.kSvc)
	oRes := p.ourSvcs.Update(p.ourSvc)
	if a, b := nnSet(kRes.UpdatedServices.UnsortedList()), nnList(oRes.Updated); a != b {
		return fmt.Errorf("updated services: kube-proxy %s, proxysim %s", a, b)
	}
	kE := p.kEps.Update(p.kEp)
	oE := p.ourEps.Update(p.ourEp)
	if a, b := nnSet(kE.UpdatedServices.UnsortedList()), nnList(oE.Updated); a != b {
		return fmt.Errorf("updated endpoints: kube-proxy %s, proxysim %s", a, b)
	}
	if a, b := p.kServiceMap(), p.ourServiceMap(); a != b {
		return fmt.Errorf("service maps differ:\nkube-proxy:\n%s\nproxysim:\n%s", a, b)
	}
	if a, b := p.kEndpointsMap(), p.ourEndpointsMap(); a != b {
		return fmt.Errorf("endpoints maps differ:\nkube-proxy:\n%s\nproxysim:\n%s", a, b)
	}
	if a, b := p.kSelection(), p.ourSelection(); a != b {
		return fmt.Errorf("endpoint selection differs:\nkube-proxy:\n%s\nproxysim:\n%s", a, b)
	}
	coverage.servicePorts += len(p.ourSvcs)
	for spn, eps := range p.ourEps {
		coverage.endpoints += len(eps)
		if sp := p.ourSvcs[spn]; sp != nil {
			sel := proxy.SelectEndpoints(sp, eps, nodeName, p.zone)
			if len(sel.Cluster) > 0 {
				coverage.clusterSel++
			}
			if len(sel.Local) > 0 {
				coverage.localSel++
			}
		}
	}
	return nil
}

func nnSet(l []types.NamespacedName) string {
	s := make([]string, len(l))
	for i, n := range l {
		s[i] = n.String()
	}
	sort.Strings(s)
	return strings.Join(s, ",")
}

func nnList(l []types.NamespacedName) string { return nnSet(l) }

func spnKey(ns, name, port string, proto v1.Protocol) string {
	return fmt.Sprintf("%s/%s:%s/%s", ns, name, port, proto)
}

func (p *pair) kServiceMap() string {
	var lines []string
	for spn, sp := range p.kSvcs {
		ext := make([]string, 0)
		for _, ip := range sp.ExternalIPs() {
			ext = append(ext, ip.String())
		}
		lb := make([]string, 0)
		for _, ip := range sp.LoadBalancerVIPs() {
			lb = append(lb, ip.String())
		}
		src := make([]string, 0)
		for _, c := range sp.LoadBalancerSourceRanges() {
			src = append(src, c.String())
		}
		lines = append(lines, fmt.Sprintf("%s ip=%s port=%d proto=%s np=%d ext=%v lb=%v src=%v aff=%v/%d etp=%v itp=%v hc=%d cluster=%v local=%v",
			spnKey(spn.Namespace, spn.Name, spn.Port, spn.Protocol), sp.ClusterIP(), sp.Port(), sp.Protocol(), sp.NodePort(),
			ext, lb, src, sp.SessionAffinityType() == v1.ServiceAffinityClientIP, sp.StickyMaxAgeSeconds(),
			sp.ExternalPolicyLocal(), sp.InternalPolicyLocal(), sp.HealthCheckNodePort(), sp.UsesClusterEndpoints(), sp.UsesLocalEndpoints()))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func (p *pair) ourServiceMap() string {
	var lines []string
	for spn, sp := range p.ourSvcs {
		ext := append([]string{}, sp.ExternalIPs...)
		lb := append([]string{}, sp.LoadBalancerIPs...)
		src := append([]string{}, sp.LoadBalancerSourceRanges...)
		lines = append(lines, fmt.Sprintf("%s ip=%s port=%d proto=%s np=%d ext=%v lb=%v src=%v aff=%v/%d etp=%v itp=%v hc=%d cluster=%v local=%v",
			spnKey(spn.Namespace, spn.Name, spn.Port, spn.Protocol), sp.ClusterIP, sp.Port, sp.Protocol, sp.NodePort,
			ext, lb, src, sp.SessionAffinityClientIP, stickyOf(sp),
			sp.ExternalPolicyLocal, sp.InternalPolicyLocal, sp.HealthCheckNodePort, sp.UsesClusterEndpoints(), sp.UsesLocalEndpoints()))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func stickyOf(sp *proxy.ServicePort) int32 {
	if !sp.SessionAffinityClientIP {
		return 0
	}
	return sp.StickyMaxAgeSeconds
}

func kEndpoint(e kproxy.Endpoint) string {
	return fmt.Sprintf("%s local=%v r=%v s=%v t=%v zh=%v nh=%v", e.String(), e.IsLocal(), e.IsReady(), e.IsServing(), e.IsTerminating(),
		sortedSet(e.ZoneHints().UnsortedList()), sortedSet(e.NodeHints().UnsortedList()))
}

func ourEndpoint(e *proxy.Endpoint) string {
	return fmt.Sprintf("%s local=%v r=%v s=%v t=%v zh=%v nh=%v", e.String(), e.IsLocal, e.Ready, e.Serving, e.Terminating,
		sortedSet(e.ZoneHints), sortedSet(e.NodeHints))
}

func sortedSet(s []string) []string {
	out := append([]string{}, s...)
	sort.Strings(out)
	return out
}

func (p *pair) kEndpointsMap() string {
	var lines []string
	for spn, eps := range p.kEps {
		var es []string
		for _, e := range eps {
			es = append(es, kEndpoint(e))
		}
		lines = append(lines, spnKey(spn.Namespace, spn.Name, spn.Port, spn.Protocol)+" ["+strings.Join(es, "; ")+"]")
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func (p *pair) ourEndpointsMap() string {
	var lines []string
	for spn, eps := range p.ourEps {
		var es []string
		for _, e := range eps {
			es = append(es, ourEndpoint(e))
		}
		lines = append(lines, spnKey(spn.Namespace, spn.Name, spn.Port, spn.Protocol)+" ["+strings.Join(es, "; ")+"]")
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func (p *pair) kSelection() string {
	labels := map[string]string{}
	if p.zone != "" {
		labels[v1.LabelTopologyZone] = p.zone
	}
	var lines []string
	for spn, sp := range p.kSvcs {
		c, l, _, any := kproxy.CategorizeEndpoints(p.kEps[spn], sp, nodeName, labels)
		lines = append(lines, fmt.Sprintf("%s cluster=%s local=%s any=%v", spnKey(spn.Namespace, spn.Name, spn.Port, spn.Protocol), kList(c), kList(l), any))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func (p *pair) ourSelection() string {
	var lines []string
	for spn, sp := range p.ourSvcs {
		sel := proxy.SelectEndpoints(sp, p.ourEps[spn], nodeName, p.zone)
		lines = append(lines, fmt.Sprintf("%s cluster=%s local=%s any=%v", spnKey(spn.Namespace, spn.Name, spn.Port, spn.Protocol), ourList(sel.Cluster), ourList(sel.Local), sel.HasAnyEndpoints))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// kList and ourList render an endpoint list, telling nil from empty.
func kList(eps []kproxy.Endpoint) string {
	if eps == nil {
		return "nil"
	}
	s := make([]string, len(eps))
	for i, e := range eps {
		s[i] = e.String()
	}
	return "[" + strings.Join(s, " ") + "]"
}

func ourList(eps []*proxy.Endpoint) string {
	if eps == nil {
		return "nil"
	}
	s := make([]string, len(eps))
	for i, e := range eps {
		s[i] = e.String()
	}
	return "[" + strings.Join(s, " ") + "]"
}
