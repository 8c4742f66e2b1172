package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/utils/clock"

	"github.com/proxysim/proxysim/netns"
	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/iptablesmode"
	"github.com/proxysim/proxysim/scenarios/migrate"
	"github.com/proxysim/proxysim/scenarios/nftablesmode"
)

// The migration report held to the kernel: for every cluster of the
// migration library and the kubeadm dump, each difference between the
// iptables and nftables modes is replayed in both modes on this host's
// kernel (iptables through its nf_tables backend, nftables through nft) as
// route expectations holding the report's predictions, and measured with
// real connections (chi-square for spreads, as the iptables and nftables
// route checks do). Then, crossed (each mode's kernel asked for the other
// mode's outcome), every measured connection must fail: the two sides are
// told apart by the kernel, not only by the tracers.

// kernelBoth is --dataplane netns for the two modes the host replays.
func kernelBoth(s *scenarios.Scenario, clk clock.PassiveClock) (scenarios.Dataplane, error) {
	if s.Proxy.Mode == nftablesmode.Name {
		return nftablesmode.OnKernel(func(nodeIPs []string) (nftablesmode.Kernel, error) {
			return netns.OpenNFTablesDataplane(nodeIPs)
		})(s, clk)
	}
	return iptablesmode.OnKernel(func(nodeIPs []string) (iptablesmode.Kernel, error) {
		return netns.OpenIPTablesDataplane(netns.NFT, nodeIPs)
	})(s, clk)
}

var migrateModeLine = regexp.MustCompile(`(?m)^(\s*)mode: \S*$`)

// migrationClusters are the clusters the kernel check runs on, each with
// its kube-proxy configuration.
func migrationClusters() map[string][2]string {
	out := map[string][2]string{"kubeadm": {"../scenarios/testdata/byoc/kubeadm/cluster.yaml", "../scenarios/testdata/byoc/kubeadm/kube-proxy.yaml"}}
	dirs, _ := filepath.Glob("../scenarios/migrate/stories/*")
	for _, d := range dirs {
		out[filepath.Base(d)] = [2]string{filepath.Join(d, "cluster.yaml"), filepath.Join(d, "kube-proxy.yaml")}
	}
	return out
}

var _ = Describe("the migration report on this host's kernel", Label("host-kernel"), func() {
	BeforeEach(func() {
		requireHostKernel(netns.NFT)
		requireNFT()
	})

	for name, c := range migrationClusters() {
		for _, p := range [][2]string{{"iptables", "nftables"}, {"nftables", "iptables"}} {
			It(name+": "+p[0]+" -> "+p[1]+": the kernel routes each difference's connections as the report predicts, in both modes, and not as the other mode's", func() {
				read := func(path string) ([]byte, error) {
					b, err := os.ReadFile(path)
					if err != nil || path != c[1] {
						return b, err
					}
					return migrateModeLine.ReplaceAll(b, []byte("${1}mode: "+p[0])), nil
				}
				r, err := migrate.Compare(migrate.Options{Cluster: c[0], Config: c[1], To: p[1], ReadFile: read, KernelCheck: kernelBoth})
				Expect(err).NotTo(HaveOccurred())
				var text strings.Builder
				Expect(r.Text(&text)).To(Succeed())
				diffs, unmeasured := 0, 0
				for _, s := range r.Services {
					for _, d := range s.Differences {
						diffs++
						if len(d.Kernel) == 1 && strings.HasPrefix(d.Kernel[0], "not measured") {
							unmeasured++
							continue
						}
						modes := map[string]bool{}
						for _, k := range d.Kernel {
							Expect(k).To(HaveSuffix(": as predicted"), text.String())
							modes[strings.Fields(k)[0]] = true
						}
						Expect(modes).To(HaveLen(2), "both modes measured: %v", d.Kernel)
					}
				}
				Expect(r.KernelFailures).To(BeZero(), text.String())
				Expect(r.Exit).NotTo(Equal(migrate.ExitKernel))
				report("migrate %s %s->%s: %d differences, %d connections measured on the kernel, %d not measurable (two nodes)", name, p[0], p[1], diffs, r.KernelChecked, unmeasured)
				if r.KernelChecked == 0 {
					return
				}
				Expect(r.CheckKernel(kernelBoth, true)).To(Succeed())
				Expect(r.KernelFailures).To(Equal(r.KernelChecked), "crossed, every measured connection must fail")
			})
		}
	}

	// A migration off IPVS: the host checks the side it replays, the
	// target, and names the ipvs side as the VM's (the kernel specs in
	// the VM check that one).
	for name, c := range migrationClusters() {
		for _, to := range []string{"nftables", "iptables"} {
			It(name+": ipvs -> "+to+": the host measures the "+to+" side as predicted and names the ipvs side as the VM's", func() {
				read := func(path string) ([]byte, error) {
					b, err := os.ReadFile(path)
					if err != nil || path != c[1] {
						return b, err
					}
					return migrateModeLine.ReplaceAll(b, []byte("${1}mode: ipvs")), nil
				}
				r, err := migrate.Compare(migrate.Options{Cluster: c[0], Config: c[1], To: to, ReadFile: read, KernelCheck: kernelBoth})
				Expect(err).NotTo(HaveOccurred())
				var text strings.Builder
				Expect(r.Text(&text)).To(Succeed())
				for _, s := range r.Services {
					for _, d := range s.Differences {
						for _, k := range d.Kernel {
							if strings.HasPrefix(k, "not measured") {
								continue
							}
							Expect(k).To(HavePrefix(to+" on "), "the %s side only", to)
							Expect(k).To(HaveSuffix(": as predicted"), text.String())
						}
					}
				}
				Expect(r.KernelFailures).To(BeZero(), text.String())
				Expect(r.KernelNote).To(ContainSubstring("the ipvs (before) side is not checked on a kernel: it needs --dataplane vm"))
				report("migrate %s ipvs->%s: %d connections measured on the %s side on the host", name, to, r.KernelChecked, to)
			})
		}
	}
})
