package upstream

// Topology hints side by side with k8s.io/endpointslice v0.36's: the
// reconciler comparison of endpointslice_test.go on clusters with zones.
//
// Each sequence draws 2 to 6 nodes in 1 to 4 zones with random allocatable
// CPU (now and then none, no zone, not Ready, or a control-plane node), a
// Service with a random spec.trafficDistribution and topology annotations
// (topology-mode, the deprecated topology-aware-hints, both, values Auto,
// auto, Disabled), and the plain comparison's churn plus changes of nodes
// (CPU, Ready, zone), of the Service's hint settings and of a zone's pods'
// readiness, and now and then hints written into the slices by someone
// else (strayHints). Both reconcilers get a topology cache fed the same nodes, and
// both have PreferSameTrafficDistribution on or off for the sequence.
//
// Compared, on top of the plain comparison: every endpoint's hints.
// trafficDistribution's hints (and their removal) follow from the endpoint
// alone, so they must be identical. topology-mode Auto's donations are
// upstream's choice among equals (it walks slices and zones in map order):
// whether each endpoint has hints is compared exactly, and per address
// type how many endpoints of each zone are hinted for each zone; so is the
// cache's list of overloaded Services. Where upstream's map order can
// change any of that (a tie between zones, a donated endpoint that either
// of two zones could take, which of two equal slices it fills), its result
// from the same input is drawn again, up to esHintRetries times, and ours
// must equal one of them; how often that took more than one draw is
// logged. Each step's upstream topology cache is a new one holding the
// nodes and our cache's counts from before the step, so that its state,
// like the slices, is the same input for both.

import (
	"flag"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	kes "k8s.io/endpointslice"
	"k8s.io/endpointslice/topologycache"
	kesutil "k8s.io/endpointslice/util"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	ours "github.com/proxysim/proxysim/sim/controllers/endpointslice"
)

var (
	esHintSequences = flag.Int("es-hint-sequences", 1000, "random sequences with topology for the EndpointSlice hints comparison")
	esHintRetries   = flag.Int("es-hint-retries", 200, "draws of upstream's result where its map order decides")
)

var hintCoverage struct {
	steps, stray, autoHinted, autoRemoved, donated, closeHinted, nodeHinted, cleared, overloaded, redrawn, maxDraws int
}

func TestEndpointSliceHintsMatchUpstream(t *testing.T) {
	start := time.Now()
	for i := 0; i < *esHintSequences; i++ {
		seed := *seed0 + int64(i)
		if err := compareHintSequence(seed, *esSteps); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
	t.Logf("%d sequences x %d steps in %v: %+v", *esHintSequences, *esSteps, time.Since(start).Round(time.Millisecond), hintCoverage)
	c := hintCoverage
	if c.autoHinted == 0 || c.autoRemoved == 0 || c.donated == 0 || c.closeHinted == 0 || c.nodeHinted == 0 || c.cleared == 0 || c.overloaded == 0 {
		t.Errorf("the sequences never exercised part of the hints: %+v", c)
	}
}

// newHintWorld is a sliceWorld with zones.
func newHintWorld(seed int64) *sliceWorld {
	w := newSliceWorld(seed)
	zones := []string{"zone-a", "zone-b", "zone-c", "zone-d"}[:1+w.r.Intn(4)]
	w.nodeNames = []string{"node-a", "node-b", "node-c", "node-d", "node-e", "node-f"}[:2+w.r.Intn(5)]
	w.makeNode = func(name string) *v1.Node {
		n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
		if !w.chance(4) {
			n.Labels[v1.LabelTopologyZone] = zones[w.r.Intn(len(zones))]
		}
		if w.chance(4) {
			n.Labels["node-role.kubernetes.io/control-plane"] = ""
		}
		if !w.chance(4) {
			n.Status.Allocatable = v1.ResourceList{v1.ResourceCPU: hintCPU(w.r)}
		}
		st := v1.ConditionTrue
		if w.chance(10) {
			st = v1.ConditionFalse
		}
		n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: st}}
		return n
	}
	w.decorate = func(s *v1.Service) { decorateHints(w, s) }
	w.nodes = map[string]*v1.Node{}
	for _, n := range w.nodeNames {
		if !w.chance(10) {
			w.nodes[n] = w.makeNode(n)
		}
	}
	w.svc = w.newService()
	return w
}

