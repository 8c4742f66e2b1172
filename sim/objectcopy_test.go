package sim

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestSliceCopyAndEqualCoverEveryField fails when k8s.io/api adds a field
// that copySlice and sliceEqual do not know of.
func TestSliceCopyAndEqualCoverEveryField(t *testing.T) {
	for typ, want := range map[reflect.Type][]string{
		reflect.TypeFor[discovery.EndpointSlice]():      {"TypeMeta", "ObjectMeta", "AddressType", "Endpoints", "Ports"},
		reflect.TypeFor[discovery.Endpoint]():           {"Addresses", "Conditions", "Hostname", "TargetRef", "DeprecatedTopology", "NodeName", "Zone", "Hints"},
		reflect.TypeFor[discovery.EndpointConditions](): {"Ready", "Serving", "Terminating"},
		reflect.TypeFor[discovery.EndpointPort]():       {"Name", "Protocol", "Port", "AppProtocol"},
		reflect.TypeFor[metav1.ObjectMeta](): {"Name", "GenerateName", "Namespace", "SelfLink", "UID", "ResourceVersion", "Generation",
			"CreationTimestamp", "DeletionTimestamp", "DeletionGracePeriodSeconds", "Labels", "Annotations", "OwnerReferences", "Finalizers", "ManagedFields"},
	} {
		var got []string
		for i := 0; i < typ.NumField(); i++ {
			got = append(got, typ.Field(i).Name)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%v has fields %v; copySlice and sliceEqual handle %v", typ, got, want)
		}
	}
}

func fullSlice() *discovery.EndpointSlice {
	now := metav1.Unix(100, 0)
	ep := func(a string) discovery.Endpoint {
		return discovery.Endpoint{
			Addresses:          []string{a, a + "0"},
			Conditions:         discovery.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(false), Terminating: ptr.To(true)},
			Hostname:           ptr.To("h"),
			TargetRef:          &v1.ObjectReference{Kind: "Pod", Name: "p"},
			DeprecatedTopology: map[string]string{"a": "b"},
			NodeName:           ptr.To("n"),
			Zone:               ptr.To("z"),
			Hints:              &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: "z"}}, ForNodes: []discovery.ForNode{{Name: "n"}}},
		}
	}
	return &discovery.EndpointSlice{
		TypeMeta: metav1.TypeMeta{Kind: "EndpointSlice", APIVersion: "discovery.k8s.io/v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "s", GenerateName: "g", Namespace: "ns", SelfLink: "l", UID: "u", ResourceVersion: "7", Generation: 2,
			CreationTimestamp: now, DeletionTimestamp: &now, DeletionGracePeriodSeconds: ptr.To[int64](3),
			Labels: map[string]string{"k": "v"}, Annotations: map[string]string{"a": "b"},
			OwnerReferences: []metav1.OwnerReference{{Name: "o"}}, Finalizers: []string{"f"}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}},
		AddressType: discovery.AddressTypeIPv4,
		Endpoints:   []discovery.Endpoint{ep("10.0.0.1"), ep("10.0.0.2"), {Addresses: []string{}}},
		Ports: []discovery.EndpointPort{
			{Name: ptr.To("http"), Protocol: ptr.To(v1.ProtocolTCP), Port: ptr.To[int32](80), AppProtocol: ptr.To("h2")},
			{},
		},
	}
}

// plainMeta clears the metadata fields whose presence sends copyMeta to the
// generated copy.
func plainMeta(s *discovery.EndpointSlice) *discovery.EndpointSlice {
	s.DeletionTimestamp, s.DeletionGracePeriodSeconds, s.OwnerReferences, s.Finalizers, s.ManagedFields = nil, nil, nil, nil, nil
	return s
}

func TestCopySliceIsDeepAndEqual(t *testing.T) {
	for _, plain := range []bool{false, true} {
		build := fullSlice
		if plain {
			build = func() *discovery.EndpointSlice { return plainMeta(fullSlice()) }
		}
		testCopySlice(t, build)
	}
}

func testCopySlice(t *testing.T, build func() *discovery.EndpointSlice) {
	orig := build()
	cp := copySlice(orig)
	if !reflect.DeepEqual(orig, cp) {
		t.Fatalf("copy differs:\n%#v\n%#v", orig, cp)
	}
	// Change every reachable leaf of the copy; the original must not move.
	*cp.Endpoints[0].Conditions.Ready = false
	*cp.Endpoints[1].Conditions.Terminating = false
	*cp.Endpoints[0].Hostname = "x"
	*cp.Endpoints[1].Zone = "x"
	cp.Endpoints[0].Addresses[1] = "x"
	cp.Endpoints[0].TargetRef.Name = "x"
	cp.Endpoints[0].DeprecatedTopology["a"] = "x"
	cp.Endpoints[0].Hints.ForZones[0].Name = "x"
	*cp.Ports[0].Name = "x"
	*cp.Ports[0].Port = 1
	*cp.Ports[0].Protocol = "x"
	*cp.Ports[0].AppProtocol = "x"
	cp.Labels["k"] = "x"
	cp.Annotations["a"] = "x"
	if !reflect.DeepEqual(orig, build()) {
		t.Fatal("changing the copy changed the original")
	}
}

