package proxy

import (
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

func svc(name, ip string, ports ...v1.ServicePort) *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: "1"},
		Spec:       v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, ClusterIP: ip, Ports: ports},
	}
}

func port(name string, p int32) v1.ServicePort {
	return v1.ServicePort{Name: name, Port: p, Protocol: v1.ProtocolTCP}
}

type ep struct {
	ip                          string
	ready, serving, terminating *bool
	node, zone                  string
	zoneHints, nodeHints        []string
}

func slice(name, service string, eps ...ep) *discovery.EndpointSlice {
	s := &discovery.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: "1", Labels: map[string]string{discovery.LabelServiceName: service}},
		AddressType: discovery.AddressTypeIPv4,
		Ports:       []discovery.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(int32(8080)), Protocol: ptr.To(v1.ProtocolTCP)}},
	}
	for _, e := range eps {
		d := discovery.Endpoint{Addresses: []string{e.ip}, Conditions: discovery.EndpointConditions{Ready: e.ready, Serving: e.serving, Terminating: e.terminating}}
		if e.node != "" {
			d.NodeName = ptr.To(e.node)
		}
		if e.zone != "" {
			d.Zone = ptr.To(e.zone)
		}
		if len(e.zoneHints)+len(e.nodeHints) > 0 {
			d.Hints = &discovery.EndpointHints{}
			for _, z := range e.zoneHints {
				d.Hints.ForZones = append(d.Hints.ForZones, discovery.ForZone{Name: z})
			}
			for _, n := range e.nodeHints {
				d.Hints.ForNodes = append(d.Hints.ForNodes, discovery.ForNode{Name: n})
			}
		}
		s.Endpoints = append(s.Endpoints, d)
	}
	return s
}

func names(eps []*Endpoint) string {
	s := make([]string, len(eps))
	for i, e := range eps {
		s[i] = e.IP
	}
	return strings.Join(s, ",")
}

var (
	yes = ptr.To(true)
	no  = ptr.To(false)
)

func TestServicePortNameKeysAndSkippedServices(t *testing.T) {
	m := ServicePorts(svc("web", "10.0.0.1", port("http", 80), v1.ServicePort{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP}), v1.IPv4Protocol)
	if len(m) != 2 {
		t.Fatalf("ports: %v", m)
	}
	key := ServicePortName{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "web"}, Port: "dns", Protocol: v1.ProtocolUDP}
	if m[key] == nil || m[key].Port != 53 || key.String() != "ns/web:dns" {
		t.Fatalf("missing %v in %v", key, m)
	}
	headless := svc("h", v1.ClusterIPNone, port("http", 80))
	external := svc("e", "10.0.0.2", port("http", 80))
	external.Spec.Type = v1.ServiceTypeExternalName
	v6only := svc("v6", "fd00::1", port("http", 80))
	for _, s := range []*v1.Service{headless, external, v6only, svc("noip", "", port("http", 80))} {
		if ServicePorts(s, v1.IPv4Protocol) != nil {
			t.Errorf("%s should be skipped by an IPv4 proxy", s.Name)
		}
	}
	if ServicePorts(v6only, v1.IPv6Protocol) == nil {
		t.Error("an IPv6 service is not skipped by an IPv6 proxy")
	}
}

func TestServiceTrackerDropsChangesThatReturnToStart(t *testing.T) {
	tr := NewServiceChangeTracker(v1.IPv4Protocol)
	a := svc("web", "10.0.0.1", port("http", 80))
	b := a.DeepCopy()
	b.Spec.Ports[0].Port = 81
	if !tr.Update(a, b) {
		t.Fatal("A->B is a change")
	}
	if tr.Update(b, a) {
		t.Fatal("A->B->A left a change pending")
	}
	labelled := a.DeepCopy()
	labelled.Labels = map[string]string{"x": "y"}
	if tr.Update(a, labelled) {
		t.Fatal("a label change is not a change to the proxy")
	}
	// previous is kept from the first change of the batch
	tr.Update(nil, a)
	m := ServiceMap{}
	res := m.Update(tr)
	if len(res.Updated) != 1 || len(m) != 1 || tr.Pending() != 0 {
		t.Fatalf("apply: %+v map %v pending %d", res, m, tr.Pending())
	}
	tr.Update(a, nil)
	res = m.Update(tr)
	if len(m) != 0 || len(res.Ports[types.NamespacedName{Namespace: "ns", Name: "web"}]) != 0 {
		t.Fatalf("delete left %v", m)
	}
}

