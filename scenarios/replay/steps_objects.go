package replay

import (
	"fmt"

	"github.com/proxysim/proxysim/scenarios"
	discovery "k8s.io/api/discovery/v1"
)

func doApplyStep(a *scenarios.ApplyStep, r *Run) error { return r.apply("apply", a.Objects) }

func doUpdateStep(u *scenarios.UpdateStep, r *Run) error { return r.apply("update", u.Objects) }

func (r *Run) apply(op string, objects []scenarios.Object) error {
	for _, o := range objects {
		r.Step(op, o.Key, "")
		if err := r.World().Apply(o.Obj); err != nil {
			return err
		}
	}
	return nil
}

func doPatchStep(ps *scenarios.PatchStep, r *Run) error {
	p := ps.Patch
	if p == nil {
		return nil
	}
	r.Step("patch", scenarios.KeyOf(p.Kind, p.Namespace, p.Name), "")
	ns := scenarios.NamespaceOf(p.Kind, p.Namespace)
	w := r.World()
	cur, err := w.Get(p.Kind, [2]string{ns, p.Name})
	if err != nil {
		return err
	}
	if p.Endpoint != "" {
		s := cur.(*discovery.EndpointSlice).DeepCopy()
		if !scenarios.PatchEndpoint(s, p.Endpoint, p.Conditions) {
			return fmt.Errorf("patch: %s has no endpoint %s", scenarios.KeyOf(p.Kind, ns, p.Name), p.Endpoint)
		}
		return w.Update(s)
	}
	out, err := scenarios.MergePatch(cur, p.Merge)
	if err != nil {
		return fmt.Errorf("patch %s: %w", scenarios.KeyOf(p.Kind, ns, p.Name), err)
	}
	scenarios.DefaultAndValidate(out)
	return w.Update(out)
}

func doDeleteStep(ds *scenarios.DeleteStep, r *Run) error {
	d := ds.Delete
	if d == nil {
		return nil
	}
	ns := scenarios.NamespaceOf(d.Kind, d.Namespace)
	if d.GracePeriod != nil && d.GracePeriod.D() > 0 {
		r.Step("delete", scenarios.KeyOf(d.Kind, ns, d.Name), "grace period "+d.GracePeriod.String())
		return r.gracefulDelete(ns, d.Name, d.GracePeriod.D())
	}
	r.Step("delete", scenarios.KeyOf(d.Kind, ns, d.Name), "")
	return r.World().Delete(d.Kind, ns, d.Name)
}
