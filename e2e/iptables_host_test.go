package e2e

import (
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/proxysim/proxysim/netns"
	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/iptablesmode"
	"github.com/proxysim/proxysim/scenarios/replay"
	"github.com/proxysim/proxysim/sim/iptables"
)

// The host-kernel suite: proxysim's iptables mode programs this host's own
// kernel, inside throwaway network namespaces, through the real
// iptables-restore of either backend, and real TCP connections check what
// the rules do. It needs root and the iptables tools; without them it
// skips, unless PROXYSIM_HOST_KERNEL_REQUIRED=1 (make e2e-host), where it
// fails.

const hostKernelHowTo = "run `make e2e-host` as root (it installs iptables with netns/hostdeps.sh)"

// requireHostKernel skips (or, when required, fails) a spec that cannot
// run here.
func requireHostKernel(b netns.IPTablesBackend) {
	why := ""
	if !netns.Privileged() {
		why = "not root"
	} else if _, err := netns.LookIPTables(b); err != nil {
		why = err.Error()
	}
	hostKernelGate(why, hostKernelHowTo)
}

// hostKernelGate lets a host-kernel spec run when nothing is missing (why
// is empty), fails it when it cannot run but must
// (PROXYSIM_HOST_KERNEL_REQUIRED=1, make e2e-host), and skips it
// otherwise, or when PROXYSIM_HOST_KERNEL=later says a later step of the
// same run replays the host-kernel specs (.ci/run's `make test`, followed
// by `make e2e-host`: they run once, not twice).
func hostKernelGate(why, howTo string) {
	required := os.Getenv("PROXYSIM_HOST_KERNEL_REQUIRED") == "1"
	switch {
	case why != "" && required:
		Fail("PROXYSIM_HOST_KERNEL_REQUIRED=1, but " + why)
	case why != "":
		Skip(why + ": " + howTo)
	case !required && os.Getenv("PROXYSIM_HOST_KERNEL") == "later":
		Skip("PROXYSIM_HOST_KERNEL=later: a later step runs the host-kernel specs (make e2e-host)")
	}
}

const (
	hostNodeIP = "192.168.0.2"
	webVIP     = "10.96.0.10"
	podClient  = "10.244.9.9"
	// spreadConnections is N of the distribution check: enough that the
	// chi-square test catches a skew of two points (52/48 over two
	// endpoints expects a statistic of 16, against a bound of 10.8), few
	// enough that a run takes seconds (16 connections in flight).
	spreadConnections = 10000
)

func endpointIPs(n int) []string {
	out := make([]string, n)
	for k := range out {
		out[k] = fmt.Sprintf("10.244.%d.2", k+1)
	}
	return out
}

func hostPort(ip string) string { return net.JoinHostPort(ip, "8080") }

// webSlice is the EndpointSlice of service default/web: the endpoints on
// node-b, except local (if any) on this node, node-a.
func webSlice(indent string, eps []string, local string) string {
	var b strings.Builder
	b.WriteString(indent + "apiVersion: discovery.k8s.io/v1\n")
	b.WriteString(indent + "kind: EndpointSlice\n")
	b.WriteString(indent + "metadata: {name: web-abc, namespace: default, labels: {kubernetes.io/service-name: web}}\n")
	b.WriteString(indent + "addressType: IPv4\n")
	b.WriteString(indent + "ports: [{name: http, port: 8080, protocol: TCP}]\n")
	b.WriteString(indent + "endpoints:\n")
	for _, ep := range eps {
		node := "node-b"
		if ep == local {
			node = "node-a"
		}
		fmt.Fprintf(&b, "%s  - {addresses: [%s], nodeName: %s}\n", indent, ep, node)
	}
	return b.String()
}

// webScenario is a scenario with one ClusterIP service (serviceSpec adds
// lines to its spec) and its slice; timeline defaults to one sync check.
func webScenario(name, serviceSpec string, eps []string, local, timeline string) string {
	if timeline == "" {
		timeline = "  - at: 1s\n    expect: {syncs: {at: [0s]}}\n"
	}
	return fmt.Sprintf(`name: %s
description: a scenario the host-kernel suite generates
proxy: {mode: iptables, version: v1.36.0, minSyncPeriod: 1s, syncPeriod: 30s, nodeName: node-a, nodeIPs: [%s], clusterCIDR: 10.244.0.0/16}
objects:
  - apiVersion: v1
    kind: Service
    metadata: {name: web, namespace: default}
    spec:
      clusterIP: %s
      ports: [{name: http, port: 80, targetPort: 8080, protocol: TCP}]
%s  - %s
timeline:
%s`, name, hostNodeIP, webVIP, serviceSpec, strings.TrimPrefix(webSlice("    ", eps, local), "    "), timeline)
}

