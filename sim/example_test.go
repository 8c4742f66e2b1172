package sim_test

import (
	"fmt"
	"time"

	"github.com/proxysim/proxysim/fakes"
	"github.com/proxysim/proxysim/sim"
	"github.com/proxysim/proxysim/sim/ipvs"
	"github.com/proxysim/proxysim/sim/runner"
	"github.com/proxysim/proxysim/sim/vclock"
)

// A world in Go, without a scenario file: the IPVS proxier on the fake
// kernel, kube-proxy v1.34's cooldown runner, one Service whose slice goes
// away at 5s. In a test, sim.New(t, cfg) does the same and closes the world
// when the test ends.
func ExampleNewWorld() {
	clk := vclock.New(vclock.Epoch)              // the clock first: the fake IPVS runs on it
	dp, _, _, _ := fakes.Dataplane("6.1.0", clk) // IPVS, sysctls, kube-ipvs0 for kernel 6.1
	w, err := sim.NewWorld(sim.Config{
		Runner:     runner.Config{Generation: runner.Cooldown, MinInterval: time.Second, MaxInterval: 30 * time.Second},
		Clock:      clk,
		NewBackend: ipvs.Backend(ipvs.Config{}, dp),
	})
	if err != nil {
		panic(err)
	}
	defer w.Close()
	w.Create(fakes.Service("default", "web", "10.96.0.10", 80))
	w.Create(fakes.EndpointSlice("default", "web-abc", "web", 8080, "10.244.1.2"))
	if err := w.Start(); err != nil { // informers sync, then one direct sync
		panic(err)
	}
	w.At(5*time.Second, func() { w.Delete("EndpointSlice", "default", "web-abc") })
	w.RunUntil(time.Minute) // a virtual minute, in microseconds
	for _, s := range w.Syncs() {
		fmt.Printf("sync %d at %v (%s)\n", s.N, s.Start, s.Why)
	}
	// Output:
	// sync 1 at 0s (initial)
	// sync 2 at 5s (request)
	// sync 3 at 35s (periodic)
}
