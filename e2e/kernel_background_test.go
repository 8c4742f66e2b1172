package e2e

import (
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/replay"
)

// The kernel suite's replays run side by side. On a kernel a scenario with
// client connections keeps pace with real time, and most of a kernel-suite
// replay is waiting: for a TIME_WAIT, a timeout, or, in
// kernel-suite/graceful-termination, a real minute (kube-proxy's IPVS
// proxier looks at draining real servers once a minute). So the first
// kernel spec to run starts every kernel-suite scenario's kernel replay in
// the background, each in namespaces of its own, kernelParallel at a time
// and the longest first, and each scenario's spec collects its result when
// its turn comes. A disagreement with the fake is replayed once more on its
// own (kernel_scenarios_test.go), so a real-time bound missed because of the
// company cannot fail the suite. Specs that sweep this process's
// namespaces wait for the background to finish first.

// kernelParallel is how many kernel replays run at once.
const kernelParallel = 4

type kernelRun struct {
	done chan struct{}
	res  *replay.Result
	err  error
}

var background struct {
	once sync.Once
	wg   sync.WaitGroup
	runs map[string]*kernelRun
}

// lastInstant is the instant of a scenario's last step: roughly the real
// time its kernel replay waits.
func lastInstant(s *scenarios.Scenario) time.Duration {
	var last time.Duration
	for _, st := range s.Timeline {
		if st.At != nil && st.At.D() > last {
			last = st.At.D()
		}
	}
	return last
}

// startKernelReplays starts, once, the kernel replays of every kernel-suite
// scenario, when the kernel half can run here.
func startKernelReplays() {
	background.once.Do(func() {
		if ok, _ := kernelAvailable(); !ok {
			return
		}
		type job struct {
			name string
			s    *scenarios.Scenario
		}
		var jobs []job
		for _, name := range scenarios.LibraryNames() {
			if !strings.HasPrefix(name, kernelSuite) {
				continue
			}
			s, err := scenarios.LoadLibrary(name)
			if err != nil {
				continue // its spec reports the error
			}
			jobs = append(jobs, job{name, s})
		}
		sort.SliceStable(jobs, func(i, j int) bool { return lastInstant(jobs[i].s) > lastInstant(jobs[j].s) })
		background.runs = map[string]*kernelRun{}
		slots := make(chan struct{}, kernelParallel)
		for _, j := range jobs {
			r := &kernelRun{done: make(chan struct{})}
			background.runs[j.name] = r
			background.wg.Add(1)
			go func() {
				defer background.wg.Done()
				defer close(r.done)
				slots <- struct{}{}
				defer func() { <-slots }()
				r.res, r.err = replay.Replay(j.s, replay.Options{Dataplane: kernelDataplane})
			}()
		}
	})
}

// kernelReplay is the first kernel replay of a kernel-suite scenario: the
// one started in the background if there is one, else one made now.
func kernelReplay(name string, s *scenarios.Scenario) (*replay.Result, error) {
	if r := background.runs[name]; r != nil {
		<-r.done
		return r.res, r.err
	}
	return replay.Replay(s, replay.Options{Dataplane: kernelDataplane})
}

// waitForBackground waits until no background replay holds namespaces.
func waitForBackground() { background.wg.Wait() }