func TestSliceEqualIsDeepEqualButVersion(t *testing.T) {
	blank := func(s *discovery.EndpointSlice) *discovery.EndpointSlice {
		c := s.DeepCopy()
		c.ResourceVersion = ""
		return c
	}
	mutations := map[string]func(s *discovery.EndpointSlice){
		"nothing":             func(s *discovery.EndpointSlice) {},
		"resourceVersion":     func(s *discovery.EndpointSlice) { s.ResourceVersion = "8" },
		"kind":                func(s *discovery.EndpointSlice) { s.Kind = "x" },
		"uid":                 func(s *discovery.EndpointSlice) { s.UID = "x" },
		"creation":            func(s *discovery.EndpointSlice) { s.CreationTimestamp = metav1.Unix(1, 0) },
		"deletion":            func(s *discovery.EndpointSlice) { s.DeletionTimestamp = nil },
		"labels nil":          func(s *discovery.EndpointSlice) { s.Labels = nil },
		"labels empty":        func(s *discovery.EndpointSlice) { s.Labels = map[string]string{} },
		"annotation":          func(s *discovery.EndpointSlice) { s.Annotations["a"] = "x" },
		"owner":               func(s *discovery.EndpointSlice) { s.OwnerReferences[0].UID = "x" },
		"finalizers":          func(s *discovery.EndpointSlice) { s.Finalizers = nil },
		"managed":             func(s *discovery.EndpointSlice) { s.ManagedFields[0].Manager = "x" },
		"addressType":         func(s *discovery.EndpointSlice) { s.AddressType = discovery.AddressTypeIPv6 },
		"endpoints nil":       func(s *discovery.EndpointSlice) { s.Endpoints = nil },
		"endpoints empty":     func(s *discovery.EndpointSlice) { s.Endpoints = []discovery.Endpoint{} },
		"addresses empty":     func(s *discovery.EndpointSlice) { s.Endpoints[2].Addresses = nil },
		"address":             func(s *discovery.EndpointSlice) { s.Endpoints[1].Addresses[1] = "x" },
		"ready":               func(s *discovery.EndpointSlice) { *s.Endpoints[0].Conditions.Ready = false },
		"serving nil":         func(s *discovery.EndpointSlice) { s.Endpoints[0].Conditions.Serving = nil },
		"terminating":         func(s *discovery.EndpointSlice) { *s.Endpoints[1].Conditions.Terminating = false },
		"hostname":            func(s *discovery.EndpointSlice) { *s.Endpoints[0].Hostname = "x" },
		"targetRef":           func(s *discovery.EndpointSlice) { s.Endpoints[0].TargetRef.Namespace = "x" },
		"topology":            func(s *discovery.EndpointSlice) { s.Endpoints[0].DeprecatedTopology["c"] = "d" },
		"nodeName":            func(s *discovery.EndpointSlice) { s.Endpoints[1].NodeName = nil },
		"zone":                func(s *discovery.EndpointSlice) { *s.Endpoints[1].Zone = "x" },
		"hints":               func(s *discovery.EndpointSlice) { s.Endpoints[1].Hints.ForNodes = nil },
		"port name":           func(s *discovery.EndpointSlice) { *s.Ports[0].Name = "x" },
		"port protocol":       func(s *discovery.EndpointSlice) { s.Ports[0].Protocol = nil },
		"port number":         func(s *discovery.EndpointSlice) { *s.Ports[0].Port = 1 },
		"port appProtocol":    func(s *discovery.EndpointSlice) { s.Ports[1].AppProtocol = ptr.To("x") },
		"ports nil":           func(s *discovery.EndpointSlice) { s.Ports = nil },
		"one endpoint less":   func(s *discovery.EndpointSlice) { s.Endpoints = s.Endpoints[:2] },
		"grace period":        func(s *discovery.EndpointSlice) { *s.DeletionGracePeriodSeconds = 4 },
		"generation":          func(s *discovery.EndpointSlice) { s.Generation = 5 },
		"generateName":        func(s *discovery.EndpointSlice) { s.GenerateName = "x" },
		"selfLink, namespace": func(s *discovery.EndpointSlice) { s.SelfLink, s.Namespace = "x", "y" },
	}
	for name, mutate := range mutations {
		a, b := fullSlice(), fullSlice()
		mutate(b)
		want := reflect.DeepEqual(blank(a), blank(b))
		if got := sliceEqual(a, b); got != want {
			t.Errorf("%s: sliceEqual = %v, reflect.DeepEqual without versions = %v", name, got, want)
		}
		if got := equalButVersion(b, a); got != want {
			t.Errorf("%s: equalButVersion = %v, want %v", name, got, want)
		}
	}
}

// Kinds other than EndpointSlice are compared by their kind's entry in the
// table: the resourceVersion aside, any difference counts, and objects of
// different kinds are never equal.
func TestEqualButVersionOtherKinds(t *testing.T) {
	cm := func(rv, v string) *v1.ConfigMap {
		return &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", ResourceVersion: rv}, Data: map[string]string{"k": v}}
	}
	if !equalButVersion(cm("1", "a"), cm("2", "a")) {
		t.Error("ConfigMaps differing only in resourceVersion are not equal")
	}
	if equalButVersion(cm("1", "a"), cm("1", "b")) {
		t.Error("ConfigMaps with different data are equal")
	}
	if equalButVersion(cm("1", "a"), &v1.Secret{ObjectMeta: cm("1", "a").ObjectMeta}) {
		t.Error("a ConfigMap equals a Secret")
	}
	a, b := fullSlice(), fullSlice()
	b.ResourceVersion = "9"
	if !equalButVersion(a, b) || equalButVersion(a, cm("7", "a")) {
		t.Error("EndpointSlices compared wrongly against their own kind or another")
	}
}