// keepOpen leaves the kernel's namespaces in place when the replay ends,
// so a spec can send traffic through the rules the replay left; the spec
// removes them.
type keepOpen struct{ *netns.IPTablesDataplane }

func (keepOpen) Close() error { return nil }

// onHostKernel is the iptables mode on this kernel through backend b; each
// dataplane it opens is handed to opened and removed when the spec ends.
func onHostKernel(b netns.IPTablesBackend, opened func(*netns.IPTablesDataplane)) scenarios.DataplaneFactory {
	return iptablesmode.OnKernel(func(nodeIPs []string) (iptablesmode.Kernel, error) {
		d, err := netns.OpenIPTablesDataplane(b, nodeIPs)
		if err != nil {
			return nil, err
		}
		DeferCleanup(func() { Expect(d.Close()).To(Succeed()) })
		opened(d)
		return keepOpen{d}, nil
	})
}

// programmed replays a scenario on the kernel and returns the node with
// the rules the replay ended with.
func programmed(b netns.IPTablesBackend, yaml string) *netns.IPTablesDataplane {
	s, err := scenarios.Parse("host-kernel.yaml", []byte(yaml), nil)
	Expect(err).NotTo(HaveOccurred())
	var d *netns.IPTablesDataplane
	res, err := replay.Replay(s, replay.Options{Dataplane: onHostKernel(b, func(o *netns.IPTablesDataplane) { d = o })})
	Expect(err).NotTo(HaveOccurred())
	Expect(res.Failures).To(BeEmpty(), describe(res))
	Expect(d).NotTo(BeNil())
	GinkgoWriter.Printf("%s on %s\n", s.Name, d.Name())
	return d
}

func serveAll(d *netns.IPTablesDataplane, eps []string) {
	for _, ep := range eps {
		Expect(d.Serve("TCP", hostPort(ep))).To(Succeed())
	}
}

func report(format string, a ...any) {
	GinkgoWriter.Printf(format+"\n", a...)
	fmt.Printf("PROXYSIM "+format+"\n", a...)
}

