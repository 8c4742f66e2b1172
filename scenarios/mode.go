package scenarios

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"

	"k8s.io/utils/clock"

	"github.com/proxysim/proxysim/sim"
	"github.com/proxysim/proxysim/sim/proxy"
	"github.com/proxysim/proxysim/sim/runner"
)

// Mode is a proxy mode as the scenario format sees it: everything that
// differs between IPVS, iptables or nftables is behind it, so that the core
// of the format names none of them. A mode is a package that registers
// itself with RegisterMode.
type Mode interface {
	// Name is what proxy.mode says.
	Name() string
	// NewSettings returns the mode's own proxy settings, unset. Their
	// fields are decoded from the proxy mapping beside the core ones.
	NewSettings() Settings
	// Actions, Faults and Expectations are the mode's own parts of a step,
	// of a fault step and of an expect block. Each constructor returns a
	// fresh part: a pointer to a struct whose yaml-tagged fields are the
	// keys it owns (a field `Src Src` receives the enclosing mapping's
	// positions).
	Actions() []func() Action
	Faults() []func() Action
	Expectations() []func() Expectation
	// Fake builds the mode's in-memory dataplane for one replay, on the
	// world's clock.
	Fake(s *Scenario, clk clock.PassiveClock) (Dataplane, error)
}

// RunnerShaper is implemented by a mode whose proxier builds its runner
// otherwise than RunnerConfig's plain reading of the proxy fields (the
// IPVS proxier retries after syncPeriod from v1.34; the iptables proxier
// syncs in full hourly).
// ShapeRunner gets the derived config and returns the mode's; an explicit
// proxy.retryInterval still wins.
type RunnerShaper interface {
	ShapeRunner(p Proxy, cfg runner.Config) runner.Config
}

// Settings are a mode's own proxy fields. Validate reports their problems
// and fills their defaults.
type Settings interface {
	Validate(v *Validator)
}

// Dataplane is one replay's instance of a mode: the backend the proxy
// programs and what the mode's expectations read.
type Dataplane interface {
	// Name says which dataplane it is: "fake", "netns, kernel 6.1.0".
	Name() string
	// NewBackend is the world's Config.NewBackend: called at start and at
	// every restart, over the same dataplane.
	NewBackend(w *sim.World) (proxy.Backend, error)
	// Snapshot renders the dataplane's state for goldens (ipvsadm -Ln,
	// iptables-save, ...), the same state always the same text.
	Snapshot() (string, error)
	Close() error
}

// DataplaneFactory builds a fresh dataplane for one replay, on the world's
// clock. A mode's Fake is one; real-kernel bindings are others.
type DataplaneFactory func(s *Scenario, clk clock.PassiveClock) (Dataplane, error)

// Action is one kind of step action, or one part of a fault step, as the
// file holds it: Validate runs at load time. What it does at the step's
// instant is the replay's (scenarios/replay: a mode's or a controller's
// part implements replay.Action).
type Action interface {
	Validate(v *Validator)
}

// Expectation is one kind of expect entry, as the file holds it: Validate
// runs at load time. How it is checked is the replay's (a mode's or a
// controller's part implements replay.Expectation).
type Expectation interface {
	Validate(v *Validator)
}

// DataplaneBlind marks a step or expectation that neither reads nor
// writes the proxy's dataplane: not its rules, not the trace of what was
// written, not the metrics read from it. A cluster whose every step and
// expectation is blind runs its first node without a dataplane, as light
// as the other nodes (docs/cluster.md, "The first node"). A part without
// the mark is taken to look.
type DataplaneBlind interface{ DataplaneBlind() }

var registry struct {
	sync.RWMutex
	modes map[string]Mode
	def   string
}

// RegisterMode makes a mode available to proxy.mode. It panics when the name
// is taken or the mode claims a key the core or another part already has:
// both are programming errors.
func RegisterMode(m Mode) {
	registry.Lock()
	defer registry.Unlock()
	if registry.modes == nil {
		registry.modes = map[string]Mode{}
	}
	if _, ok := registry.modes[m.Name()]; ok {
		panic(fmt.Sprintf("scenarios: mode %q registered twice", m.Name()))
	}
	checkKeys(m.Name()+" settings", reflect.TypeOf(Proxy{}), []reflect.Type{reflect.TypeOf(m.NewSettings())})
	checkKeys(m.Name()+" actions", reflect.TypeOf(Step{}), partTypes(append(coreActions(), m.Actions()...)))
	checkKeys(m.Name()+" faults", reflect.TypeOf(Fault{}), partTypes(append(append([]func() Action(nil), plugins.faults...), m.Faults()...)))
	checkKeys(m.Name()+" expectations", reflect.TypeOf(Expect{}), partTypes(append(coreExpectations(), m.Expectations()...)))
	// The controllers registered so far (RegisterController checks
	// those that come later).
	checkKeys(m.Name()+" actions with controllers", reflect.TypeOf(Step{}), partTypes(append(append(coreActions(), m.Actions()...), controllerActions()...)))
	checkKeys(m.Name()+" faults with controllers", reflect.TypeOf(Fault{}), partTypes(append(m.Faults(), controllerFaults()...)))
	checkKeys(m.Name()+" expectations with controllers", reflect.TypeOf(Expect{}), partTypes(append(append(coreExpectations(), m.Expectations()...), controllerExpectations()...)))
	registry.modes[m.Name()] = m
}

// RegisterDefaultMode registers m and makes it the mode of a scenario that
// names none.
func RegisterDefaultMode(m Mode) {
	RegisterMode(m)
	registry.Lock()
	defer registry.Unlock()
	registry.def = m.Name()
}

// LookupMode returns a registered mode; "" names the default one.
func LookupMode(name string) (Mode, bool) {
	registry.RLock()
	defer registry.RUnlock()
	if name == "" {
		name = registry.def
	}
	m, ok := registry.modes[name]
	return m, ok
}

// ModeNames lists the registered modes, sorted.
func ModeNames() []string {
	registry.RLock()
	defer registry.RUnlock()
	out := make([]string, 0, len(registry.modes))
	for n := range registry.modes {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func partTypes[T any](ctors []func() T) []reflect.Type {
	out := make([]reflect.Type, len(ctors))
	for i, c := range ctors {
		out[i] = reflect.TypeOf(c())
	}
	return out
}

// checkKeys panics when two parts of one mapping claim the same key.
func checkKeys(what string, core reflect.Type, parts []reflect.Type) {
	seen := map[string]bool{}
	for _, k := range keysOf(core) {
		seen[k] = true
	}
	for _, t := range parts {
		for _, k := range keysOf(t) {
			if seen[k] {
				panic(fmt.Sprintf("scenarios: %s: key %q is claimed twice", what, k))
			}
			seen[k] = true
		}
	}
}

// PartKeys lists the yaml keys of part (an Action or an Expectation) that
// its mapping, src, set: what the part is called in the file.
func PartKeys(part any, src Src) []string {
	var out []string
	for _, k := range keysOf(reflect.TypeOf(part)) {
		if _, ok := src.Keys[k]; ok {
			out = append(out, k)
		}
	}
	return out
}

// keysOf lists the yaml keys of a struct type (or pointer to one).
func keysOf(t reflect.Type) []string {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var out []string
	for i := 0; i < t.NumField(); i++ {
		tag := strings.Split(t.Field(i).Tag.Get("yaml"), ",")[0]
		if tag != "" && tag != "-" {
			out = append(out, tag)
		}
	}
	return out
}
