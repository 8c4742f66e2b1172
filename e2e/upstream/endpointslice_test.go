package upstream

// The EndpointSlice reconciler side by side with k8s.io/endpointslice's.
//
// Upstream's reconciler is nondeterministic (FACTS §1.12): it takes new
// endpoints from a map (EndpointSet.PopAny), lists slice names from sets and
// sorts with an unstable sort, so which endpoint lands in which slice, the
// order of endpoints and ports inside a slice, and which of several equally
// good slices it fills vary from run to run. The numbers of creates, updates
// and deletes of one reconcile follow from its input alone. So each step
// hands both reconcilers the SAME input (the Service, the pods, the nodes
// and the current slices, deep-copied) and compares, after
// normalising (endpoints as a sorted set per address type and port set,
// ports sorted, slice names and order ignored):
//   - the resulting endpoints per address type and port set,
//   - the number of slices per address type and port set, and their sizes
//     (upstream fills the fullest slices first and the closest fit, so the
//     sizes do not depend on its map order), and the numbers of creates,
//     updates and deletes (after finalize's create+delete pairing),
//   - the placeholder: an empty slice exists in one iff in the other,
//   - no slice over the maximum, in either,
//   - the error (a pod on an unknown node) in one iff in the other,
//   - the labels and owners of every slice, and that exactly the slices
//     written carry this step's trigger time (which ones is upstream's
//     choice among equals).
// Our result becomes the next step's input (upstream's own would carry its
// map order into the next step and make the sequences vary from run to
// run); upstream gets it through a fresh fake clientset. The fake clientset
// ignores generateName, so a create reactor names slices as the API server
// would (as upstream's own controller tests do); it also fills in kind and
// apiVersion, which objects from a real informer lack, so listSlices clears
// them. The maximum per slice only grows within a sequence: neither
// reconciler rebalances, so a smaller one would leave slices over it.

import (
	"context"
	"flag"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	kes "k8s.io/endpointslice"
	kesutil "k8s.io/endpointslice/util"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	ours "github.com/proxysim/proxysim/sim/controllers/endpointslice"
)

var (
	esSequences = flag.Int("es-sequences", 10000, "random pod/service/node sequences for the EndpointSlice reconciler comparison")
	esSteps     = flag.Int("es-steps", 12, "changes per EndpointSlice sequence")
)

var esCoverage struct {
	steps, creates, updates, deletes, placeholders, unknownNode, multiSlice, dual int
}

func TestEndpointSliceReconcilerMatchesUpstream(t *testing.T) {
	start := time.Now()
	for i := 0; i < *esSequences; i++ {
		seed := *seed0 + int64(i)
		if err := compareSliceSequence(seed, *esSteps); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
	t.Logf("%d sequences x %d steps in %v: %+v", *esSequences, *esSteps, time.Since(start).Round(time.Millisecond), esCoverage)
	if esCoverage.creates == 0 || esCoverage.updates == 0 || esCoverage.deletes == 0 || esCoverage.placeholders == 0 || esCoverage.unknownNode == 0 {
		t.Errorf("the sequences never exercised part of the reconciler: %+v", esCoverage)
	}
}

// sliceWorld is one sequence's cluster: a Service, pods and nodes.
type sliceWorld struct {
	r     *rand.Rand
	svc   *v1.Service
	pods  map[string]*v1.Pod
	nodes map[string]*v1.Node
	max   int
	rv    int
	// The topology comparison's hooks (endpointslice_hints_test.go); nil
	// in the plain one.
	nodeNames []string                   // where pods may run; default node-a..c
	makeNode  func(name string) *v1.Node // default newNode
	decorate  func(*v1.Service)          // applied to every new Service
}

func (w *sliceWorld) chance(pct int) bool { return w.r.Intn(100) < pct }

func newSliceWorld(seed int64) *sliceWorld {
	r := rand.New(rand.NewSource(seed))
	w := &sliceWorld{r: r, pods: map[string]*v1.Pod{}, nodes: map[string]*v1.Node{}}
	w.max = []int{1, 2, 3, 5, 10, 100}[r.Intn(6)]
	w.svc = w.newService()
	for _, n := range []string{"node-a", "node-b"} {
		w.nodes[n] = w.newNode(n)
	}
	return w
}

func (w *sliceWorld) newService() *v1.Service {
	s := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "svc-uid", CreationTimestamp: metav1.NewTime(time.Unix(1000, 0))},
		Spec: v1.ServiceSpec{
			Selector:                 map[string]string{"app": "web"},
			PublishNotReadyAddresses: w.chance(20),
		},
	}
	if w.chance(20) {
		s.Labels = map[string]string{"team": []string{"x", "y"}[w.r.Intn(2)]}
	}
	switch w.r.Intn(4) {
	case 0:
		s.Spec.ClusterIP, s.Spec.IPFamilies = "10.96.0.10", []v1.IPFamily{v1.IPv4Protocol}
	case 1:
		s.Spec.ClusterIP, s.Spec.IPFamilies = "fd00::10", []v1.IPFamily{v1.IPv6Protocol}
	case 2:
		s.Spec.ClusterIP, s.Spec.IPFamilies = "10.96.0.10", []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	default:
		s.Spec.ClusterIP = v1.ClusterIPNone // headless, no families: both
	}
	if w.decorate != nil {
		defer w.decorate(s)
	}
	nports := w.r.Intn(3)
	if s.Spec.ClusterIP != v1.ClusterIPNone && nports == 0 {
		nports = 1
	}
	for i := 0; i < nports; i++ {
		p := v1.ServicePort{Name: []string{"http", "dns"}[i%2], Port: int32(80 + i), Protocol: []v1.Protocol{v1.ProtocolTCP, v1.ProtocolUDP}[i%2]}
		if w.chance(50) {
			p.TargetPort = intstr.FromString(p.Name)
		} else {
			p.TargetPort = intstr.FromInt32(int32(8080 + i))
		}
		if w.chance(10) {
			p.AppProtocol = ptr.To("http")
		}
		s.Spec.Ports = append(s.Spec.Ports, p)
	}
	return s
}