func TestSliceTrackerAppliedPendingAndNoOps(t *testing.T) {
	tr := NewEndpointSliceTracker(v1.IPv4Protocol, "node-a", EndpointSliceTrackerOptions{})
	s1 := slice("web-1", "web", ep{ip: "10.1.0.1"})
	if ch, _ := tr.Update(s1, false); !ch {
		t.Fatal("a new slice is a change")
	}
	if ch, _ := tr.Update(s1, false); ch {
		t.Fatal("the same slice again (a resync) is not a change")
	}
	m := EndpointsMap{}
	m.Update(tr)
	if ch, _ := tr.Update(s1, false); ch {
		t.Fatal("the applied slice again is not a change")
	}
	bumped := s1.DeepCopy()
	bumped.ResourceVersion = "2"
	if ch, _ := tr.Update(bumped, false); !ch {
		t.Fatal("like kube-proxy, any change to the slice object counts")
	}
	if ch, _ := tr.Update(slice("ghost", "web"), true); ch {
		t.Fatal("deleting an unknown slice is not a change")
	}
	other := s1.DeepCopy()
	other.AddressType = discovery.AddressTypeIPv6
	if ch, _ := tr.Update(other, false); ch {
		t.Fatal("an IPv6 slice is ignored by an IPv4 tracker")
	}
	nolabel := s1.DeepCopy()
	nolabel.Labels = nil
	if _, err := tr.Update(nolabel, false); err != ErrNoServiceName {
		t.Fatalf("no label: %v", err)
	}
}

func TestConditionDefaultsAndDuplicates(t *testing.T) {
	tr := NewEndpointSliceTracker(v1.IPv4Protocol, "node-a", EndpointSliceTrackerOptions{})
	tr.Update(slice("web-1", "web",
		ep{ip: "10.1.0.1", node: "node-a"},                            // nil conditions: ready, serving, not terminating
		ep{ip: "10.1.0.2", ready: no, serving: yes, terminating: yes}, // terminating copy...
	), false)
	tr.Update(slice("web-2", "web",
		ep{ip: "10.1.0.2", ready: yes, node: "node-b"}, // ...loses to this ready one
	), false)
	m := EndpointsMap{}
	m.Update(tr)
	var eps []*Endpoint
	for _, e := range m {
		eps = e
	}
	if len(eps) != 2 {
		t.Fatalf("endpoints %v", eps)
	}
	e1, e2 := eps[0], eps[1]
	if !e1.Ready || !e1.Serving || e1.Terminating || !e1.IsLocal {
		t.Errorf("defaults: %+v", e1)
	}
	if e2.Terminating || !e2.Ready || e2.NodeName != "node-b" {
		t.Errorf("duplicate should prefer the non-terminating copy: %+v", e2)
	}
}

func TestSelectionReadyTerminatingFallbackAndPolicies(t *testing.T) {
	sp := &ServicePort{Port: 80}
	eps := []*Endpoint{
		{IP: "10.0.0.1", Ready: true},
		{IP: "10.0.0.2", Ready: false, Serving: true, Terminating: true, IsLocal: true},
	}
	sel := SelectEndpoints(sp, eps, "node-a", "")
	if names(sel.Cluster) != "10.0.0.1" || sel.Local != nil {
		t.Fatalf("cluster %s local %v", names(sel.Cluster), sel.Local)
	}
	eps[0].Ready = false
	sel = SelectEndpoints(sp, eps, "node-a", "")
	if names(sel.Cluster) != "10.0.0.2" || !sel.HasAnyEndpoints {
		t.Fatalf("no ready endpoint: fallback to serving-terminating, got %s", names(sel.Cluster))
	}
	local := &ServicePort{Port: 80, InternalPolicyLocal: true}
	sel = SelectEndpoints(local, []*Endpoint{{IP: "10.0.0.1", Ready: true}, {IP: "10.0.0.3", Ready: true, IsLocal: true}}, "node-a", "")
	if sel.Cluster != nil || names(sel.Local) != "10.0.0.3" {
		t.Fatalf("internal Local without external access uses no cluster endpoints: cluster %v local %s", sel.Cluster, names(sel.Local))
	}
	ext := &ServicePort{Port: 80, NodePort: 30080, ExternalPolicyLocal: true}
	sel = SelectEndpoints(ext, []*Endpoint{{IP: "10.0.0.1", Ready: true}, {IP: "10.0.0.3", Ready: true, IsLocal: true}}, "node-a", "")
	if names(sel.Cluster) != "10.0.0.1,10.0.0.3" || names(sel.Local) != "10.0.0.3" {
		t.Fatalf("external Local: cluster %s local %s", names(sel.Cluster), names(sel.Local))
	}
}