var _ = Describe("iptables on the host kernel", Label("host-kernel"), func() {
	for _, b := range netns.IPTablesBackends {
		Context("through "+b.Binary(), func() {
			BeforeEach(func() { requireHostKernel(b) })

			for _, n := range []int{2, 3, 5} {
				It(fmt.Sprintf("spreads %d connections to a ClusterIP over %d endpoints, 1/%d each (chi-square at p = %g)", spreadConnections, n, n, netns.Significance), func() {
					eps := endpointIPs(n)
					d := programmed(b, webScenario(fmt.Sprintf("spread-%d", n), "", eps, "", ""))
					serveAll(d, eps)
					shares := make([]float64, n)
					for k := range shares {
						shares[k] = 1 / float64(n)
					}
					withinChiSquare(fmt.Sprintf("%s n=%d N=%d", b, n, spreadConnections), func() (map[string]int, float64, int) {
						counts, err := d.Spray("TCP", podClient, webVIP+":80", spreadConnections, false)
						Expect(err).NotTo(HaveOccurred())
						obs := make([]int, n)
						answered := 0
						for k, ep := range eps {
							obs[k] = counts[hostPort(ep)]
							answered += obs[k]
						}
						Expect(answered).To(Equal(spreadConnections), "every connection reaches an endpoint: %v", counts)
						stat, df, _ := netns.ChiSquare(obs, shares)
						return counts, stat, df
					})
				})
			}

			It("catches a wrong prediction: the measured spread of three endpoints is not 1/2, 1/4, 1/4", func() {
				eps := endpointIPs(3)
				d := programmed(b, webScenario("wrong-prediction", "", eps, "", ""))
				pkt := iptables.Packet{Src: net.ParseIP(podClient), Dst: net.ParseIP(webVIP), DPort: 80, Protocol: "tcp"}
				wrong := iptables.Shares{hostPort(eps[0]): big.NewRat(1, 2), hostPort(eps[1]): big.NewRat(1, 4), hostPort(eps[2]): big.NewRat(1, 4)}
				err := d.CheckRoute(pkt, wrong)
				Expect(err).To(MatchError(ContainSubstring("the spread is off")))
				right := iptables.Shares{hostPort(eps[0]): big.NewRat(1, 3), hostPort(eps[1]): big.NewRat(1, 3), hostPort(eps[2]): big.NewRat(1, 3)}
				Expect(d.CheckRoute(pkt, right)).To(Succeed())
				for _, m := range d.Measurements() {
					GinkgoWriter.Println(m)
				}
			})

			It("keeps a client on one endpoint with ClientIP affinity, and only there", func() {
				eps := endpointIPs(3)
				d := programmed(b, webScenario("affinity", "      sessionAffinity: ClientIP\n", eps, "", ""))
				serveAll(d, eps)
				seen := map[string]bool{}
				for c := 1; c <= 4; c++ {
					client := fmt.Sprintf("10.244.9.%d", c)
					first, err := d.Connect("TCP", client, webVIP+":80")
					Expect(err).NotTo(HaveOccurred())
					Expect(first).To(HavePrefix("10.244."), "the first connection reaches an endpoint")
					for range 20 {
						again, err := d.Connect("TCP", client, webVIP+":80")
						Expect(err).NotTo(HaveOccurred())
						Expect(again).To(Equal(first), "client %s sticks to its endpoint", client)
					}
					seen[first] = true
				}
				// Without its history the same client spreads again: the
				// stickiness is the affinity's, not chance.
				for range 30 {
					Expect(d.ForgetAffinity()).To(Succeed())
					o, err := d.Connect("TCP", podClient, webVIP+":80")
					Expect(err).NotTo(HaveOccurred())
					seen[o] = true
				}
				Expect(len(seen)).To(BeNumerically(">=", 2), "connections without history went to %v", seen)
			})

			It("drops ClusterIP traffic under internalTrafficPolicy Local on a node without local endpoints, and sends it to the local one once there is one", func() {
				eps := endpointIPs(2)
				d := programmed(b, webScenario("local-none", "      internalTrafficPolicy: Local\n", eps, "", ""))
				serveAll(d, eps)
				for _, from := range []string{podClient, hostNodeIP} {
					counts, err := d.Spray("TCP", from, webVIP+":80", 16, false)
					Expect(err).NotTo(HaveOccurred())
					Expect(counts).To(Equal(map[string]int{netns.OutcomeTimeout: 16}), "from %s", from)
				}
				local := programmed(b, webScenario("local-one", "      internalTrafficPolicy: Local\n", eps, eps[1], ""))
				serveAll(local, eps)
				counts, err := local.Spray("TCP", podClient, webVIP+":80", 16, false)
				Expect(err).NotTo(HaveOccurred())
				Expect(counts).To(Equal(map[string]int{hostPort(eps[1]): 16}))
			})

			It("sends nothing new to a deleted endpoint", func() {
				eps := endpointIPs(3)
				third := "1/3"
				timeline := fmt.Sprintf(`  - at: 1s
    note: all three receive (measured on the kernel)
    expect:
      route: {from: %s, to: "%s:80", shares: {"%s": %s, "%s": %s, "%s": %s}}
  - at: 2s
    update:
%s  - at: 3s
    expect: {syncs: {at: [0s, 2s]}}
`, podClient, webVIP, hostPort(eps[0]), third, hostPort(eps[1]), third, hostPort(eps[2]), third, webSlice("      ", eps[1:], ""))
				d := programmed(b, webScenario("deleted-endpoint", "", eps, "", timeline))
				Expect(d.Measurements()).To(HaveLen(1))
				Expect(d.Measurements()[0].Counts[hostPort(eps[0])]).To(BeNumerically(">", 0), "before the delete it receives")
				serveAll(d, eps) // the deleted endpoint still answers, if asked
				counts, err := d.Spray("TCP", podClient, webVIP+":80", 600, false)
				Expect(err).NotTo(HaveOccurred())
				Expect(counts).NotTo(HaveKey(hostPort(eps[0])))
				// Every connection reaches a live endpoint; on a loaded
				// machine a handful may time out (a SYN retransmitted past
				// the 2 s dial timeout), never be refused or go elsewhere.
				Expect(counts[netns.OutcomeTimeout]).To(BeNumerically("<=", 6), "%v", counts)
				Expect(counts[hostPort(eps[1])]+counts[hostPort(eps[2])]+counts[netns.OutcomeTimeout]).To(Equal(600), "%v", counts)
			})
		})
	}
})