func (w *sliceWorld) newNode(name string) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if w.chance(70) {
		n.Labels = map[string]string{v1.LabelTopologyZone: "zone-" + name[len(name)-1:]}
	}
	return n
}

func (w *sliceWorld) newPod(name string) *v1.Pod {
	w.rv++
	i := w.r.Intn(250)
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name), ResourceVersion: fmt.Sprint(w.rv),
			Labels: map[string]string{"app": "web"}},
		Spec: v1.PodSpec{NodeName: []string{"node-a", "node-b", "node-c", ""}[w.r.Intn(4)]},
	}
	if w.nodeNames != nil {
		p.Spec.NodeName = w.nodeNames[w.r.Intn(len(w.nodeNames))]
	}
	if p.Spec.NodeName == "" {
		p.Spec.NodeName = "node-a"
	}
	var ports []v1.ContainerPort
	if w.chance(80) {
		ports = append(ports, v1.ContainerPort{Name: "http", ContainerPort: 8080, Protocol: v1.ProtocolTCP})
	}
	if w.chance(60) {
		ports = append(ports, v1.ContainerPort{Name: "dns", ContainerPort: []int32{53, 5353}[w.r.Intn(2)], Protocol: v1.ProtocolUDP})
	}
	p.Spec.Containers = []v1.Container{{Name: "c", Ports: ports}}
	if w.chance(10) {
		p.Spec.InitContainers = []v1.Container{{Name: "side", RestartPolicy: ptr.To(v1.ContainerRestartPolicyAlways),
			Ports: []v1.ContainerPort{{Name: "http", ContainerPort: 9090, Protocol: v1.ProtocolTCP}}}}
	}
	if w.chance(20) {
		p.Spec.Hostname = "h-" + name
		p.Spec.Subdomain = []string{"web", "other"}[w.r.Intn(2)]
	}
	v4, v6 := fmt.Sprintf("10.1.%d.%d", i/100, i%100+1), fmt.Sprintf("fd00::1:%x", i+1)
	switch w.r.Intn(5) {
	case 0:
		p.Status.PodIPs = []v1.PodIP{{IP: v4}}
	case 1:
		p.Status.PodIPs = []v1.PodIP{{IP: v6}}
	case 2:
		p.Status.PodIPs = []v1.PodIP{{IP: v4}, {IP: v6}}
	case 3:
		p.Status.PodIPs = []v1.PodIP{{IP: v6}, {IP: v4}}
	default: // no IP yet
	}
	if len(p.Status.PodIPs) > 0 {
		p.Status.PodIP = p.Status.PodIPs[0].IP
	}
	w.setReady(p, w.chance(70))
	if w.chance(5) {
		p.Status.Phase = []v1.PodPhase{v1.PodSucceeded, v1.PodFailed}[w.r.Intn(2)]
	}
	return p
}

