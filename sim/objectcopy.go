package sim

import (
	"maps"
	"reflect"
	"slices"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The object store copies every object in and out and compares every world
// update with what it holds. The generated DeepCopy allocates once per
// pointer field (four times per endpoint of an EndpointSlice) and
// reflect.DeepEqual tracks every pointer it follows; for EndpointSlices, the
// objects a replay writes all the time, these do the same work in a few
// allocations and none. TestSliceCopyAndEqualCoverEveryField keeps them
// honest when k8s.io/api grows a field.

// copyObject returns a deep copy of obj.
func copyObject(obj runtime.Object) runtime.Object {
	if s, ok := obj.(*discovery.EndpointSlice); ok {
		return copySlice(s)
	}
	return obj.DeepCopyObject()
}

// equalButVersion reports whether two objects of the same kind are equal
// but for their resourceVersion, as reflect.DeepEqual sees them: the world
// skips an update that changes nothing. EndpointSlices are compared field by
// field; other kinds, written rarely, by their kind's shallow-copy compare.
func equalButVersion(a, b runtime.Object) bool {
	if x, ok := a.(*discovery.EndpointSlice); ok {
		y, ok := b.(*discovery.EndpointSlice)
		return ok && sliceEqual(x, y)
	}
	k, err := kindOfObject(a)
	if err != nil || reflect.TypeOf(a) != reflect.TypeOf(b) {
		return false
	}
	return k.ops.sameButVersion(a, b)
}

// copySlice deep-copies an EndpointSlice: the endpoints' strings (addresses
// and optional fields) come from one block, their conditions from another,
// the ports' fields from a third.
func copySlice(in *discovery.EndpointSlice) *discovery.EndpointSlice {
	out := new(discovery.EndpointSlice)
	*out = *in
	copyMeta(&in.ObjectMeta, &out.ObjectMeta)
	if in.Endpoints != nil {
		out.Endpoints = make([]discovery.Endpoint, len(in.Endpoints))
		nStr, nBool := 0, 0
		for i := range in.Endpoints {
			e := &in.Endpoints[i]
			nStr += len(e.Addresses) + countSet(e.Hostname, e.NodeName, e.Zone)
			nBool += countSet(e.Conditions.Ready, e.Conditions.Serving, e.Conditions.Terminating)
		}
		strs := make([]string, nStr) // addresses and optional strings
		bools := make([]bool, nBool)
		for i := range in.Endpoints {
			e, o := &in.Endpoints[i], &out.Endpoints[i]
			*o = *e
			if e.Addresses != nil {
				n := len(e.Addresses)
				o.Addresses = strs[:n:n]
				copy(o.Addresses, e.Addresses)
				strs = strs[n:]
			}
			o.Conditions.Ready = takeCopy(&bools, e.Conditions.Ready)
			o.Conditions.Serving = takeCopy(&bools, e.Conditions.Serving)
			o.Conditions.Terminating = takeCopy(&bools, e.Conditions.Terminating)
			o.Hostname = takeCopy(&strs, e.Hostname)
			o.NodeName = takeCopy(&strs, e.NodeName)
			o.Zone = takeCopy(&strs, e.Zone)
			if e.TargetRef != nil {
				o.TargetRef = e.TargetRef.DeepCopy()
			}
			if e.DeprecatedTopology != nil {
				o.DeprecatedTopology = maps.Clone(e.DeprecatedTopology)
			}
			if e.Hints != nil {
				o.Hints = e.Hints.DeepCopy()
			}
		}
	}
	if in.Ports != nil {
		out.Ports = make([]discovery.EndpointPort, len(in.Ports))
		// Each port's fields live in one element of one block.
		type fields struct {
			name, appProtocol string
			protocol          v1.Protocol
			port              int32
		}
		block := make([]fields, len(in.Ports))
		for i := range in.Ports {
			p, o, f := &in.Ports[i], &out.Ports[i], &block[i]
			*o = *p
			if p.Name != nil {
				f.name = *p.Name
				o.Name = &f.name
			}
			if p.AppProtocol != nil {
				f.appProtocol = *p.AppProtocol
				o.AppProtocol = &f.appProtocol
			}
			if p.Protocol != nil {
				f.protocol = *p.Protocol
				o.Protocol = &f.protocol
			}
			if p.Port != nil {
				f.port = *p.Port
				o.Port = &f.port
			}
		}
	}
	return out
}

// copyMeta is ObjectMeta.DeepCopyInto, cloning the label and annotation
// maps whole when nothing else needs copying.
func copyMeta(in, out *metav1.ObjectMeta) {
	if in.DeletionTimestamp != nil || in.DeletionGracePeriodSeconds != nil || in.OwnerReferences != nil || in.Finalizers != nil || in.ManagedFields != nil {
		in.DeepCopyInto(out)
		return
	}
	*out = *in
	out.Labels = maps.Clone(in.Labels)
	out.Annotations = maps.Clone(in.Annotations)
}

func countSet[T any](ps ...*T) int {
	n := 0
	for _, p := range ps {
		if p != nil {
			n++
		}
	}
	return n
}

// takeCopy copies *p into the next element of *block and points at it; nil
// stays nil.
func takeCopy[T any](block *[]T, p *T) *T {
	if p == nil {
		return nil
	}
	b := *block
	b[0] = *p
	*block = b[1:]
	return &b[0]
}

// sliceEqual is reflect.DeepEqual of two EndpointSlices with their
// resourceVersions blanked, without reflection on the common fields.
// The endpoints, where a real change usually is, are compared before the
// metadata's maps and lists.
func sliceEqual(a, b *discovery.EndpointSlice) bool {
	if a.TypeMeta != b.TypeMeta || a.Name != b.Name || a.Namespace != b.Namespace || a.AddressType != b.AddressType {
		return false
	}
	if (a.Endpoints == nil) != (b.Endpoints == nil) || len(a.Endpoints) != len(b.Endpoints) {
		return false
	}
	for i := range a.Endpoints {
		if !endpointEqual(&a.Endpoints[i], &b.Endpoints[i]) {
			return false
		}
	}
	if (a.Ports == nil) != (b.Ports == nil) || len(a.Ports) != len(b.Ports) {
		return false
	}
	for i := range a.Ports {
		p, q := &a.Ports[i], &b.Ports[i]
		if !ptrEqual(p.Name, q.Name) || !ptrEqual(p.Protocol, q.Protocol) || !ptrEqual(p.Port, q.Port) || !ptrEqual(p.AppProtocol, q.AppProtocol) {
			return false
		}
	}
	return metaEqualButVersion(&a.ObjectMeta, &b.ObjectMeta)
}

func endpointEqual(a, b *discovery.Endpoint) bool {
	return stringsEqual(a.Addresses, b.Addresses) &&
		ptrEqual(a.Conditions.Ready, b.Conditions.Ready) &&
		ptrEqual(a.Conditions.Serving, b.Conditions.Serving) &&
		ptrEqual(a.Conditions.Terminating, b.Conditions.Terminating) &&
		ptrEqual(a.Hostname, b.Hostname) &&
		ptrEqual(a.NodeName, b.NodeName) &&
		ptrEqual(a.Zone, b.Zone) &&
		deepEqualPtr(a.TargetRef, b.TargetRef) &&
		mapEqual(a.DeprecatedTopology, b.DeprecatedTopology) &&
		deepEqualPtr(a.Hints, b.Hints)
}

// metaEqualButVersion compares object metadata but for the resourceVersion,
// as reflect.DeepEqual would.
func metaEqualButVersion(a, b *metav1.ObjectMeta) bool {
	return a.Name == b.Name && a.GenerateName == b.GenerateName && a.Namespace == b.Namespace &&
		a.SelfLink == b.SelfLink && a.UID == b.UID && a.Generation == b.Generation &&
		(a.CreationTimestamp == b.CreationTimestamp || reflect.DeepEqual(a.CreationTimestamp, b.CreationTimestamp)) &&
		deepEqualPtr(a.DeletionTimestamp, b.DeletionTimestamp) &&
		ptrEqual(a.DeletionGracePeriodSeconds, b.DeletionGracePeriodSeconds) &&
		mapEqual(a.Labels, b.Labels) && mapEqual(a.Annotations, b.Annotations) &&
		stringsEqual(a.Finalizers, b.Finalizers) &&
		sliceDeepEqual(a.OwnerReferences, b.OwnerReferences) &&
		sliceDeepEqual(a.ManagedFields, b.ManagedFields)
}

func ptrEqual[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func deepEqualPtr[T any](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return reflect.DeepEqual(a, b)
}

// The nil checks keep reflect.DeepEqual's distinction between nil and empty.

func stringsEqual(a, b []string) bool {
	return (a == nil) == (b == nil) && slices.Equal(a, b)
}

func mapEqual(a, b map[string]string) bool {
	return (a == nil) == (b == nil) && maps.Equal(a, b)
}

func sliceDeepEqual[T any](a, b []T) bool {
	if a == nil || b == nil {
		return (a == nil) == (b == nil)
	}
	return reflect.DeepEqual(a, b)
}
