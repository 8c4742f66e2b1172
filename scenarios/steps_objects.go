package scenarios

import (
	"net"

	"go.yaml.in/yaml/v3"
	discovery "k8s.io/api/discovery/v1"
)

// ApplyStep creates or updates objects: `apply: MANIFEST` or a list.
type ApplyStep struct {
	Apply   yaml.Node `yaml:"apply"`
	Src     Src
	Objects []Object
}

func (a *ApplyStep) Validate(v *Validator) {
	a.Objects = v.objects(&a.Apply, a.Src.At("apply").Path, false)
}

// UpdateStep updates objects that must exist: `update: MANIFEST`.
type UpdateStep struct {
	Update  yaml.Node `yaml:"update"`
	Src     Src
	Objects []Object
}

func (u *UpdateStep) Validate(v *Validator) {
	u.Objects = v.objects(&u.Update, u.Src.At("update").Path, true)
}

// objects decodes the manifests of an apply or update and records them in
// the timeline's state.
func (v *Validator) objects(n *yaml.Node, path string, update bool) []Object {
	var out []Object
	for _, o := range v.d.objectsOf(v.s, n, path) {
		if update && !v.known[o.Key] {
			v.d.addAt(o.Pos, "update of %s, which does not exist at this point (use apply to create)", o.Key)
		}
		v.known[o.Key] = true
		v.state[o.Key] = o.Obj
		out = append(out, o)
	}
	return out
}

// PatchStep changes part of an existing object.
type PatchStep struct {
	Patch *Patch `yaml:"patch"`
	Src   Src
}

func (ps *PatchStep) Validate(v *Validator) {
	pt, d := ps.Patch, v.d
	if pt == nil {
		return
	}
	d.validateRef(pt.Kind, pt.Namespace, pt.Name, pt.Src, v.known)
	switch {
	case pt.Merge == nil && pt.Endpoint == "":
		d.addAt(pt.Src.At("merge"), "a patch needs merge (a strategic merge patch) or endpoint and conditions")
	case pt.Merge != nil && pt.Endpoint != "":
		d.addAt(pt.Src.At("endpoint"), "give merge or endpoint, not both")
	case pt.Endpoint != "":
		if pt.Kind != "EndpointSlice" {
			d.addAt(pt.Src.At("endpoint"), "endpoint patches apply to EndpointSlices, not %s", pt.Kind)
		}
		if net.ParseIP(pt.Endpoint) == nil {
			d.addAt(pt.Src.At("endpoint"), "%q is not an IP address", pt.Endpoint)
		}
		if pt.Conditions == nil {
			d.addAt(pt.Src.At("conditions"), "required: the conditions to set")
		}
		if sl, ok := v.state[KeyOf(pt.Kind, pt.Namespace, pt.Name)].(*discovery.EndpointSlice); ok && !hasEndpoint(sl, pt.Endpoint) {
			d.addAt(pt.Src.At("endpoint"), "%s has no endpoint %s at this point", KeyOf(pt.Kind, pt.Namespace, pt.Name), pt.Endpoint)
		}
	default:
		d.validateMerge(pt, v.path, v.state)
	}
}

// DeleteStep deletes an object.
type DeleteStep struct {
	Delete *ObjectRef `yaml:"delete"`
}

func (ds *DeleteStep) Validate(v *Validator) {
	del := ds.Delete
	if del == nil {
		return
	}
	v.d.validateRef(del.Kind, del.Namespace, del.Name, del.Src, v.known)
	if del.GracePeriod != nil && del.Kind != "Pod" {
		v.d.addAt(del.Src.At("gracePeriod"), "a grace period applies to Pods, not %s", del.Kind)
	}
	key := KeyOf(del.Kind, del.Namespace, del.Name)
	if at, ok := v.At(); ok && del.GracePeriod != nil && del.GracePeriod.D() > 0 && del.Kind == "Pod" {
		if end, ok := addInstant(at, *del.GracePeriod); ok {
			v.forgetAt(key, end)
			return
		}
	}
	v.forget(key)
}
