package scenarios

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"sync"

	"go.yaml.in/yaml/v3"
)

// Controller is a consumer of the world, beside the proxy, that a scenario
// switches on under `controllers:` with a key of its own (the ingress-nginx
// sync loop: scenarios/ingressnginx). Like a mode it is a package that
// registers itself (RegisterController), and owns its settings, step
// actions, fault parts and expectations; unlike a mode, any number of
// controllers may run in one scenario, whatever the proxy's mode.
type Controller interface {
	// Key is the controller's key under `controllers:`.
	Key() string
	// NewSettings returns the controller's settings, unset: a pointer to
	// a struct whose yaml-tagged fields are decoded from controllers.KEY.
	NewSettings() ControllerSettings
	// Actions, Faults and Expectations are the controller's own parts of a
	// step, of a fault step and of an expect block (see Mode). They may be
	// written in any scenario; each reports an error at load when its
	// controller is not switched on.
	Actions() []func() Action
	Faults() []func() Action
	Expectations() []func() Expectation
}

// ControllerSettings are one controller's settings in a scenario.
type ControllerSettings interface {
	// Validate reports problems and fills defaults, at load. The
	// settings also implement replay.Attacher: how the controller joins
	// a replay.
	Validate(v *Validator)
}

// Controllers are the controllers a scenario switches on, by key.
type Controllers struct {
	Src Src
	// On holds each switched-on controller's settings, by key.
	On map[string]ControllerSettings
}

var controllerRegistry struct {
	sync.RWMutex
	byKey map[string]Controller
}

// RegisterController makes a controller available under `controllers:`.
// It panics when the key is taken or a part claims a key the core, a mode
// or another controller already has: programming errors.
func RegisterController(c Controller) {
	// The modes first, outside this registry's lock: RegisterMode takes the
	// two locks in the other order.
	var modes []Mode
	for _, name := range ModeNames() {
		m, _ := LookupMode(name)
		modes = append(modes, m)
	}
	controllerRegistry.Lock()
	defer controllerRegistry.Unlock()
	if controllerRegistry.byKey == nil {
		controllerRegistry.byKey = map[string]Controller{}
	}
	if _, ok := controllerRegistry.byKey[c.Key()]; ok {
		panic(fmt.Sprintf("scenarios: controller %q registered twice", c.Key()))
	}
	// A controller's parts may appear beside the core's, any mode's (modes
	// may share keys among themselves: only one runs) and every other
	// controller's.
	acts, faults, exps := partTypes(append(coreActions(), c.Actions()...)), partTypes(c.Faults()), partTypes(append(coreExpectations(), c.Expectations()...))
	for _, o := range controllerRegistry.byKey {
		acts = append(acts, partTypes(o.Actions())...)
		faults = append(faults, partTypes(o.Faults())...)
		exps = append(exps, partTypes(o.Expectations())...)
	}
	checkKeys(c.Key()+" actions", reflect.TypeOf(Step{}), acts)
	checkKeys(c.Key()+" faults", reflect.TypeOf(Fault{}), faults)
	checkKeys(c.Key()+" expectations", reflect.TypeOf(Expect{}), exps)
	for _, m := range modes {
		name := m.Name()
		checkKeys(c.Key()+" actions with mode "+name, reflect.TypeOf(Step{}), append(partTypes(m.Actions()), acts...))
		checkKeys(c.Key()+" faults with mode "+name, reflect.TypeOf(Fault{}), append(partTypes(m.Faults()), faults...))
		checkKeys(c.Key()+" expectations with mode "+name, reflect.TypeOf(Expect{}), append(partTypes(m.Expectations()), exps...))
	}
	controllerRegistry.byKey[c.Key()] = c
}

// registeredControllers lists the registered controllers by key.
func registeredControllers() []Controller {
	controllerRegistry.RLock()
	defer controllerRegistry.RUnlock()
	out := make([]Controller, 0, len(controllerRegistry.byKey))
	for _, c := range controllerRegistry.byKey {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key() < out[j].Key() })
	return out
}

func controllerActions() []func() Action {
	var out []func() Action
	for _, c := range registeredControllers() {
		out = append(out, c.Actions()...)
	}
	return out
}

func controllerFaults() []func() Action {
	var out []func() Action
	for _, c := range registeredControllers() {
		out = append(out, c.Faults()...)
	}
	return out
}

func controllerExpectations() []func() Expectation {
	var out []func() Expectation
	for _, c := range registeredControllers() {
		out = append(out, c.Expectations()...)
	}
	return out
}

func (cs *Controllers) decodeParts(d *decoder, n *yaml.Node, path string) {
	cs.Src = Src{Line: n.Line, Column: n.Column, Path: path, Keys: map[string]Pos{}}
	if n.Kind != yaml.MappingNode {
		d.add(n, path, "want a mapping, got a %s", kindName(n))
		return
	}
	var keys []string
	byKey := map[string]Controller{}
	for _, c := range registeredControllers() {
		keys = append(keys, c.Key())
		byKey[c.Key()] = c
	}
	cs.On = map[string]ControllerSettings{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		p := join(path, k.Value)
		c, ok := byKey[k.Value]
		if !ok {
			if len(keys) == 0 {
				d.add(k, p, "unknown controller %q (none is registered)", k.Value)
			} else {
				d.add(k, p, "unknown controller %q%s", k.Value, suggest(k.Value, keys))
			}
			continue
		}
		if _, dup := cs.On[k.Value]; dup {
			d.add(k, p, "field %q given twice", k.Value)
			continue
		}
		cs.Src.Keys[k.Value] = Pos{Line: val.Line, Column: val.Column, Path: p}
		set := c.NewSettings()
		if val.Tag != "!!null" {
			d.decode(val, p, reflect.ValueOf(set).Elem())
		}
		cs.On[k.Value] = set
	}
}

// Enabled reports whether the scenario switches the controller on.
func (v *Validator) Enabled(key string) bool {
	_, ok := v.s.Controllers.On[key]
	return ok
}

func (d *decoder) validateControllers(v *Validator, cs *Controllers) {
	keys := make([]string, 0, len(cs.On))
	for k := range cs.On {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		cs.On[k].Validate(v)
	}
}

// Decimal is a number with a fraction, such as a rate (0.3).
type Decimal float64

func (x *Decimal) decodeNode(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!float" && n.Tag != "!!int") {
		return fmt.Errorf("want a number such as 0.3, got %q", n.Value)
	}
	f, err := strconv.ParseFloat(n.Value, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return fmt.Errorf("want a number such as 0.3, got %q", n.Value)
	}
	*x = Decimal(f)
	return nil
}

// ValidateInstants checks an expectation shaped like syncs (count,
// atLeast, atMost, at, between) over instants a controller records.
func (v *Validator) ValidateInstants(e *SyncExpect) {
	v.d.validateCounts(e.Src, e.Between, e.Count, e.AtLeast, e.AtMost)
	if e.Count == nil && e.AtLeast == nil && e.AtMost == nil && e.At == nil {
		v.d.addAt(Pos{e.Src.Line, e.Src.Column, e.Src.Path}, "say what to expect: count, atLeast, atMost or at")
	}
}
