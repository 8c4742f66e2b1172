package scenarios_test

// The IPVS mode registers itself when imported; importing it from this
// external test file registers it for every test of the package, the
// internal ones included (they share one test binary).
import (
	_ "github.com/proxysim/proxysim/scenarios/controllers"
	_ "github.com/proxysim/proxysim/scenarios/ipvsmode"
)