// kernelScenario is a scenario of mode iptables to replay on the kernel.
type kernelScenario struct {
	name  string
	route bool // it has a route expectation, measured on the kernel
	load  func() (*scenarios.Scenario, error)
}

// iptablesScenarios lists, when the suite is built, every bundled
// scenario of mode iptables and those of the iptables mode's own test
// folder (except its expected failures), so scenarios added later are
// included.
func iptablesScenarios() ([]kernelScenario, error) {
	var out []kernelScenario
	for _, name := range scenarios.TestedLibraryNames() {
		s, err := scenarios.LoadLibrary(name)
		if err != nil {
			return nil, err
		}
		if s.Proxy.Mode == iptablesmode.Name {
			out = append(out, kernelScenario{"library " + name, iptablesmode.HasRoute(s), func() (*scenarios.Scenario, error) { return scenarios.LoadLibrary(name) }})
		}
	}
	files, err := filepath.Glob("../scenarios/testdata/iptables/*.yaml")
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	for _, f := range files {
		s, err := scenarios.Load(f)
		if err != nil {
			return nil, err
		}
		if s.Proxy.Mode == iptablesmode.Name {
			out = append(out, kernelScenario{"testdata " + filepath.Base(f), iptablesmode.HasRoute(s), func() (*scenarios.Scenario, error) { return scenarios.Load(f) }})
		}
	}
	return out, nil
}

var _ = Describe("iptables scenarios on the host kernel", Label("host-kernel"), func() {
	list, listErr := iptablesScenarios()

	It("finds scenarios to replay, some with a route", func() {
		Expect(listErr).NotTo(HaveOccurred())
		routes := 0
		for _, ks := range list {
			if ks.route {
				routes++
			}
		}
		Expect(routes).To(BeNumerically(">", 0))
	})

	for _, ks := range list {
		for _, b := range netns.IPTablesBackends {
			what := "the kernel takes every restore the fake takes and holds the same rules at every golden"
			if ks.route {
				what += ", and its connections go where the tracer says"
			}
			It(fmt.Sprintf("replays %s through %s: %s", ks.name, b.Binary(), what), func() {
				requireHostKernel(b)
				s, err := ks.load()
				Expect(err).NotTo(HaveOccurred())
				var opened []*netns.IPTablesDataplane
				res, err := replay.Replay(s, replay.Options{Dataplane: onHostKernel(b, func(d *netns.IPTablesDataplane) { opened = append(opened, d) })})
				Expect(err).NotTo(HaveOccurred())
				Expect(res.Failures).To(BeEmpty(), describe(res))
				var got []netns.Measurement
				for _, d := range opened {
					for _, m := range d.Measurements() {
						report("route %s %s: %s", b, s.Name, m)
						got = append(got, m)
					}
				}
				checkEveryRouteMeasured(ks.name, iptablesmode.KernelRoutes(s), got)
			})
		}
	}
})

// kernelSkips are the connections of the replayed scenarios that the
// kernel check does not send, by scenario and "PROTOCOL FROM -> TO", with
// the reason netns.MeasureWith gives: it sends TCP and UDP only, and does
// not sample more than 16 outcomes (it would take too many connections).
// None of today's scenarios has one; a scenario that adds one must be
// listed here, so that a skip is a decision, not an accident.
var kernelSkips = map[string]map[string]string{}

