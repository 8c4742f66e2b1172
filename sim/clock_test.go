package sim_test

import (
	"testing"
	"time"

	"github.com/proxysim/proxysim/sim"
	"github.com/proxysim/proxysim/sim/vclock"
)

// A world given its clock runs on it (what the backend was built over reads
// the world's time), and refuses one that does not read its start.
func TestWorldRunsOnTheClockItIsGiven(t *testing.T) {
	clk := vclock.New(vclock.Epoch)
	w := sim.New(t, sim.Config{Clock: clk})
	if w.Clock != clk {
		t.Fatal("the world made its own clock")
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	w.RunUntil(time.Minute)
	if got := clk.Since(vclock.Epoch); got != time.Minute {
		t.Fatalf("the given clock reads %v after a virtual minute", got)
	}
	if _, err := sim.NewWorld(sim.Config{Clock: clk, Start: vclock.Epoch}); err == nil {
		t.Fatal("a clock a minute past the world's start was accepted")
	}
}