// hintCPU is a node's allocatable CPU: round sizes, and odd millicores
// that make the zones' shares fractions without ties.
func hintCPU(r *rand.Rand) resource.Quantity {
	if r.Intn(2) == 0 {
		return resource.MustParse([]string{"500m", "1", "2", "4", "8", "16"}[r.Intn(6)])
	}
	return *resource.NewMilliQuantity(int64(100+r.Intn(16000)), resource.DecimalSI)
}

func decorateHints(w *sliceWorld, s *v1.Service) {
	s.Spec.TrafficDistribution = nil
	if k := w.r.Intn(5); k > 0 {
		s.Spec.TrafficDistribution = ptr.To([]string{v1.ServiceTrafficDistributionPreferClose, v1.ServiceTrafficDistributionPreferSameZone, v1.ServiceTrafficDistributionPreferSameNode, v1.ServiceTrafficDistributionPreferClose}[k-1])
	}
	s.Annotations = nil
	if w.chance(45) {
		s.Annotations = map[string]string{}
		vals := []string{"Auto", "auto", "Auto", "Disabled"}
		switch w.r.Intn(4) {
		case 0, 1:
			s.Annotations[v1.AnnotationTopologyMode] = vals[w.r.Intn(4)]
		case 2:
			s.Annotations[v1.DeprecatedAnnotationTopologyAwareHints] = vals[w.r.Intn(4)]
		default:
			s.Annotations[v1.AnnotationTopologyMode] = vals[w.r.Intn(4)]
			s.Annotations[v1.DeprecatedAnnotationTopologyAwareHints] = vals[w.r.Intn(4)]
		}
	}
}

// hintStep is the plain churn, or a change to the nodes, the Service's
// hint settings, or one zone's pods.
func hintStep(w *sliceWorld) {
	if !w.chance(40) {
		w.step()
		return
	}
	switch w.r.Intn(5) {
	case 0, 1: // a node changes: CPU, readiness, zone, or it is remade
		name := w.nodeNames[w.r.Intn(len(w.nodeNames))]
		n, ok := w.nodes[name]
		if !ok {
			w.nodes[name] = w.makeNode(name)
			return
		}
		n = n.DeepCopy()
		fresh := w.makeNode(name)
		switch w.r.Intn(3) {
		case 0:
			n.Status.Allocatable = fresh.Status.Allocatable
		case 1:
			n.Status.Conditions = fresh.Status.Conditions
		default:
			n.Labels = fresh.Labels
		}
		w.nodes[name] = n
	case 2: // the Service's hint settings
		s := w.svc.DeepCopy()
		decorateHints(w, s)
		w.svc = s
	default: // every pod on one node flips readiness: a zone loses or gains endpoints
		node := w.nodeNames[w.r.Intn(len(w.nodeNames))]
		ready := w.chance(50)
		for _, name := range w.podNames() {
			if p := w.pods[name]; p.Spec.NodeName == node {
				p = p.DeepCopy()
				w.rv++
				w.setReady(p, ready)
				w.pods[name] = p
			}
		}
	}
}

func (w *sliceWorld) nodeList() []*v1.Node {
	var out []*v1.Node
	for _, n := range w.nodeNames {
		if node, ok := w.nodes[n]; ok {
			out = append(out, node.DeepCopy())
		}
	}
	return out
}

// upstreamRun is one reconcile by upstream's reconciler.
type upstreamRun struct {
	slices     []*discovery.EndpointSlice
	counts     writeCounts
	err        error
	overloaded []string
}

func runUpstream(w *sliceWorld, existing []*discovery.EndpointSlice, trigger time.Time, preferSame bool, before map[discovery.AddressType]map[string]int) (*upstreamRun, error) {
	var seeded []runtime.Object
	var kin []*discovery.EndpointSlice
	for _, s := range existing {
		seeded = append(seeded, s.DeepCopy())
		kin = append(kin, s.DeepCopy())
	}
	run := &upstreamRun{}
	kc := upstreamClient(seeded...)
	kc.PrependReactor("*", "endpointslices", func(a k8stesting.Action) (bool, runtime.Object, error) {
		switch a.GetVerb() {
		case "create":
			run.counts.creates++
		case "update":
			run.counts.updates++
		case "delete":
			run.counts.deletes++
		}
		return false, nil, nil
	})
	logger := klog.Background()
	tc := topologycache.NewTopologyCache()
	tc.SetNodes(logger, w.nodeList())
	key := w.svc.Namespace + "/" + w.svc.Name
	for at, perZone := range before {
		tc.SetHints(key, at, topologycache.EndpointZoneInfo(perZone))
	}
	kr := kes.NewReconciler(kc, w.nodeLister(), int32(w.max), kesutil.NewEndpointSliceTracker(), tc, record.NewFakeRecorder(1000), ours.ControllerName,
		kes.WithPreferSameTrafficDistributionEnabled(preferSame))
	run.err = kr.Reconcile(logger, w.svc.DeepCopy(), w.selected(), kin, trigger)
	after, err := listSlices(kc)
	if err != nil {
		return nil, err
	}
	run.slices = after
	run.overloaded = tc.GetOverloadedServices()
	sort.Strings(run.overloaded)
	return run, nil
}

