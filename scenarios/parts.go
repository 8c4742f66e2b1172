package scenarios

import (
	"reflect"

	"go.yaml.in/yaml/v3"
)

// partsDecoder is implemented by the mappings whose keys are spread over
// the core and the scenario's mode: proxy, a step, a fault, an expect block.
type partsDecoder interface {
	decodeParts(d *decoder, n *yaml.Node, path string)
}

// The core's step actions and expectations, in the order they run and are
// checked; a mode's come after them.
func coreActions() []func() Action {
	return append([]func() Action{
		func() Action { return &ApplyStep{} },
		func() Action { return &UpdateStep{} },
		func() Action { return &PatchStep{} },
		func() Action { return &ChurnStep{} },
		func() Action { return &DeleteStep{} },
		func() Action { return &PodReadyStep{} },
		func() Action { return &RolloutStep{} },
		func() Action { return &RestartStep{} },
		func() Action { return &FaultStep{} },
	}, plugins.actions...)
}

func coreExpectations() []func() Expectation {
	return append([]func() Expectation{
		func() Expectation { return &SyncsExpectation{} },
		func() Expectation { return &LatencyExpectation{} },
		func() Expectation { return &OpsExpectation{} },
		func() Expectation { return &ProgrammingExpectation{} },
		func() Expectation { return &WritesExpectation{} },
		func() Expectation { return &EndpointsExpectation{} },
	}, plugins.expectations...)
}

// plugins are the steps, fault parts and expectations every mode shares
// that register themselves (RegisterAction, RegisterFault,
// RegisterExpectation) from a file of their own.
var plugins struct {
	actions      []func() Action
	faults       []func() Action
	expectations []func() Expectation
}

// RegisterAction adds a step action every mode shares. Call it from an init
// function, before any mode registers; it panics when a key is taken.
func RegisterAction(a func() Action) {
	checkKeys("actions", reflect.TypeOf(Step{}), partTypes(append(coreActions(), a)))
	plugins.actions = append(plugins.actions, a)
}

// RegisterFault adds a fault part every mode shares (`fault: {KEY: ...}`).
func RegisterFault(f func() Action) {
	checkKeys("faults", reflect.TypeOf(Fault{}), partTypes(append(append([]func() Action(nil), plugins.faults...), f)))
	plugins.faults = append(plugins.faults, f)
}

// RegisterExpectation adds an expectation every mode shares.
func RegisterExpectation(e func() Expectation) {
	checkKeys("expectations", reflect.TypeOf(Expect{}), partTypes(append(coreExpectations(), e)))
	plugins.expectations = append(plugins.expectations, e)
}

func (d *decoder) actionKinds() []func() Action {
	kinds := coreActions()
	if d.mode != nil {
		kinds = append(kinds, d.mode.Actions()...)
	}
	return append(kinds, controllerActions()...)
}

// modeOf finds proxy.mode before anything is decoded: the mode decides
// which keys a step, a fault or an expect block may have. An empty or
// missing mode is the default one.
func modeOf(doc *yaml.Node) (Mode, bool) {
	name := ""
	if root := valueNode(doc, "proxy"); root != nil {
		if m := valueNode(root, "mode"); m != nil && m.Kind == yaml.ScalarNode {
			name = m.Value
		}
	}
	return LookupMode(name)
}

// valueNode is the value of key in a mapping (or a document holding one).
func valueNode(n *yaml.Node, key string) *yaml.Node {
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			v := n.Content[i+1]
			if v.Kind == yaml.AliasNode {
				v = v.Alias
			}
			return v
		}
	}
	return nil
}

func (p *Proxy) decodeParts(d *decoder, n *yaml.Node, path string) {
	targets := []reflect.Value{reflect.ValueOf(p).Elem()}
	if d.mode != nil {
		p.Settings = d.mode.NewSettings()
		targets = append(targets, reflect.ValueOf(p.Settings).Elem())
	}
	// With a mode proxysim does not know, its fields cannot be told from
	// typos: the unknown mode is the one problem reported.
	d.decodeMapping(n, path, targets, d.mode == nil)
}

func (st *Step) decodeParts(d *decoder, n *yaml.Node, path string) {
	st.Actions = append(st.Actions, decodeInto(d, n, path, st, d.actionKinds())...)
}

func (e *Expect) decodeParts(d *decoder, n *yaml.Node, path string) {
	kinds := coreExpectations()
	if d.mode != nil {
		kinds = append(kinds, d.mode.Expectations()...)
	}
	kinds = append(kinds, controllerExpectations()...)
	e.Checks = append(e.Checks, decodeInto(d, n, path, e, kinds)...)
}

// decodeInto reads one mapping across host (a core struct) and a fresh part
// of each kind, and returns the parts whose keys the mapping set.
func decodeInto[P any](d *decoder, n *yaml.Node, path string, host any, kinds []func() P) []P {
	parts := make([]P, len(kinds))
	targets := []reflect.Value{reflect.ValueOf(host).Elem()}
	for i, k := range kinds {
		parts[i] = k()
		targets = append(targets, reflect.ValueOf(parts[i]).Elem())
	}
	present := d.decodeMapping(n, path, targets, false)
	var out []P
	for i, p := range parts {
		if present[i+1] {
			out = append(out, p)
		}
	}
	return out
}

func (f *Fault) decodeParts(d *decoder, n *yaml.Node, path string) {
	kinds := append([]func() Action(nil), plugins.faults...)
	if d.mode != nil {
		kinds = append(kinds, d.mode.Faults()...)
	}
	kinds = append(kinds, controllerFaults()...)
	f.Parts = append(f.Parts, decodeInto(d, n, path, f, kinds)...)
	for _, k := range kinds {
		f.keys = append(f.keys, keysOf(reflect.TypeOf(k()))...)
	}
}