func (w *sliceWorld) setReady(p *v1.Pod, ready bool) {
	st := v1.ConditionFalse
	if ready {
		st = v1.ConditionTrue
	}
	p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: st, LastTransitionTime: metav1.NewTime(time.Unix(int64(2000+w.rv), 0))}}
}

// step changes the cluster at random.
func (w *sliceWorld) step() {
	names := w.podNames()
	switch k := w.r.Intn(100); {
	case k < 35 || len(names) == 0:
		n := 1
		if w.chance(30) {
			n = 1 + w.r.Intn(3*w.max+2)
		}
		for j := 0; j < n; j++ {
			name := fmt.Sprintf("web-%d", w.r.Intn(400))
			w.pods[name] = w.newPod(name)
		}
	case k < 50:
		n := 1
		if w.chance(30) {
			n = 1 + w.r.Intn(len(names))
		}
		for j := 0; j < n && j < len(names); j++ {
			delete(w.pods, names[w.r.Intn(len(names))])
		}
	case k < 70:
		p := w.pods[names[w.r.Intn(len(names))]].DeepCopy()
		w.rv++
		w.setReady(p, !kesutil.IsPodReady(p))
		w.pods[p.Name] = p
	case k < 78:
		p := w.pods[names[w.r.Intn(len(names))]].DeepCopy()
		p.DeletionTimestamp = ptr.To(metav1.NewTime(time.Unix(5000, 0)))
		w.pods[p.Name] = p
	case k < 85:
		p := w.pods[names[w.r.Intn(len(names))]].DeepCopy()
		p.Labels = map[string]string{"app": []string{"web", "api"}[w.r.Intn(2)]}
		w.pods[p.Name] = p
	case k < 90:
		n := []string{"node-a", "node-b", "node-c"}[w.r.Intn(3)]
		if w.nodeNames != nil {
			n = w.nodeNames[w.r.Intn(len(w.nodeNames))]
		}
		if _, ok := w.nodes[n]; ok && w.chance(50) {
			delete(w.nodes, n)
		} else if w.makeNode != nil {
			w.nodes[n] = w.makeNode(n)
		} else {
			w.nodes[n] = w.newNode(n)
		}
	case k < 93:
		// A larger maximum (a controller restarted with a new flag); a
		// smaller one would leave slices over it, since neither
		// reconciler rebalances.
		if m := []int{1, 2, 3, 5, 10, 100}[w.r.Intn(6)]; m > w.max {
			w.max = m
		}
	case k < 96:
		s := w.svc.DeepCopy()
		if w.chance(50) {
			s.Labels = map[string]string{"team": []string{"x", "y", "z"}[w.r.Intn(3)]}
		} else {
			s.Spec.PublishNotReadyAddresses = !s.Spec.PublishNotReadyAddresses
		}
		w.svc = s
	default:
		w.svc = w.newService() // ports or families change
	}
}