func compareHintSequence(seed int64, steps int) error {
	w := newHintWorld(seed)
	preferSame := w.chance(80)
	topo := ours.NewTopologyCache()
	var existing []*discovery.EndpointSlice
	key := "default/web"
	for st := 0; st < steps; st++ {
		if st > 0 {
			hintStep(w)
			if w.chance(10) {
				existing = strayHints(w, existing)
			}
		}
		before := topo.Hinted(key)
		topo.SetNodes(w.nodeList())
		mw := &memWriter{slices: map[string]*discovery.EndpointSlice{}, step: st}
		var input []*discovery.EndpointSlice
		for _, s := range existing {
			mw.slices[s.Name] = s.DeepCopy()
			input = append(input, s.DeepCopy())
		}
		nodes := w.nodes
		rec := &ours.Reconciler{
			MaxEndpointsPerSlice: w.max,
			Node: func(name string) (*v1.Node, bool) {
				n, ok := nodes[name]
				return n, ok
			},
			Writer:                        mw,
			Topology:                      topo,
			PreferSameTrafficDistribution: preferSame,
		}
		trigger := time.Unix(3000+int64(st), 0)
		ourErr := rec.Reconcile(w.svc.DeepCopy(), w.selected(), input, trigger)
		var got []*discovery.EndpointSlice
		for _, n := range sortedNames(mw.slices) {
			got = append(got, mw.slices[n])
		}
		auto := hintsAuto(w.svc)
		mine := describeHintRun(got, mw.creates, mw.updates, mw.dels, ourErr != nil, topo.Overloaded(), auto)

		var first string
		matched := false
		draws := 0
		for draws < *esHintRetries && !matched {
			draws++
			run, err := runUpstream(w, existing, trigger, preferSame, before)
			if err != nil {
				return err
			}
			theirs := describeHintRun(run.slices, run.counts.creates, run.counts.updates, run.counts.deletes, run.err != nil, run.overloaded, auto)
			if draws == 1 {
				first = theirs
			}
			matched = theirs == mine
			if !matched && w.svc.Spec.TrafficDistribution == nil && !auto {
				break // nothing of upstream's map order to draw again
			}
		}
		if !matched {
			return fmt.Errorf("step %d (max %d, trafficDistribution %v, annotations %v, preferSame %v; %d draws of upstream): results differ\nnodes: %s\nours:\n%s\nupstream (first draw):\n%s",
				st, w.max, ptr.Deref(w.svc.Spec.TrafficDistribution, "-"), w.svc.Annotations, preferSame, draws, nodesString(w.nodeList()), mine, first)
		}
		if draws > 1 {
			hintCoverage.redrawn++
		}
		hintCoverage.maxDraws = max(hintCoverage.maxDraws, draws)
		countHints(got, auto, len(topo.Overloaded()) > 0)
		existing = got
	}
	return nil
}

// strayHints writes hints into some endpoints of the slices, as another
// writer (an older controller, a person) might: ready or not, for zones
// and nodes that may not exist. Both reconcilers get the same input.
func strayHints(w *sliceWorld, in []*discovery.EndpointSlice) []*discovery.EndpointSlice {
	var out []*discovery.EndpointSlice
	for _, s := range in {
		s = s.DeepCopy()
		for i := range s.Endpoints {
			if !w.chance(30) {
				continue
			}
			h := &discovery.EndpointHints{}
			if w.chance(70) {
				h.ForZones = []discovery.ForZone{{Name: []string{"zone-a", "zone-b", "zone-x"}[w.r.Intn(3)]}}
			}
			if w.chance(40) {
				h.ForNodes = []discovery.ForNode{{Name: w.nodeNames[w.r.Intn(len(w.nodeNames))]}}
			}
			if w.chance(20) {
				h = nil
			}
			s.Endpoints[i].Hints = h
		}
		out = append(out, s)
	}
	hintCoverage.stray++
	return out
}

