package endpointslice

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

// Which setting decides a Service's hints: the deprecated annotation over
// topology-mode, either over trafficDistribution; PreferSameZone and
// PreferSameNode only with the gate.
func TestHintSettings(t *testing.T) {
	for _, tc := range []struct {
		ann        map[string]string
		td         string
		preferSame bool
		auto       bool
		want       string
	}{
		{nil, "", true, false, ""},
		{map[string]string{v1.AnnotationTopologyMode: "Auto"}, "PreferClose", true, true, ""},
		{map[string]string{v1.AnnotationTopologyMode: "auto"}, "", true, true, ""},
		{map[string]string{v1.AnnotationTopologyMode: "AUTO"}, "PreferClose", true, false, "PreferClose"},
		{map[string]string{v1.AnnotationTopologyMode: "Auto", v1.DeprecatedAnnotationTopologyAwareHints: "Disabled"}, "PreferSameNode", true, false, "PreferSameNode"},
		{map[string]string{v1.AnnotationTopologyMode: "Disabled", v1.DeprecatedAnnotationTopologyAwareHints: "auto"}, "", true, true, ""},
		{nil, "PreferSameZone", false, false, ""},
		{nil, "PreferSameNode", false, false, ""},
		{nil, "PreferClose", false, false, "PreferClose"},
		{nil, "Elsewhere", true, false, ""},
	} {
		svc := &v1.Service{}
		svc.Annotations = tc.ann
		if tc.td != "" {
			svc.Spec.TrafficDistribution = ptr.To(tc.td)
		}
		r := &Reconciler{PreferSameTrafficDistribution: tc.preferSame}
		auto := topologyAuto(svc.Annotations)
		td := ""
		if !auto {
			td = r.trafficDistribution(svc)
		}
		if auto != tc.auto || td != tc.want {
			t.Errorf("%v %q preferSame=%v: auto %v, trafficDistribution %q; want %v, %q", tc.ann, tc.td, tc.preferSame, auto, td, tc.auto, tc.want)
		}
	}
}

// The allotment's bounds: 3 zones of equal CPU take 3 endpoints (1 each)
// but not 4 or 5 (2 each), and 6 again; control-plane, NotReady and
// zone-less nodes as upstream's SetNodes counts them.
func TestAllotment(t *testing.T) {
	n := func(name, zone, cpu string, ready bool, labels ...string) *v1.Node {
		nd := &v1.Node{}
		nd.Name = name
		nd.Labels = map[string]string{}
		if zone != "" {
			nd.Labels[v1.LabelTopologyZone] = zone
		}
		for _, l := range labels {
			nd.Labels[l] = ""
		}
		if cpu != "" {
			nd.Status.Allocatable = v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)}
		}
		st := v1.ConditionFalse
		if ready {
			st = v1.ConditionTrue
		}
		nd.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: st}}
		return nd
	}
	tc := NewTopologyCache()
	tc.SetNodes([]*v1.Node{n("a", "zone-a", "2", true), n("b", "zone-b", "2", true), n("c", "zone-c", "2", true),
		n("cp", "", "", true, "node-role.kubernetes.io/control-plane"), n("d", "", "", false)})
	for eps, ok := range map[int]bool{2: false, 3: true, 4: false, 5: false, 6: true, 7: true} {
		if _, got := tc.allot(eps); got != ok {
			t.Errorf("%d endpoints over 3 equal zones: allotted %v, want %v", eps, got, ok)
		}
	}
	tc.SetNodes([]*v1.Node{n("a", "zone-a", "2", true), n("b", "zone-b", "2", true), n("x", "", "2", true)})
	if tc.Shares() != nil {
		t.Errorf("a Ready node without a zone left shares %v", tc.Shares())
	}
	tc.SetNodes([]*v1.Node{n("a", "zone-a", "2", true), n("b", "zone-a", "2", true)})
	if tc.Shares() != nil {
		t.Errorf("one zone left shares %v", tc.Shares())
	}
	// Hinted counts that no longer fit the shares make the Service
	// overloaded; with no shares, any Service with hints is.
	tc.SetNodes([]*v1.Node{n("a", "zone-a", "6", true), n("b", "zone-b", "2", true)})
	tc.remember("default/web", discovery.AddressTypeIPv4, map[string]int{"zone-a": 2, "zone-b": 2})
	if got := tc.Overloaded(); len(got) != 1 {
		t.Errorf("zone-a with 3/4 of the CPU and 2 of 4 endpoints: overloaded %v", got)
	}
	tc.remember("default/web", discovery.AddressTypeIPv4, map[string]int{"zone-a": 3, "zone-b": 1})
	if got := tc.Overloaded(); len(got) != 0 {
		t.Errorf("3 and 1 for shares 3/4 and 1/4: overloaded %v", got)
	}
	tc.SetNodes(nil)
	if got := tc.Overloaded(); len(got) != 1 {
		t.Errorf("no shares: overloaded %v, want the Service with hints", got)
	}
}