func TestSelectionTopologyHints(t *testing.T) {
	sp := &ServicePort{Port: 80}
	eps := []*Endpoint{
		{IP: "10.0.0.1", Ready: true, ZoneHints: []string{"a"}, NodeHints: []string{"node-a"}},
		{IP: "10.0.0.2", Ready: true, ZoneHints: []string{"a"}, NodeHints: []string{"node-b"}},
		{IP: "10.0.0.3", Ready: true, ZoneHints: []string{"b"}, NodeHints: []string{"node-c"}},
	}
	if got := names(SelectEndpoints(sp, eps, "node-a", "a").Cluster); got != "10.0.0.1" {
		t.Fatalf("PreferSameNode: %s", got)
	}
	if got := names(SelectEndpoints(sp, eps, "node-z", "a").Cluster); got != "10.0.0.1,10.0.0.2" {
		t.Fatalf("no node hint for this node: PreferSameZone, got %s", got)
	}
	eps[2].ZoneHints = nil
	if got := names(SelectEndpoints(sp, eps, "node-z", "a").Cluster); got != "10.0.0.1,10.0.0.2,10.0.0.3" {
		t.Fatalf("one endpoint without zone hints turns hints off, got %s", got)
	}
	eps[2].ZoneHints = []string{"b"}
	if got := names(SelectEndpoints(sp, eps, "node-z", "c").Cluster); got != "10.0.0.1,10.0.0.2,10.0.0.3" {
		t.Fatalf("no endpoint hinted for this zone: all, got %s", got)
	}
}

func TestCompareHostPortsIsTextOrder(t *testing.T) {
	ips := []string{"10.0.0.1", "10.0.0.10", "10.0.0.2", "10.0.0.100", "9.1.1.1", "1.2.3.4", "10.0.0.1", "::1", "fd00::1", "fd00::10", "2001:db8::1"}
	ports := []int32{0, 8, 80, 443, 8080, 9, 10, 65535}
	for _, a := range ips {
		for _, b := range ips {
			for _, p := range ports {
				for _, q := range ports {
					want := strings.Compare(HostPort(a, p), HostPort(b, q))
					if got := CompareHostPorts(a, p, b, q); got != want {
						t.Errorf("CompareHostPorts(%s, %d, %s, %d) = %d, want %d", a, p, b, q, got, want)
					}
				}
			}
		}
	}
}

type nopBackend struct{}

func (nopBackend) Sync(*SyncState) error { return nil }

// Size keeps its endpoint count across syncs instead of recounting: it must
// always equal a recount.
func TestSizeCountsEndpointsAcrossSyncs(t *testing.T) {
	p := NewProxier(v1.IPv4Protocol, "node-a", "", nopBackend{}, EndpointSliceTrackerOptions{})
	check := func(when string) {
		t.Helper()
		if err := p.SyncProxyRules(); err != nil {
			t.Fatal(err)
		}
		want := 0
		for _, eps := range p.epMap {
			want += len(eps)
		}
		if _, got := p.Size(); got != want {
			t.Errorf("%s: Size reports %d endpoints, the map holds %d", when, got, want)
		}
	}
	p.OnServiceAdd(svc("a", "10.96.0.1", port("http", 80)))
	_ = p.OnEndpointSliceAdd(slice("a-1", "a", ep{ip: "10.0.0.1"}, ep{ip: "10.0.0.2"}))
	_ = p.OnEndpointSliceAdd(slice("a-2", "a", ep{ip: "10.0.0.2"}, ep{ip: "10.0.0.3"}))
	_ = p.OnServicesSynced()
	_ = p.OnEndpointSlicesSynced()
	check("start")
	_ = p.OnEndpointSliceUpdate(nil, slice("a-2", "a", ep{ip: "10.0.0.4"}))
	_ = p.OnEndpointSliceAdd(slice("b-1", "b", ep{ip: "10.0.1.1"}))
	check("update and add")
	_ = p.OnEndpointSliceDelete(slice("a-1", "a"))
	check("delete")
	_ = p.OnEndpointSliceDelete(slice("a-2", "a"))
	_ = p.OnEndpointSliceDelete(slice("b-1", "b"))
	check("all gone")
}

