package replay_test

// The IPVS and iptables modes register themselves when imported; importing them from this
// external test file registers them for every test of the package, the
// internal ones included (they share one test binary).
import (
	_ "github.com/proxysim/proxysim/scenarios/controllers"
	_ "github.com/proxysim/proxysim/scenarios/iptablesmode" // the library's churn-iptables
	_ "github.com/proxysim/proxysim/scenarios/ipvsmode"
	_ "github.com/proxysim/proxysim/scenarios/nftablesmode" // the library's nftables scenarios
)
