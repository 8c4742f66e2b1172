package e2e

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/proxysim/proxysim/fakes"
	"github.com/proxysim/proxysim/netns"
	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/ipvsmode"
	"github.com/proxysim/proxysim/sim/ipvs"
	"github.com/proxysim/proxysim/sim/vclock"
)

// The privileged suite. Each behaviour is one check, run against the real
// kernel (a throwaway topology of network namespaces) when the process is
// root on a kernel with ip_vs, and always against the fake IPVS: the two must
// give the same outcome, which is also the outcome the check expects.

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

// traffic is what a check needs of a dataplane's connections.
type traffic interface {
	ipvs.Traffic
	Reset(name string) error
	Ping(name string, timeout time.Duration) error
}

// kut is a kernel under test: the fake or the real one.
type kut struct {
	name    string
	dp      ipvs.Dataplane
	traffic traffic
	// wait lets time pass: virtual for the fake, real for the kernel.
	wait func(time.Duration)
	// arp asks, from the client's segment, who has addr.
	arp     func(addr string) bool
	clk     *vclock.Clock
	cleanup func()
}

var backends = []string{"10.244.1.2", "10.244.2.2"}

const vip = "10.96.0.10"

func fakeKUT() *kut {
	clk := vclock.New(vclock.Epoch)
	dp, h, s, _ := fakes.Dataplane("6.1.0", clk)
	return &kut{
		name: "fake", dp: dp, traffic: h, clk: clk,
		wait: clk.Advance,
		// The model: with arp_ignore 0 a host answers for any local address on
		// any interface; with 1 only for addresses on the asking interface.
		arp: func(string) bool {
			v, _ := s.Get(ipvs.SysctlArpIgnore)
			return v == 0
		},
		cleanup: func() {},
	}
}

func realKUT() *kut {
	topo, err := netns.BuildTopology(len(backends))
	Expect(err).NotTo(HaveOccurred())
	dp, h, err := topo.Node.Dataplane()
	Expect(err).NotTo(HaveOccurred())
	topo.ConnectTimeout = 3 * time.Second
	return &kut{
		name: "kernel", dp: dp, traffic: topo, clk: vclock.New(vclock.Epoch),
		wait: time.Sleep,
		arp: func(addr string) bool {
			ok, err := topo.Client.ARPAnswered("eth0", netns.ClientIPs[0], addr, time.Second)
			Expect(err).NotTo(HaveOccurred())
			return ok
		},
		cleanup: func() { h.Close(); Expect(topo.Destroy()).To(Succeed()) },
	}
}

// service programs a virtual server with the backends and binds its address
// (with forwarding on, as the proxier's startup does).
func (k *kut) service(persistent bool) ipvs.VirtualServer {
	k.sysctl(ipvs.SysctlIPForward, 1)
	vs := ipvs.VirtualServer{Address: vip, Protocol: "TCP", Port: 80, Scheduler: "rr", Persistent: persistent, Timeout: 60}
	Expect(k.dp.IPVS.AddVirtualServer(vs)).To(Succeed())
	for _, b := range backends {
		Expect(k.dp.IPVS.AddRealServer(vs, ipvs.RealServer{Address: b, Port: netns.BackendPort, Weight: 1})).To(Succeed())
	}
	Expect(k.dp.Addresses.EnsureDevice(ipvs.DummyDevice)).To(Succeed())
	Expect(k.dp.Addresses.Bind(ipvs.DummyDevice, vip)).To(Succeed())
	return vs
}

func (k *kut) sysctl(name string, v int) { Expect(k.dp.Sysctl.Set(name, v)).To(Succeed()) }

// deleteRS deletes the real server at server ("ip:port") and checks it went.
func (k *kut) deleteRS(vs ipvs.VirtualServer, server string) {
	Expect(k.dp.IPVS.DeleteRealServer(vs, rs(host(server)))).To(Succeed())
	left, err := k.dp.IPVS.RealServers(vs)
	Expect(err).NotTo(HaveOccurred())
	for _, r := range left {
		Expect(r.Key()).NotTo(Equal(server), "real server still listed after delete")
	}
}

