package e2e

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/proxysim/proxysim/fakes"
	"github.com/proxysim/proxysim/netns"
	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/ipvsmode"
	"github.com/proxysim/proxysim/scenarios/replay"
	"github.com/proxysim/proxysim/sim/ipvs"
	"github.com/proxysim/proxysim/sim/vclock"
)

// The privileged suite. Its IPVS behaviours are scenarios
// (scenarios/library/kernel-suite, replayed by kernel_scenarios_test.go on
// the fake and on the real kernel). What stays here is what a scenario
// cannot say: which kernel runs, that a namespace beside the node's keeps
// its defaults and the host its own, and that killed runs leave nothing
// behind.

const howToRun = "needs root and a kernel with ip_vs: run `make e2e-vm` (boots Debian's kernel in QEMU) or `make e2e-netns` (on a host with ip_vs)"

// kernelAvailable reports whether the real-kernel half can run here.
func kernelAvailable() (bool, string) {
	if !netns.Privileged() {
		return false, "not root"
	}
	if _, err := os.Stat("/proc/net/ip_vs"); err != nil {
		return false, "no ip_vs in this kernel"
	}
	return true, ""
}

var _ = Describe("the engine on the real kernel", Label("kernel"), func() {
	BeforeEach(func() {
		if ok, why := kernelAvailable(); !ok {
			Skip(why + ": " + howToRun)
		}
		startKernelReplays()
	})

	It("reports the kernel it runs on", func() {
		v, err := netns.KernelVersion()
		Expect(err).NotTo(HaveOccurred())
		GinkgoWriter.Printf("kernel: %s\n", v)
		fmt.Printf("PROXYSIM kernel under test: %s\n", v)
	})

	// The values themselves are kernel-suite/timeouts-and-startup-sysctls.
	It("sets the startup sysctls in its own namespace and nowhere else", func() {
		hostBefore, _ := os.ReadFile("/proc/sys/net/ipv4/conf/all/arp_ignore")
		node, err := netns.NewNode()
		Expect(err).NotTo(HaveOccurred())
		defer node.Close()
		other, err := netns.Create("other")
		Expect(err).NotTo(HaveOccurred())
		defer other.Close()
		_, err = ipvs.New(ipvs.Config{StrictARP: true}, node.Dataplane, vclock.New(vclock.Epoch), nil)
		Expect(err).NotTo(HaveOccurred())
		kv, _ := ipvs.ParseKernelVersion(node.Dataplane.KernelVersion)
		want, _ := ipvs.StartupSysctls(kv, true)
		for _, s := range want {
			v, err := node.Dataplane.Sysctl.Get(s.Name)
			Expect(err).NotTo(HaveOccurred())
			Expect(v).To(Equal(s.Value), s.Name)
		}
		defaults := fakes.DefaultSysctls()
		for name, v := range defaults {
			got, err := other.Sysctl().Get(name)
			Expect(err).NotTo(HaveOccurred())
			Expect(got).To(Equal(v), "a fresh namespace keeps the default of %s", name)
		}
		hostAfter, _ := os.ReadFile("/proc/sys/net/ipv4/conf/all/arp_ignore")
		Expect(hostAfter).To(Equal(hostBefore), "the host's own arp_ignore is untouched")
	})

	// Scenarios whose stories have client connections run in virtual time
	// only (TIME_WAIT lasts two real minutes); the checks above cover what
	// those connections show.
	for _, name := range scenarios.TestedLibraryNames() {
		It("programs the kernel as the fake for "+name, func() {
			s, err := scenarios.LoadLibrary(name)
			Expect(err).NotTo(HaveOccurred())
			if !ipvsmode.HasGolden(s) || ipvsmode.HasTraffic(s) {
				Skip("no IPVS golden, or client connections (fake dataplane only)")
			}
			res, err := replay.Replay(s, replay.Options{Dataplane: netnsDataplane})
			Expect(err).NotTo(HaveOccurred())
			Expect(res.Failures).To(BeEmpty(), describe(res))
		})
	}
})

// netnsDataplane replays an IPVS scenario on this kernel, in a fresh node
// namespace; the wiring lives with the suites, as netns knows no scenarios.
var netnsDataplane = ipvsmode.OnKernel(netns.OpenDataplane)

// TestLeakHelper is not a test: run by the sweeper spec as a child process,
// it builds a topology and waits to be killed, as a run killed mid-way would.
func TestLeakHelper(t *testing.T) {
	if os.Getenv("PROXYSIM_LEAK_HELPER") != "1" {
		t.Skip("a helper for the sweeper spec")
	}
	if _, err := netns.BuildTopology(2); err != nil {
		t.Fatal(err)
	}
	fmt.Println("READY")
	select {}
}

var _ = Describe("throwaway namespaces", Label("kernel"), func() {
	BeforeEach(func() {
		if !netns.Privileged() {
			Skip("not root: " + howToRun)
		}
		// the sweeper removes this process's namespaces too
		waitForBackground()
	})

	It("survive a killed run only until the next one sweeps them", func() {
		cmd := exec.Command(os.Args[0], "-test.run=^TestLeakHelper$")
		cmd.Env = append(os.Environ(), "PROXYSIM_LEAK_HELPER=1")
		out, err := cmd.StdoutPipe()
		Expect(err).NotTo(HaveOccurred())
		Expect(cmd.Start()).To(Succeed())
		line, _ := bufio.NewReader(out).ReadString('\n')
		Expect(line).To(ContainSubstring("READY"))
		Expect(cmd.Process.Signal(syscall.SIGKILL)).To(Succeed())
		cmd.Wait()
		// Other test processes (go test runs packages side by side) may
		// hold namespaces of their own: count only the killed child's.
		child := cmd.Process.Pid
		Expect(len(namespacesOf(child))).To(BeNumerically(">=", 4), "client, node and two backends outlive a SIGKILL")
		removed, err := netns.Sweep()
		Expect(err).NotTo(HaveOccurred())
		Expect(removed).NotTo(BeEmpty())
		Expect(namespacesOf(child)).To(BeEmpty())
	})

	It("leave nothing behind, and the sweeper removes what a killed run left", func() {
		topo, err := netns.BuildTopology(2)
		Expect(err).NotTo(HaveOccurred())
		Expect(topo.Destroy()).To(Succeed())
		self := os.Getpid()
		Expect(namespacesOf(self)).To(BeEmpty())
		// a run killed before its cleanup leaves its namespaces...
		for _, role := range []string{"node", "client"} {
			_, err := netns.Create(role)
			Expect(err).NotTo(HaveOccurred())
		}
		own := namespacesOf(self)
		Expect(own).To(HaveLen(2))
		// ...which the next run sweeps away
		removed, err := netns.Sweep()
		Expect(err).NotTo(HaveOccurred())
		Expect(removed).To(ContainElements(own), "the run's own two, and any other dead run's")
		Expect(namespacesOf(self)).To(BeEmpty())
	})
})
