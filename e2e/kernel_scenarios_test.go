package e2e

import (
	"fmt"
	"sort"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/proxysim/proxysim/netns"
	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/ipvsmode"
	"github.com/proxysim/proxysim/scenarios/replay"
	"github.com/proxysim/proxysim/sim/ipvs"
)

// The kernel suite as scenarios: every library scenario under
// kernel-suite/ is one IPVS behaviour, written once as a file. It replays
// on the fake, where it must pass, and on this kernel (a client, a node and
// two backends in throwaway namespaces), where it must give the same
// result: the same failures, none.

const kernelSuite = "kernel-suite/"

// kernelDataplane replays on this kernel, with a client topology for the
// scenarios that talk to the node as a client.
var kernelDataplane = ipvsmode.OnKernelWithClient(netns.OpenDataplane, func() (ipvs.Dataplane, ipvsmode.Client, func() error, error) {
	dp, topo, closeFn, err := netns.OpenTopology()
	if err != nil {
		return dp, nil, nil, err
	}
	return dp, topo, closeFn, nil
})

// outcome is a replay's failures in words both dataplanes share.
func outcome(res *replay.Result) string {
	var out []string
	for _, f := range res.Failures {
		out = append(out, f.Pos.Path)
	}
	sort.Strings(out)
	if len(out) == 0 {
		return "passed"
	}
	return "failed: " + strings.Join(out, ", ")
}

var _ = Describe("the kernel suite as scenarios", Label("kernel"), func() {
	var names []string
	for _, n := range scenarios.LibraryNames() {
		if strings.HasPrefix(n, kernelSuite) {
			names = append(names, n)
		}
	}

	BeforeEach(startKernelReplays)

	It("holds the kernel suite's behaviours", func() {
		Expect(len(names)).To(BeNumerically(">=", 10))
	})

	for _, name := range names {
		It("replays "+name+" on the fake and on the kernel with the same result", func() {
			s, err := scenarios.LoadLibrary(name)
			Expect(err).NotTo(HaveOccurred())
			fake, err := replay.Replay(s, replay.Options{})
			Expect(err).NotTo(HaveOccurred())
			Expect(fake.Failures).To(BeEmpty(), describe(fake))
			if ok, why := kernelAvailable(); !ok {
				Skip("passes on the fake; kernel half skipped (" + why + "): " + howToRun)
			}
			kernel, err := kernelReplay(name, s)
			if err != nil {
				// A step that needs what an earlier step failed to make (a
				// connection whose connect timed out on a loaded host, seen
				// once on 5.10 beside five other builds) ends the replay
				// with an error rather than a failure: replayed once more,
				// like a disagreement.
				report("kernel %s: the first replay ended in an error, replaying once more: %v", name, err)
				kernel, err = replay.Replay(s, replay.Options{Dataplane: kernelDataplane})
				Expect(err).NotTo(HaveOccurred())
			}
			GinkgoWriter.Printf("%s on %s: %v of real time\n", name, kernel.Env, kernel.Wall)
			if outcome(kernel) != outcome(fake) {
				// A kernel under QEMU's software emulation, on a host busy
				// compiling, can miss a real-time bound the scenario sets
				// (seen once in CI: a connect that took a SYN retransmission,
				// 1.13 s against at most 500 ms, on a kernel that passes it
				// otherwise). So a disagreement is replayed once in fresh
				// namespaces and the second replay decides; the first is
				// printed, never hidden. A real disagreement fails both.
				report("kernel %s: the first replay disagreed with the fake, replaying once more:\n%s", name, describe(kernel))
				kernel, err = replay.Replay(s, replay.Options{Dataplane: kernelDataplane})
				Expect(err).NotTo(HaveOccurred())
				GinkgoWriter.Printf("%s on %s, second replay: %v of real time\n", name, kernel.Env, kernel.Wall)
			}
			Expect(outcome(kernel)).To(Equal(outcome(fake)), describe(kernel))

			// The fake told this kernel's own version (its release and the
			// upstream version Debian reports) must predict it too: the
			// version rules (fakes/kernelfix.go) meet each kernel of the
			// matrix, not only the version the scenario names.
			here, version, err := fakeAsThisKernel(name)
			Expect(err).NotTo(HaveOccurred())
			Expect(outcome(here)).To(Equal(outcome(kernel)), "the fake as kernel %s:\n%s", version, describe(here))
		})
	}
})

// fakeAsThisKernel replays a kernel-suite scenario on the fake with
// proxy.kernel set to the running kernel's version.
func fakeAsThisKernel(name string) (*replay.Result, string, error) {
	version, err := netns.KernelVersion()
	if err != nil {
		return nil, "", err
	}
	s, err := scenarios.LoadLibrary(name)
	if err != nil {
		return nil, version, err
	}
	set, ok := ipvsmode.SettingsOf(s)
	if !ok {
		return nil, version, fmt.Errorf("%s is not an IPVS scenario", name)
	}
	set.Kernel = version
	res, err := replay.Replay(s, replay.Options{})
	return res, version, err
}
