package e2e

import (
	"sync"

	"github.com/proxysim/proxysim/scenarios"
)

// The kernel suite's long stories run beside the rest. On a kernel a
// scenario with client connections keeps pace with real time, and
// kernel-suite/graceful-termination waits a real minute (kube-proxy's IPVS
// proxier looks at draining real servers once a minute), longer than every
// other kernel spec together spends waiting. So the first kernel spec to run
// starts the long stories' kernel replays in the background, in namespaces
// of their own, and their specs collect the result when their turn comes.
// Specs that sweep this process's namespaces wait for them first.

// longKernelStories are started early; each is a kernel-suite scenario
// whose kernel replay lasts more than a few seconds of real time.
var longKernelStories = []string{kernelSuite + "graceful-termination"}

type kernelRun struct {
	done chan struct{}
	res  *scenarios.Result
	err  error
}

var background struct {
	once sync.Once
	wg   sync.WaitGroup
	runs map[string]*kernelRun
}

// startLongKernelStories starts, once, the kernel replays of the long
// stories, when the kernel half can run here.
func startLongKernelStories() {
	background.once.Do(func() {
		if ok, _ := kernelAvailable(); !ok {
			return
		}
		background.runs = map[string]*kernelRun{}
		for _, name := range longKernelStories {
			s, err := scenarios.LoadLibrary(name)
			if err != nil {
				continue // its spec reports the error
			}
			r := &kernelRun{done: make(chan struct{})}
			background.runs[name] = r
			background.wg.Add(1)
			go func() {
				defer background.wg.Done()
				defer close(r.done)
				r.res, r.err = scenarios.Replay(s, scenarios.Options{Dataplane: kernelDataplane})
			}()
		}
	})
}

// kernelReplay is the first kernel replay of a kernel-suite scenario: the
// one started in the background if there is one, else one made now.
func kernelReplay(name string, s *scenarios.Scenario) (*scenarios.Result, error) {
	if r := background.runs[name]; r != nil {
		<-r.done
		return r.res, r.err
	}
	return scenarios.Replay(s, scenarios.Options{Dataplane: kernelDataplane})
}

// waitForBackground waits until no background replay holds namespaces.
func waitForBackground() { background.wg.Wait() }