// endpointEqual must look at every field: a changed field of any kind makes
// two endpoints differ (this fails when Endpoint grows a field it misses).
func TestEndpointEqualSeesEveryField(t *testing.T) {
	base := Endpoint{IP: "10.0.0.1", Port: 80, NodeName: "n", Zone: "z", ZoneHints: []string{"z"}, NodeHints: []string{"n"}}
	typ := reflect.TypeFor[Endpoint]()
	for i := 0; i < typ.NumField(); i++ {
		changed := base
		f := reflect.ValueOf(&changed).Elem().Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString(f.String() + "x")
		case reflect.Int32:
			f.SetInt(f.Int() + 1)
		case reflect.Bool:
			f.SetBool(!f.Bool())
		case reflect.Slice:
			f.Set(reflect.ValueOf([]string{"other"}))
		default:
			t.Fatalf("field %s of kind %v: teach this test and endpointEqual", typ.Field(i).Name, f.Kind())
		}
		if endpointEqual(&base, &changed) {
			t.Errorf("endpointEqual misses a change of %s", typ.Field(i).Name)
		}
	}
	same := base
	if !endpointEqual(&base, &same) {
		t.Error("an endpoint differs from its copy")
	}
}

// A converted slice shares the endpoints that did not change with its
// previous conversion, and only those.
func TestConversionKeepsUnchangedEndpoints(t *testing.T) {
	tr := NewEndpointSliceTracker(v1.IPv4Protocol, "node-a", EndpointSliceTrackerOptions{})
	s1 := slice("a-1", "a", ep{ip: "10.0.0.1"}, ep{ip: "10.0.0.2"}, ep{ip: "10.0.0.3"})
	if _, err := tr.Update(s1, false); err != nil {
		t.Fatal(err)
	}
	s2 := slice("a-1", "a", ep{ip: "10.0.0.1"}, ep{ip: "10.0.0.2", ready: no}, ep{ip: "10.0.0.3"})
	s2.ResourceVersion = "2"
	if _, err := tr.Update(s2, false); err != nil {
		t.Fatal(err)
	}
	ch := tr.checkout()[types.NamespacedName{Namespace: "ns", Name: "a"}]
	var before, after []*Endpoint
	for _, eps := range ch.current {
		after = eps
	}
	// The first conversion is gone from the tracker; convert s1 again
	// against s2's to compare.
	for _, eps := range tr.convert(s1, types.NamespacedName{Namespace: "ns", Name: "a"}, ch.current) {
		before = eps
	}
	if len(before) != 3 || len(after) != 3 {
		t.Fatalf("lists %v, %v", names(before), names(after))
	}
	if before[0] != after[0] || before[2] != after[2] || before[1] == after[1] {
		t.Errorf("sharing: %v %v %v", before[0] == after[0], before[1] == after[1], before[2] == after[2])
	}
	if after[1].Ready || !before[1].Ready {
		t.Error("the changed endpoint kept its old state")
	}
}

func TestHasDuplicates(t *testing.T) {
	e := func(ip string, port int32) *Endpoint { return &Endpoint{IP: ip, Port: port} }
	for _, c := range []struct {
		eps  []*Endpoint
		want bool
	}{
		{nil, false},
		{[]*Endpoint{e("10.0.0.1", 80)}, false},
		{[]*Endpoint{e("10.0.0.1", 80), e("10.0.0.2", 80)}, false},
		{[]*Endpoint{e("10.0.0.2", 80), e("10.0.0.1", 80)}, false},
		{[]*Endpoint{e("10.0.0.1", 80), e("10.0.0.1", 80)}, true},
		{[]*Endpoint{e("10.0.0.1", 80), e("10.0.0.2", 80), e("10.0.0.1", 80)}, true},
		{[]*Endpoint{e("10.0.0.1", 80), e("10.0.0.1", 81)}, false},
	} {
		if got := hasDuplicates(c.eps); got != c.want {
			t.Errorf("hasDuplicates(%v) = %v", names(c.eps), got)
		}
	}
}