func (w *sliceWorld) podNames() []string {
	var out []string
	for n := range w.pods {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (w *sliceWorld) selected() []*v1.Pod {
	var out []*v1.Pod
	for _, n := range w.podNames() {
		if p := w.pods[n]; p.Labels["app"] == "web" {
			out = append(out, p.DeepCopy())
		}
	}
	return out
}

func (w *sliceWorld) nodeLister() corelisters.NodeLister {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, n := range w.nodes {
		_ = idx.Add(n.DeepCopy())
	}
	return corelisters.NewNodeLister(idx)
}

// upstreamClient is a fake clientset that names slices by generateName and
// sets generation 1 on create, as the API server does.
func upstreamClient(objs ...runtime.Object) *fake.Clientset {
	// NewSimpleClientset, not NewClientset: the latter builds a REST mapper
	// for its field manager on every create, which made this test 10x slower.
	c := fake.NewSimpleClientset(objs...) //nolint:staticcheck // see above
	n := 0
	c.PrependReactor("create", "endpointslices", func(a k8stesting.Action) (bool, runtime.Object, error) {
		s := a.(k8stesting.CreateAction).GetObject().(*discovery.EndpointSlice)
		if s.Name == "" && s.GenerateName != "" {
			n++
			s.Name = fmt.Sprintf("%sg%04d", s.GenerateName, n)
		}
		s.Generation = 1
		return false, s, nil
	})
	return c
}

func listSlices(c *fake.Clientset) ([]*discovery.EndpointSlice, error) {
	l, err := c.DiscoveryV1().EndpointSlices("default").List(context.TODO(), metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []*discovery.EndpointSlice
	for i := range l.Items {
		// The fake clientset fills in kind and apiVersion; objects from a
		// real informer have none, and upstream's placeholder comparison
		// (placeholderSliceCompare) sees the difference: with them, it
		// rewrites an unchanged placeholder on every sync.
		l.Items[i].TypeMeta = metav1.TypeMeta{}
		out = append(out, &l.Items[i])
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// memWriter applies our reconciler's writes to a copy of the input slices,
// counting them.
type memWriter struct {
	slices                 map[string]*discovery.EndpointSlice
	creates, updates, dels int
	n, step                int // names are unique within a sequence
}

func (m *memWriter) Create(s *discovery.EndpointSlice) (string, error) {
	m.n++
	cp := s.DeepCopy()
	cp.Name = fmt.Sprintf("%sours%02d-%04d", s.GenerateName, m.step, m.n)
	m.slices[cp.Name] = cp
	m.creates++
	return cp.Name, nil
}

func (m *memWriter) Update(s *discovery.EndpointSlice) error {
	if _, ok := m.slices[s.Name]; !ok {
		return fmt.Errorf("update of missing slice %s", s.Name)
	}
	m.slices[s.Name] = s.DeepCopy()
	m.updates++
	return nil
}

func (m *memWriter) Delete(_, name string) error {
	if _, ok := m.slices[name]; !ok {
		return fmt.Errorf("delete of missing slice %s", name)
	}
	delete(m.slices, name)
	m.dels++
	return nil
}

// countingClient counts upstream's writes.
type writeCounts struct{ creates, updates, deletes int }

func compareSliceSequence(seed int64, steps int) error {
	w := newSliceWorld(seed)
	var counts writeCounts
	logger := klog.Background()
	// Each step's input is our previous result: deterministic, so the
	// whole comparison is (upstream's result, which depends on map order,
	// is only compared, never carried on).
	var existing []*discovery.EndpointSlice
	for st := 0; st < steps; st++ {
		if st > 0 {
			w.step()
		}
		var seeded []runtime.Object
		for _, s := range existing {
			seeded = append(seeded, s.DeepCopy())
		}
		kc := upstreamClient(seeded...)
		kc.PrependReactor("*", "endpointslices", func(a k8stesting.Action) (bool, runtime.Object, error) {
			switch a.GetVerb() {
			case "create":
				counts.creates++
			case "update":
				counts.updates++
			case "delete":
				counts.deletes++
			}
			return false, nil, nil
		})
		// Ours, on a copy of the same input.
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
			Writer: mw,
		}
		trigger := time.Unix(3000+int64(st), 0)
		ourErr := rec.Reconcile(w.svc.DeepCopy(), w.selected(), input, trigger)

		// Upstream.
		counts = writeCounts{}
		kr := kes.NewReconciler(kc, w.nodeLister(), int32(w.max), kesutil.NewEndpointSliceTracker(), nil, record.NewFakeRecorder(1000), ours.ControllerName)
		var kin []*discovery.EndpointSlice
		for _, s := range existing {
			kin = append(kin, s.DeepCopy())
		}
		kErr := kr.Reconcile(logger, w.svc.DeepCopy(), w.selected(), kin, trigger)
		after, err := listSlices(kc)
		if err != nil {
			return err
		}
		var got []*discovery.EndpointSlice
		for _, n := range sortedNames(mw.slices) {
			got = append(got, mw.slices[n])
		}
		if (ourErr != nil) != (kErr != nil) {
			return fmt.Errorf("step %d: error: ours %v, upstream %v", st, ourErr, kErr)
		}
		if kErr != nil {
			esCoverage.unknownNode++
		}
		if a, b := normalise(got), normalise(after); a != b {
			return fmt.Errorf("step %d (max %d): results differ\nours:\n%s\nupstream:\n%s", st, w.max, a, b)
		}
		if mw.creates != counts.creates || mw.updates != counts.updates || mw.dels != counts.deletes {
			return fmt.Errorf("step %d: writes: ours %d/%d/%d creates/updates/deletes, upstream %d/%d/%d", st,
				mw.creates, mw.updates, mw.dels, counts.creates, counts.updates, counts.deletes)
		}
		stamp := trigger.UTC().Format(time.RFC3339Nano)
		for i, sl := range [][]*discovery.EndpointSlice{got, after} {
			stamped := 0
			for _, s := range sl {
				if s.Annotations[v1.EndpointsLastChangeTriggerTime] == stamp {
					stamped++
				}
			}
			if stamped != mw.creates+mw.updates {
				return fmt.Errorf("step %d: %d slices carry this sync's trigger time in result %d, want %d", st, stamped, i, mw.creates+mw.updates)
			}
			perType := map[discovery.AddressType]int{}
			for _, s := range sl {
				if len(s.Endpoints) > w.max {
					return fmt.Errorf("step %d: slice %s has %d endpoints, max %d", st, s.Name, len(s.Endpoints), w.max)
				}
				perType[s.AddressType]++
			}
			if perType[discovery.AddressTypeIPv4] > 1 || perType[discovery.AddressTypeIPv6] > 1 {
				esCoverage.multiSlice++
			}
		}
		esCoverage.steps++
		esCoverage.creates += mw.creates
		esCoverage.updates += mw.updates
		esCoverage.deletes += mw.dels
		for _, s := range after {
			if len(s.Endpoints) == 0 && len(s.Ports) == 0 {
				esCoverage.placeholders++
			}
		}
		if len(w.svc.Spec.IPFamilies) != 1 {
			esCoverage.dual++
		}
		existing = got
	}
	return nil
}

func sortedNames(m map[string]*discovery.EndpointSlice) []string {
	var out []string
	for n := range m {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// normalise renders slices without what upstream leaves to chance: per
// address type, the number of slices and, per port set, the sorted
// endpoints; plus the placeholder and the labels and annotations.
func normalise(sl []*discovery.EndpointSlice) string {
	type group struct {
		slices int
		sizes  []int
		eps    []string
	}
	byType := map[string]*group{}
	var meta []string
	for _, s := range sl {
		ports := make([]string, len(s.Ports))
		for i, p := range s.Ports {
			app := ""
			if p.AppProtocol != nil {
				app = *p.AppProtocol
			}
			ports[i] = fmt.Sprintf("%s/%s/%d/%s", ptr.Deref(p.Name, ""), ptr.Deref(p.Protocol, ""), ptr.Deref(p.Port, 0), app)
		}
		sort.Strings(ports)
		k := string(s.AddressType) + " [" + strings.Join(ports, " ") + "]"
		g := byType[k]
		if g == nil {
			g = &group{}
			byType[k] = g
		}
		g.slices++
		g.sizes = append(g.sizes, len(s.Endpoints))
		for _, e := range s.Endpoints {
			g.eps = append(g.eps, endpointString(e))
		}
		var lbls []string
		for lk, lv := range s.Labels {
			lbls = append(lbls, lk+"="+lv)
		}
		sort.Strings(lbls)
		// Which slices a reconcile rewrites (and so which carry the new
		// trigger time) is upstream's choice among equals; the count is
		// compared in compareSliceSequence.
		meta = append(meta, fmt.Sprintf("%s labels %v owners %d empty %v",
			s.AddressType, lbls, len(s.OwnerReferences), len(s.Endpoints) == 0))
	}
	var out []string
	for k, g := range byType {
		sort.Strings(g.eps)
		sort.Ints(g.sizes)
		out = append(out, fmt.Sprintf("%s: %d slices of %v\n    %s", k, g.slices, g.sizes, strings.Join(g.eps, "\n    ")))
	}
	sort.Strings(out)
	sort.Strings(meta)
	return strings.Join(out, "\n") + "\n" + strings.Join(meta, "\n")
}

func endpointString(e discovery.Endpoint) string {
	addrs := append([]string(nil), e.Addresses...)
	sort.Strings(addrs)
	b := func(p *bool) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprint(*p)
	}
	ref := ""
	if e.TargetRef != nil {
		ref = e.TargetRef.Kind + ":" + e.TargetRef.Namespace + "/" + e.TargetRef.Name + ":" + string(e.TargetRef.UID)
	}
	return fmt.Sprintf("%v ready=%s serving=%s terminating=%s node=%s zone=%s host=%s ref=%s",
		addrs, b(e.Conditions.Ready), b(e.Conditions.Serving), b(e.Conditions.Terminating),
		ptr.Deref(e.NodeName, "-"), ptr.Deref(e.Zone, "-"), ptr.Deref(e.Hostname, "-"), ref)
}
