package runner

import (
	"testing"
	"time"

	"k8s.io/utils/clock"
)

// The production driver: Loop on the real clock runs fn on its own goroutine.
// No assertion here depends on how long anything takes.
func TestLoopRunsOnRealClock(t *testing.T) {
	for _, gen := range []Generation{Burst, Cooldown} {
		ran := make(chan struct{}, 10)
		r, err := New(Config{Generation: gen, MinInterval: 0, MaxInterval: time.Hour}, clock.RealClock{}, func() error {
			ran <- struct{}{}
			return nil
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() { r.Loop(stop); close(done) }()
		for !r.Started() {
			// the cooldown generation drops requests made before Loop starts
			<-time.After(time.Millisecond)
		}
		r.Run()
		select {
		case <-ran:
		case <-time.After(30 * time.Second):
			t.Fatalf("%v: Loop never ran fn", gen)
		}
		close(stop)
		<-done
	}
}