// checkEveryRouteMeasured checks that a kernel replay measured every
// connection of its scenario (every route expectation and connection
// step, in order), except those listed in kernelSkips, which must have
// been skipped for the reason listed.
func checkEveryRouteMeasured(scenario string, want []iptablesmode.KernelRoute, got []netns.Measurement) {
	GinkgoHelper()
	Expect(got).To(HaveLen(len(want)), "connections measured or skipped on the kernel, one per route expectation and connection step")
	skips := kernelSkips[scenario]
	seen := map[string]bool{}
	for i, w := range want {
		m := got[i]
		Expect(fmt.Sprintf("%s %s -> %s", m.Protocol, m.From, m.To)).To(Equal(w.Key()), "the connection of %s", w.Where)
		reason, listed := skips[w.Key()]
		if m.Skipped == "" {
			Expect(listed).To(BeFalse(), "%s is listed in kernelSkips (%q) but was measured", w.Where, reason)
			continue
		}
		Expect(listed).To(BeTrue(), "%s was not measured (%s) and is not listed in kernelSkips", w.Where, m.Skipped)
		Expect(m.Skipped).To(Equal(reason), "why %s was not measured", w.Where)
		seen[w.Key()] = true
	}
	for key := range skips {
		Expect(seen).To(HaveKey(key), "kernelSkips lists %s for %s, which the replay did not skip", key, scenario)
	}
}

// namespacesOf lists the namespaces a process made (their names carry its
// ID).
func namespacesOf(pid int) []string {
	entries, _ := os.ReadDir("/var/run/netns")
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), netns.Prefix) && strings.Contains(e.Name(), fmt.Sprintf("-%d-", pid)) {
			out = append(out, e.Name())
		}
	}
	return out
}

var _ = Describe("a netns replay of an iptables scenario from the command line", Label("host-kernel"), func() {
	BeforeEach(func() { requireHostKernel(netns.NFT) })

	It("removes its namespaces when interrupted, and a killed run's at the next run", func() {
		bin := filepath.Join(GinkgoT().TempDir(), "proxysim")
		out, err := exec.Command("go", "build", "-o", bin, "../cmd/proxysim").CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))
		// Its DROP route waits out real timeouts: time to signal it mid-run.
		scenario := "../scenarios/testdata/iptables/reject-and-drop.yaml"
		killed := 0
		for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
			cmd := exec.Command(bin, "replay", "--dataplane", "netns", scenario)
			Expect(cmd.Start()).To(Succeed())
			pid := cmd.Process.Pid
			Eventually(func() []string { return namespacesOf(pid) }, 20*time.Second, 10*time.Millisecond).Should(HaveLen(3), "node, world and the client pod")
			time.Sleep(500 * time.Millisecond)
			Expect(cmd.Process.Signal(sig)).To(Succeed())
			err := cmd.Wait()
			Expect(err).To(HaveOccurred(), "%v ends the run", sig)
			if sig == syscall.SIGTERM {
				Expect(cmd.ProcessState.ExitCode()).To(Equal(128 + int(syscall.SIGTERM)))
				Expect(namespacesOf(pid)).To(BeEmpty(), "an interrupted run removes its namespaces")
			} else {
				Expect(namespacesOf(pid)).NotTo(BeEmpty(), "a SIGKILL leaves them")
				killed = pid
			}
		}
		out, err = exec.Command(bin, "replay", "--dataplane", "netns", scenario).CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))
		Expect(string(out)).To(ContainSubstring("PASS iptables-reject-and-drop"))
		Expect(string(out)).To(MatchRegexp(`removed \d+ namespaces left by killed runs`))
		Expect(namespacesOf(killed)).To(BeEmpty(), "the next run removes what the killed one left")
	})
})

var _ = Describe("a netns replay of the iptables library from the command line", Label("host-kernel"), func() {
	var names []string
	for _, n := range scenarios.TestedLibraryNames() {
		if s, err := scenarios.LoadLibrary(n); err == nil && s.Proxy.Mode == iptablesmode.Name {
			names = append(names, n)
		}
	}
	for _, b := range netns.IPTablesBackends {
		It(fmt.Sprintf("passes every iptables library scenario with `proxysim replay --dataplane netns --iptables %s`", b), func() {
			requireHostKernel(b)
			Expect(len(names)).To(BeNumerically(">=", 8))
			// iptables v1.8.9 (nf_tables) or (legacy): the backend asked for
			backend := map[netns.IPTablesBackend]string{netns.NFT: `\(nf_tables\)`, netns.Legacy: `\(legacy\)`}[b]
			replayFromCLI(names, []string{"--iptables", string(b)}, `iptables v[0-9.]+ `+backend+` dataplane`)
		})
	}
})