func (k *kut) connect(name, client string) ipvs.ConnectResult {
	return k.traffic.Connect(name, "TCP", client, vip+":80")
}

func rs(addr string) ipvs.RealServer {
	return ipvs.RealServer{Address: addr, Port: netns.BackendPort, Weight: 1}
}

func host(hostport string) string {
	if i := strings.LastIndex(hostport, ":"); i >= 0 {
		return hostport[:i]
	}
	return hostport
}

// outcome of a ping, in words both kernels share.
func pingOutcome(err error) string {
	switch {
	case err == nil:
		return "flows"
	case errors.Is(err, ipvs.ErrReset):
		return "reset"
	case errors.Is(err, ipvs.ErrTimeout):
		return "hangs"
	}
	return "error: " + err.Error()
}

// check is one behaviour, written once for both kernels.
type check struct {
	name string
	run  func(k *kut) string // the outcome, in words
	want string
}

var checks = []check{
	{
		name: "graceful termination: an established connection survives weight 0, new ones avoid it, and the server goes once its connections close",
		want: "old flows; new connection avoids it; draining while connected; deleted after close",
		run: func(k *kut) string {
			vs := k.service(false)
			first := k.connect("c1", "10.0.0.5:41000")
			Expect(first.Err).NotTo(HaveOccurred())
			gtm := ipvs.NewGracefulTerminationManager(k.dp.IPVS, k.clk, nil)
			defer gtm.Stop()
			Expect(gtm.Delete(vs, rs(host(first.Server)))).To(Succeed())
			var out []string
			out = append(out, "old "+pingOutcome(k.traffic.Ping("c1", 2*time.Second)))
			second := k.connect("c2", "10.0.0.6:41000")
			if second.Err == nil && second.Server != first.Server {
				out = append(out, "new connection avoids it")
			} else {
				out = append(out, fmt.Sprintf("new connection went to %s (%v)", second.Server, second.Err))
			}
			gtm.Check()
			state := "deleted while connected"
			if len(gtm.Pending()) == 1 {
				state = "draining while connected"
			}
			out = append(out, state)
			Expect(k.traffic.Reset("c1")).To(Succeed()) // CLOSE, gone 10s later
			k.wait(11 * time.Second)
			gtm.Check()
			if len(gtm.Pending()) == 0 {
				out = append(out, "deleted after close")
			} else {
				out = append(out, "still draining after close")
			}
			return strings.Join(out, "; ")
		},
	},
	{
		name: "a UDP real server is deleted at once, with its entry still live: UDP has no graceful termination",
		want: "answered by the real server; deleted at once",
		run: func(k *kut) string {
			k.sysctl(ipvs.SysctlIPForward, 1)
			vs := ipvs.VirtualServer{Address: "10.96.0.53", Protocol: "UDP", Port: 53, Scheduler: "rr"}
			Expect(k.dp.IPVS.AddVirtualServer(vs)).To(Succeed())
			udp := ipvs.RealServer{Address: backends[0], Port: netns.BackendPort, Weight: 1}
			Expect(k.dp.IPVS.AddRealServer(vs, udp)).To(Succeed())
			Expect(k.dp.Addresses.EnsureDevice(ipvs.DummyDevice)).To(Succeed())
			Expect(k.dp.Addresses.Bind(ipvs.DummyDevice, vs.Address)).To(Succeed())
			r := k.traffic.Connect("u1", "UDP", "10.0.0.5:46000", "10.96.0.53:53")
			Expect(r.Err).NotTo(HaveOccurred())
			out := "answered by " + which(r.Server, udp.Key())
			if r.Server == udp.Key() {
				out = "answered by the real server"
			}
			gtm := ipvs.NewGracefulTerminationManager(k.dp.IPVS, k.clk, nil)
			defer gtm.Stop()
			Expect(gtm.Delete(vs, udp)).To(Succeed())
			left, err := k.dp.IPVS.RealServers(vs)
			Expect(err).NotTo(HaveOccurred())
			if len(left) == 0 && len(gtm.Pending()) == 0 {
				return out + "; deleted at once"
			}
			return out + "; kept draining"
		},
	},
	{
		name: "expire_nodest_conn 1: a connection whose real server was deleted is reset",
		want: "reset",
		run: func(k *kut) string {
			k.sysctl(ipvs.SysctlExpireNodestConn, 1)
			vs := k.service(false)
			c := k.connect("c1", "10.0.0.5:42000")
			Expect(c.Err).NotTo(HaveOccurred())
			k.deleteRS(vs, c.Server)
			return pingOutcome(k.traffic.Ping("c1", 3*time.Second))
		},
	},
	{
		name: "expire_nodest_conn 0: a connection whose real server was deleted hangs",
		want: "hangs",
		run: func(k *kut) string {
			k.sysctl(ipvs.SysctlExpireNodestConn, 0)
			vs := k.service(false)
			c := k.connect("c1", "10.0.0.5:43000")
			Expect(c.Err).NotTo(HaveOccurred())
			k.deleteRS(vs, c.Server)
			return pingOutcome(k.traffic.Ping("c1", 3*time.Second))
		},
	},
	{
		name: "conn_reuse_mode 1 (kernel 5.9+): a reused source port after the server closed is scheduled afresh, at once",
		want: "another server, fast",
		run:  func(k *kut) string { return reuse(k, 1) },
	},
	{
		name: "conn_reuse_mode 0: a reused source port sticks to the old, quiescent server (kubernetes #81775)",
		want: "the quiescent server, fast",
		run:  func(k *kut) string { return reuse(k, 0) },
	},
	{
		name: "ClientIP persistence with expire_quiescent_template 1: a quiescent server's template is dropped",
		want: "same server twice; then another server",
		run:  func(k *kut) string { return persistence(k, 1) },
	},
	{
		name: "ClientIP persistence with expire_quiescent_template 0: the template keeps the client on the quiescent server",
		want: "same server twice; then the quiescent server",
		run:  func(k *kut) string { return persistence(k, 0) },
	},
	{
		name: "strict ARP: a kube-ipvs0 address is answered with arp_ignore/arp_announce 0/0, not with 1/2",
		want: "0/0 answered; 1/2 silent",
		run: func(k *kut) string {
			k.service(false)
			out := []string{}
			for _, v := range [][2]int{{0, 0}, {1, 2}} {
				k.sysctl(ipvs.SysctlArpIgnore, v[0])
				k.sysctl(ipvs.SysctlArpAnnounce, v[1])
				word := "silent"
				if k.arp(vip) {
					word = "answered"
				}
				out = append(out, fmt.Sprintf("%d/%d %s", v[0], v[1], word))
			}
			return strings.Join(out, "; ")
		},
	},
}

