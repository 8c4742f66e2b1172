package main

import (
	"encoding/json"
	"fmt"
	"io"

	"k8s.io/client-go/kubernetes/scheme"

	"github.com/proxysim/proxysim/scenarios"
)

// writeObjects prints a scenario's starting objects, generated ones
// included, one JSON object a line with its apiVersion and kind: what a
// step needs to name a generated object, and a dump the loader reads back.
func writeObjects(w io.Writer, s *scenarios.Scenario) error {
	for _, o := range s.Initial {
		obj := o.Obj.DeepCopyObject()
		if obj.GetObjectKind().GroupVersionKind().Kind == "" {
			gvks, _, err := scheme.Scheme.ObjectKinds(obj)
			if err != nil || len(gvks) == 0 {
				return fmt.Errorf("%s: %s: no apiVersion and kind: %v", s.File, o.Key, err)
			}
			obj.GetObjectKind().SetGroupVersionKind(gvks[0])
		}
		b, err := json.Marshal(obj)
		if err != nil {
			return fmt.Errorf("%s: %s: %w", s.File, o.Key, err)
		}
		if _, err := fmt.Fprintf(w, "%s\n", b); err != nil {
			return err
		}
	}
	return nil
}