func hintsAuto(s *v1.Service) bool {
	v, ok := s.Annotations[v1.DeprecatedAnnotationTopologyAwareHints]
	if !ok {
		v, ok = s.Annotations[v1.AnnotationTopologyMode]
	}
	return ok && (v == "Auto" || v == "auto")
}

func countHints(sl []*discovery.EndpointSlice, auto, overloaded bool) {
	hintCoverage.steps++
	var hinted, other, nodes, readyEps int
	for _, s := range sl {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready == nil || !*e.Conditions.Ready {
				continue
			}
			readyEps++
			if e.Hints == nil {
				continue
			}
			hinted++
			if len(e.Hints.ForNodes) > 0 {
				nodes++
			}
			if e.Zone != nil && len(e.Hints.ForZones) == 1 && e.Hints.ForZones[0].Name != *e.Zone {
				other++
			}
		}
	}
	switch {
	case auto && hinted > 0:
		hintCoverage.autoHinted++
	case auto && readyEps > 0:
		hintCoverage.autoRemoved++
	case hinted > 0:
		hintCoverage.closeHinted++
	case readyEps > 0:
		hintCoverage.cleared++
	}
	if other > 0 {
		hintCoverage.donated++
	}
	if nodes > 0 {
		hintCoverage.nodeHinted++
	}
	if overloaded {
		hintCoverage.overloaded++
	}
}

// describeHintRun is what must be equal: the plain comparison's normal
// form, the writes, the error, each endpoint's hints (under Auto: whether
// it has any, and per address type the zone-to-zone counts), and the
// overloaded Services.
func describeHintRun(sl []*discovery.EndpointSlice, creates, updates, deletes int, failed bool, overloaded []string, auto bool) string {
	var b strings.Builder
	b.WriteString(normalise(sl))
	fmt.Fprintf(&b, "\nwrites %d/%d/%d creates/updates/deletes, error %v, overloaded %v\n", creates, updates, deletes, failed, overloaded)
	var eps []string
	flows := map[string]int{}
	for _, s := range sl {
		for _, e := range s.Endpoints {
			addrs := append([]string(nil), e.Addresses...)
			sort.Strings(addrs)
			id := fmt.Sprintf("%s %v %s", s.AddressType, addrs, ptr.Deref(e.TargetRef, v1.ObjectReference{}).Name)
			readyEp := e.Conditions.Ready != nil && *e.Conditions.Ready
			if auto && readyEp {
				eps = append(eps, fmt.Sprintf("%s hinted=%v", id, e.Hints != nil))
				if e.Hints != nil {
					for _, fz := range e.Hints.ForZones {
						flows[fmt.Sprintf("%s %s -> %s", s.AddressType, ptr.Deref(e.Zone, "-"), fz.Name)]++
					}
				}
				continue
			}
			eps = append(eps, id+" hints="+hintsString(e.Hints))
		}
	}
	sort.Strings(eps)
	b.WriteString(strings.Join(eps, "\n"))
	var fl []string
	for k, n := range flows {
		fl = append(fl, fmt.Sprintf("%s: %d", k, n))
	}
	sort.Strings(fl)
	b.WriteString("\nflows:\n" + strings.Join(fl, "\n"))
	return b.String()
}

func hintsString(h *discovery.EndpointHints) string {
	if h == nil {
		return "nil"
	}
	var z, n []string
	for _, f := range h.ForZones {
		z = append(z, f.Name)
	}
	for _, f := range h.ForNodes {
		n = append(n, f.Name)
	}
	return fmt.Sprintf("zones%v nodes%v", z, n)
}

func nodesString(ns []*v1.Node) string {
	var out []string
	for _, n := range ns {
		cpu := n.Status.Allocatable.Cpu()
		out = append(out, fmt.Sprintf("%s zone=%q cpu=%s ready=%v cp=%v", n.Name, n.Labels[v1.LabelTopologyZone], cpu.String(),
			n.Status.Conditions[0].Status, n.Labels["node-role.kubernetes.io/control-plane"] != "" || hasKey(n.Labels, "node-role.kubernetes.io/control-plane")))
	}
	return strings.Join(out, "; ")
}

func hasKey(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}