// reuse: the server closes first (the IPVS entry sits in TIME_WAIT), the
// old server goes quiescent, and the client connects again from the same
// source port.
func reuse(k *kut, mode int) string {
	k.sysctl(ipvs.SysctlConntrack, 1)
	k.sysctl(ipvs.SysctlConnReuseMode, mode)
	vs := k.service(false)
	first := k.connect("c1", "10.0.0.5:44000")
	Expect(first.Err).NotTo(HaveOccurred())
	Expect(k.traffic.Close("c1")).To(Succeed())
	k.wait(200 * time.Millisecond)
	q := rs(host(first.Server))
	q.Weight = 0
	Expect(k.dp.IPVS.UpdateRealServer(vs, q)).To(Succeed())
	second := k.connect("c2", "10.0.0.5:44000")
	Expect(second.Err).NotTo(HaveOccurred())
	speed := "fast"
	if second.Latency > 500*time.Millisecond {
		speed = fmt.Sprintf("slow (%v)", second.Latency.Round(100*time.Millisecond))
	}
	return which(second.Server, first.Server) + ", " + speed
}

// which names a server relative to the quiescent one.
func which(server, quiescent string) string {
	switch server {
	case quiescent:
		return "the quiescent server"
	case "":
		return "no server"
	}
	return "another server"
}

