package scenarios

import (
	"fmt"
	"reflect"
	"sync"

	"go.yaml.in/yaml/v3"

	"github.com/proxysim/proxysim/sim"
)

// Controller is a controller a scenario can run in front of the proxy
// (the EndpointSlice controller, say), under its own key of the top-level
// controllers mapping. A controller package registers one with
// RegisterController; the core names none.
type Controller interface {
	// Validate checks the controller's settings and fills their defaults.
	Validate(v *Validator)
	// Attach builds the controller and subscribes it to the world, before
	// the world starts.
	Attach(w *sim.World) error
}

// Controllers is the top-level controllers mapping: one part per
// controller key it sets.
type Controllers struct {
	Src   Src
	Parts []Controller
}

var controllerKinds struct {
	sync.RWMutex
	ctors []func() Controller
}

// RegisterController makes a controller available under the key its
// part's yaml-tagged field claims. It panics when the key is taken.
func RegisterController(ctor func() Controller) {
	controllerKinds.Lock()
	defer controllerKinds.Unlock()
	checkKeys("controllers", reflect.TypeOf(Controllers{}), partTypes(append(controllerKinds.ctors, ctor)))
	controllerKinds.ctors = append(controllerKinds.ctors, ctor)
}

func registeredControllers() []func() Controller {
	controllerKinds.RLock()
	defer controllerKinds.RUnlock()
	return append([]func() Controller(nil), controllerKinds.ctors...)
}

func (c *Controllers) decodeParts(d *decoder, n *yaml.Node, path string) {
	c.Parts = append(c.Parts, decodeInto(d, n, path, c, registeredControllers())...)
}

// attachControllers subscribes the scenario's controllers, in the order
// they registered.
func attachControllers(s *Scenario, w *sim.World) error {
	for _, c := range s.Controllers.Parts {
		if err := c.Attach(w); err != nil {
			return fmt.Errorf("%s: controllers: %w", s.File, err)
		}
	}
	return nil
}
