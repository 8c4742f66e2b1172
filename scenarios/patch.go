package scenarios

import (
	"encoding/json"
	"fmt"

	"go.yaml.in/yaml/v3"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes/scheme"
)

// patchError is a merge patch that does not make a valid object of its
// kind; Field, when set, is the offending field's path in the object.
type patchError struct {
	Field string
	Msg   string
}

func (e *patchError) Error() string { return e.Msg }

// MergePatch applies a strategic merge patch, written as YAML, to cur and
// decodes the result strictly: an unknown or mistyped field is an error, as
// the API server's strict field validation makes it.
func MergePatch(cur runtime.Object, patch *yaml.Node) (runtime.Object, error) {
	if patch.Kind != yaml.MappingNode {
		return nil, &patchError{Msg: fmt.Sprintf("want a mapping (the fields to change), got a %s", kindName(patch))}
	}
	var raw any
	if err := patch.Decode(&raw); err != nil {
		return nil, &patchError{Msg: err.Error()}
	}
	patchJSON, err := json.Marshal(raw)
	if err != nil {
		return nil, &patchError{Msg: err.Error()}
	}
	gvks, _, err := scheme.Scheme.ObjectKinds(cur)
	if err != nil || len(gvks) == 0 {
		return nil, fmt.Errorf("patch: unknown object type %T", cur)
	}
	origJSON, err := json.Marshal(cur)
	if err != nil {
		return nil, err
	}
	merged, err := strategicpatch.StrategicMergePatch(origJSON, patchJSON, cur)
	if err != nil {
		return nil, &patchError{Msg: err.Error()}
	}
	var m map[string]any
	if err := json.Unmarshal(merged, &m); err != nil {
		return nil, &patchError{Msg: err.Error()}
	}
	m["apiVersion"], m["kind"] = gvks[0].GroupVersion().String(), gvks[0].Kind
	data, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	obj, _, err := strictDecoder.Decode(data, nil, nil)
	if err != nil {
		if f := unknownFieldRE.FindStringSubmatch(err.Error()); f != nil {
			return nil, &patchError{Field: f[1], Msg: fmt.Sprintf("unknown field %q in %s", lastSegment(f[1]), gvks[0].Kind)}
		}
		return nil, &patchError{Msg: err.Error()}
	}
	return obj, nil
}

// PatchEndpoint sets one endpoint's conditions; it reports whether the slice
// has that endpoint.
func PatchEndpoint(s *discovery.EndpointSlice, ip string, c *Conditions) bool {
	found := false
	for i := range s.Endpoints {
		e := &s.Endpoints[i]
		for _, a := range e.Addresses {
			if a != ip {
				continue
			}
			found = true
			if c.Ready != nil {
				e.Conditions.Ready = c.Ready
			}
			if c.Serving != nil {
				e.Conditions.Serving = c.Serving
			}
			if c.Terminating != nil {
				e.Conditions.Terminating = c.Terminating
			}
		}
	}
	return found
}

// hasEndpoint reports whether a slice has an endpoint with address ip.
func hasEndpoint(s *discovery.EndpointSlice, ip string) bool {
	for _, e := range s.Endpoints {
		for _, a := range e.Addresses {
			if a == ip {
				return true
			}
		}
	}
	return false
}