func persistence(k *kut, eqt int) string {
	k.sysctl(ipvs.SysctlExpireQuiescentTemplate, eqt)
	vs := k.service(true)
	a := k.connect("p1", "10.0.0.7:45000")
	b := k.connect("p2", "10.0.0.7:45001")
	Expect(a.Err).NotTo(HaveOccurred())
	Expect(b.Err).NotTo(HaveOccurred())
	out := "different servers"
	if a.Server == b.Server {
		out = "same server twice"
	}
	q := rs(host(a.Server))
	q.Weight = 0
	Expect(k.dp.IPVS.UpdateRealServer(vs, q)).To(Succeed())
	c := k.connect("p3", "10.0.0.7:45002")
	Expect(c.Err).NotTo(HaveOccurred())
	return out + "; then " + which(c.Server, a.Server)
}

var _ = Describe("IPVS behaviour, fake and kernel", Label("kernel"), func() {
	for _, c := range checks {
		It(c.name, func() {
			fake := fakeKUT()
			defer fake.cleanup()
			Expect(c.run(fake)).To(Equal(c.want), "the fake IPVS")
			if ok, why := kernelAvailable(); !ok {
				Skip("fake agrees with the expected outcome; kernel half skipped (" + why + "): " + howToRun)
			}
			k := realKUT()
			defer k.cleanup()
			Expect(c.run(k)).To(Equal(c.want), "the kernel")
		})
	}
})

var _ = Describe("the engine on the real kernel", Label("kernel"), func() {
	BeforeEach(func() {
		if ok, why := kernelAvailable(); !ok {
			Skip(why + ": " + howToRun)
		}
	})

	It("reports the kernel it runs on", func() {
		v, err := netns.KernelVersion()
		Expect(err).NotTo(HaveOccurred())
		GinkgoWriter.Printf("kernel: %s\n", v)
		fmt.Printf("PROXYSIM kernel under test: %s\n", v)
	})

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
	for _, name := range scenarios.LibraryNames() {
		It("programs the kernel as the fake for "+name, func() {
			s, err := scenarios.LoadLibrary(name)
			Expect(err).NotTo(HaveOccurred())
			if !ipvsmode.HasGolden(s) || ipvsmode.HasTraffic(s) {
				Skip("no IPVS golden, or client connections (fake dataplane only)")
			}
			res, err := scenarios.Replay(s, scenarios.Options{Dataplane: netnsDataplane})
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
		Expect(len(leftovers())).To(BeNumerically(">=", 4), "client, node and two backends outlive a SIGKILL")
		removed, err := netns.Sweep()
		Expect(err).NotTo(HaveOccurred())
		Expect(removed).NotTo(BeEmpty())
		Expect(leftovers()).To(BeEmpty())
	})

	It("leave nothing behind, and the sweeper removes what a killed run left", func() {
		topo, err := netns.BuildTopology(2)
		Expect(err).NotTo(HaveOccurred())
		Expect(topo.Destroy()).To(Succeed())
		Expect(leftovers()).To(BeEmpty())
		// a run killed before its cleanup leaves its namespaces...
		for _, role := range []string{"node", "client"} {
			_, err := netns.Create(role)
			Expect(err).NotTo(HaveOccurred())
		}
		Expect(leftovers()).To(HaveLen(2))
		// ...which the next run sweeps away
		removed, err := netns.Sweep()
		Expect(err).NotTo(HaveOccurred())
		Expect(removed).To(HaveLen(2))
		Expect(leftovers()).To(BeEmpty())
	})
})

func leftovers() []string {
	entries, _ := os.ReadDir("/var/run/netns")
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), netns.Prefix) {
			out = append(out, e.Name())
		}
	}
	return out
}
