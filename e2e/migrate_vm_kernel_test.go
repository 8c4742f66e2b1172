package e2e

import (
	"io/fs"
	"path"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/proxysim/proxysim/netns"
	"github.com/proxysim/proxysim/scenarios/ipvsmode"
	"github.com/proxysim/proxysim/scenarios/migrate"
)

// The migration report's ipvs side held to the kernel (label kernel: the
// VM runs it, as `proxysim migrate --dataplane vm` does): for each story of
// the migration library, built into the binary, that moves off IPVS (and
// one moved onto it), each difference's connections on the ipvs side are
// replayed as route expectations holding the report's predictions, shares
// and masquerade, on the IPVS mode's whole packet path, and measured with
// real connections (chi-square for spreads). Then, crossed (the ipvs
// kernel asked for the other mode's outcome), every measured connection
// must fail.

// migrateIPVSKernel is --dataplane netns for the ipvs side, inside the VM.
var migrateIPVSKernel = ipvsmode.OnKernelPacketPath(func(nodeIPs []string) (ipvsmode.PathKernel, error) {
	return netns.OpenIPVSPathNode(nodeIPs)
})

// ipvsMigrations are the library's stories whose kube-proxy runs IPVS,
// each as the story tells it (ipvs before), and one turned around
// (ipvs after: the configuration's mode is rewritten).
func ipvsMigrations() [][3]string {
	var out [][3]string // story, from, to
	dirs, _ := fs.ReadDir(migrate.Stories, "stories")
	for _, d := range dirs {
		cfg, err := fs.ReadFile(migrate.Stories, path.Join("stories", d.Name(), "kube-proxy.yaml"))
		if err == nil && strings.Contains(string(cfg), "mode: ipvs") {
			out = append(out, [3]string{d.Name(), "ipvs", "nftables"})
		}
	}
	return append(out, [3]string{"load-balancer-source-ranges", "nftables", "ipvs"})
}

var _ = Describe("the migration report's ipvs side on the real kernel", Label("kernel"), func() {
	It("finds the library's migrations off IPVS", func() {
		Expect(len(ipvsMigrations())).To(BeNumerically(">=", 3), "two stories off IPVS with differences, and one turned around")
	})

	for _, m := range ipvsMigrations() {
		name, from, to := m[0], m[1], m[2]
		side := "ipvs (before)"
		if to == "ipvs" {
			side = "ipvs (after)"
		}
		It(name+": "+from+" -> "+to+": the kernel routes each difference's connections on the ipvs side as the report predicts, masquerade included, and not as the "+map[bool]string{true: from, false: to}[to == "ipvs"]+" mode's", func() {
			requireIPVSPath()
			start := time.Now()
			dir := path.Join("stories", name)
			read := func(p string) ([]byte, error) {
				b, err := fs.ReadFile(migrate.Stories, p)
				if err != nil || p != path.Join(dir, "kube-proxy.yaml") {
					return b, err
				}
				return migrateModeLine.ReplaceAll(b, []byte("${1}mode: "+from)), nil
			}
			r, err := migrate.Compare(migrate.Options{Cluster: path.Join(dir, "cluster.yaml"), Config: path.Join(dir, "kube-proxy.yaml"), To: to,
				ReadFile: read, KernelCheck: migrateIPVSKernel, KernelModes: migrate.VMKernelModes})
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
					Expect(d.Kernel).NotTo(BeEmpty(), text.String())
					for _, k := range d.Kernel {
						Expect(k).To(HavePrefix("ipvs on netns, kernel "), "the ipvs side only, on the packet path")
						Expect(k).To(ContainSubstring("with the packet path"))
						Expect(k).To(HaveSuffix(": as predicted"), text.String())
					}
				}
			}
			Expect(r.KernelFailures).To(BeZero(), text.String())
			Expect(r.Exit).NotTo(Equal(migrate.ExitKernel))
			Expect(r.KernelNote).To(ContainSubstring("on the "+side+" side only"), "the report names the side checked")
			Expect(r.KernelNote).To(ContainSubstring("side is not checked on a kernel: it needs --dataplane netns"), "and the side it did not check")
			report("migrate vm %s %s->%s: %d differences, %d connections measured on the ipvs side in %.1fs, %d not measurable (two nodes)", name, from, to, diffs, r.KernelChecked, time.Since(start).Seconds(), unmeasured)
			if diffs == 0 {
				Expect(r.KernelChecked).To(BeZero())
				return
			}
			Expect(r.KernelChecked).To(BeNumerically(">", 0), "a story with differences has some measured:\n%s", text.String())
			start = time.Now()
			Expect(r.CheckKernel(migrateIPVSKernel, true)).To(Succeed())
			Expect(r.KernelFailures).To(Equal(r.KernelChecked), "crossed, every measured connection must fail")
			report("migrate vm %s %s->%s crossed: %d of %d connections NOT as predicted, in %.1fs", name, from, to, r.KernelFailures, r.KernelChecked, time.Since(start).Seconds())
		})
	}
})
