package ingressnginx

import (
	"fmt"
	"math"
	"strconv"
	"time"

	networking "k8s.io/api/networking/v1"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/replay"
)

// churnStep rewrites one annotation of an Ingress count times, every
// apart, to "1", "2", ...: steady Ingress churn, one timer at a time.
type churnStep struct {
	IngressChurn *struct {
		Namespace  string             `yaml:"namespace"`
		Name       string             `yaml:"name"`
		Annotation string             `yaml:"annotation"`
		Count      int                `yaml:"count"`
		Every      scenarios.Duration `yaml:"every"`
		Src        scenarios.Src
	} `yaml:"ingressChurn"`
}

func (s *churnStep) Validate(v *scenarios.Validator) {
	c := s.IngressChurn
	if c == nil {
		return
	}
	if c.Namespace == "" {
		c.Namespace = "default"
	}
	if key := scenarios.KeyOf("Ingress", c.Namespace, c.Name); !v.Exists(key) {
		v.Errorf(c.Src.At("name"), "no %s at this point in the timeline", key)
	}
	if c.Annotation == "" {
		v.Errorf(c.Src.At("annotation"), "required: the annotation to rewrite")
	}
	if c.Count < 1 {
		v.Errorf(c.Src.At("count"), "want at least 1 change")
	}
	if c.Every <= 0 {
		v.Errorf(c.Src.At("every"), "want a positive interval")
	} else if at, ok := v.At(); ok && c.Count > 1 {
		if n := time.Duration(c.Count - 1); c.Every.D() > (math.MaxInt64-at.D())/n {
			v.Errorf(c.Src.At("count"), "the last change would pass the largest instant proxysim can represent")
		}
	}
}

func (s *churnStep) Do(r *replay.Run) error {
	c := s.IngressChurn
	if c == nil {
		return nil
	}
	w := r.World()
	key := scenarios.KeyOf("Ingress", c.Namespace, c.Name)
	r.Step("ingressChurn", key, fmt.Sprintf("%d rewrites of %s every %v", c.Count, c.Annotation, c.Every))
	n := 0
	var next func()
	next = func() {
		n++
		cur, err := w.Get("Ingress", [2]string{c.Namespace, c.Name})
		if err != nil {
			r.Async(err)
			return
		}
		ing := cur.(*networking.Ingress).DeepCopy()
		if ing.Annotations == nil {
			ing.Annotations = map[string]string{}
		}
		ing.Annotations[c.Annotation] = strconv.Itoa(n)
		if err := w.Update(ing); err != nil {
			r.Async(err)
			return
		}
		if n < c.Count {
			w.Clock.AfterFunc(c.Every.D(), next)
		}
	}
	w.At(w.Now(), next)
	return nil
}
