package scenarios

import (
	"fmt"
	"net"

	"go.yaml.in/yaml/v3"
	discovery "k8s.io/api/discovery/v1"
)

// applyStep creates or updates objects: `apply: MANIFEST` or a list.
type applyStep struct {
	Apply   yaml.Node `yaml:"apply"`
	Src     Src
	objects []Object
}

func (a *applyStep) Validate(v *Validator) {
	a.objects = v.objects(&a.Apply, a.Src.At("apply").Path, false)
}

func (a *applyStep) Do(r *Run) error { return r.apply("apply", a.objects) }

// updateStep updates objects that must exist: `update: MANIFEST`.
type updateStep struct {
	Update  yaml.Node `yaml:"update"`
	Src     Src
	objects []Object
}

func (u *updateStep) Validate(v *Validator) {
	u.objects = v.objects(&u.Update, u.Src.At("update").Path, true)
}

func (u *updateStep) Do(r *Run) error { return r.apply("update", u.objects) }

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

func (r *Run) apply(op string, objects []Object) error {
	for _, o := range objects {
		r.Step(op, o.Key, "")
		if err := r.World().Apply(o.Obj); err != nil {
			return err
		}
	}
	return nil
}

// patchStep changes part of an existing object.
type patchStep struct {
	Patch *Patch `yaml:"patch"`
	Src   Src
}

func (ps *patchStep) Validate(v *Validator) {
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

func (ps *patchStep) Do(r *Run) error {
	p := ps.Patch
	if p == nil {
		return nil
	}
	r.Step("patch", KeyOf(p.Kind, p.Namespace, p.Name), "")
	ns := namespaceOf(p.Kind, p.Namespace)
	w := r.World()
	cur, err := w.Get(p.Kind, [2]string{ns, p.Name})
	if err != nil {
		return err
	}
	if p.Endpoint != "" {
		s := cur.(*discovery.EndpointSlice).DeepCopy()
		if !patchEndpoint(s, p.Endpoint, p.Conditions) {
			return fmt.Errorf("patch: %s has no endpoint %s", KeyOf(p.Kind, ns, p.Name), p.Endpoint)
		}
		return w.Update(s)
	}
	out, err := mergePatch(cur, p.Merge)
	if err != nil {
		return fmt.Errorf("patch %s: %w", KeyOf(p.Kind, ns, p.Name), err)
	}
	defaultAndValidate(out)
	return w.Update(out)
}

// deleteStep deletes an object.
type deleteStep struct {
	Delete *ObjectRef `yaml:"delete"`
}

func (ds *deleteStep) Validate(v *Validator) {
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

func (ds *deleteStep) Do(r *Run) error {
	d := ds.Delete
	if d == nil {
		return nil
	}
	ns := namespaceOf(d.Kind, d.Namespace)
	if d.GracePeriod != nil && d.GracePeriod.D() > 0 {
		r.Step("delete", KeyOf(d.Kind, ns, d.Name), "grace period "+d.GracePeriod.String())
		return r.gracefulDelete(ns, d.Name, d.GracePeriod.D())
	}
	r.Step("delete", KeyOf(d.Kind, ns, d.Name), "")
	return r.World().Delete(d.Kind, ns, d.Name)
}
