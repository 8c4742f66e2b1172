// Package doctor says what this machine can drive: the fake dataplane
// always; this kernel in network namespaces (root, iptables' two backends,
// nft and the kernel it needs, ip_vs); IPVS in a QEMU VM; Chromium for the
// report page's browser test. For each missing piece it gives the Debian or
// Ubuntu command that installs it and a one-line reason. It only looks: it
// installs nothing and changes nothing but a throwaway network namespace.
// Every probe is a field of Probes, so tests choose what the host shows.
package doctor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/proxysim/proxysim/netns"
)

// Probes are how a diagnosis looks at the host.
type Probes struct {
	// LookPath finds a tool in PATH (exec.LookPath).
	LookPath func(file string) (string, error)
	// SbinDirs are where iptables is also looked for, as the netns
	// dataplane does (root's PATH may lack sbin).
	SbinDirs []string
	// IsExecutable reports whether a file exists and may be executed.
	IsExecutable func(path string) bool
	// Root reports whether this process runs as root.
	Root func() bool
	// Output runs a tool (found by LookPath) for its version.
	Output func(path string, args ...string) ([]byte, error)
	// Kernel is the running kernel's release (uname -r).
	Kernel func() (string, error)
	// IPVS reports whether the kernel shows /proc/net/ip_vs, and where it
	// looked (a fresh network namespace when root, else this one's).
	IPVS func(root bool) (bool, string)
	// KVM reports whether /dev/kvm can be opened for reading and writing.
	KVM func() error
	// Exists reports whether a file exists (busybox, fonts).
	Exists func(path string) bool
}

// Host probes this machine.
func Host() Probes {
	return Probes{
		LookPath: exec.LookPath,
		SbinDirs: []string{"/usr/sbin", "/sbin"},
		IsExecutable: func(p string) bool {
			st, err := os.Stat(p)
			return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
		},
		Root:   netns.Privileged,
		Output: func(p string, args ...string) ([]byte, error) { return exec.Command(p, args...).CombinedOutput() },
		Kernel: netns.KernelVersion,
		IPVS:   hostIPVS,
		KVM: func() error {
			f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
			if err == nil {
				f.Close()
			}
			return err
		},
		Exists: func(p string) bool { _, err := os.Stat(p); return err == nil },
	}
}

// hostIPVS looks for /proc/net/ip_vs in a fresh network namespace when it
// can make one (what --dataplane netns replays in), else in its own.
func hostIPVS(root bool) (bool, string) {
	if root {
		if n, err := netns.Create("doctor"); err == nil {
			defer n.Close()
			return n.HasIPVS(), "/proc/net/ip_vs in a fresh network namespace"
		}
	}
	_, err := os.Stat("/proc/net/ip_vs")
	return err == nil, "/proc/net/ip_vs in this network namespace"
}

// Check is one thing the machine has or lacks.
type Check struct {
	// Name is how --require names it.
	Name string `json:"name"`
	OK   bool   `json:"ok"`
	// Found says what was found (a path, a version), or what is wrong.
	Found string `json:"found"`
	// For says what proxysim needs it for.
	For string `json:"for"`
	// Fix is the command that installs it or the step that provides it,
	// and Why the one-line reason, when it is missing.
	Fix string `json:"fix,omitempty"`
	Why string `json:"why,omitempty"`
	// Note is said even when OK (KVM: the VM runs without it).
	Note string `json:"note,omitempty"`
}

// Minimum versions of kube-proxy's nftables mode: it refuses to start with
// an older nft (knftables.New's check) or kernel (pkg/proxy/nftables/
// supported.go, getNFTablesInterface, utilkernel.NFTablesKubeProxyKernelVersion).
var (
	MinNFT    = [3]int{1, 0, 1}
	MinKernel = [3]int{5, 13, 0}
)

// Names are the checks in the order Diagnose returns them.
var Names = []string{"root", "ip_vs", "iptables-nft", "iptables-legacy", "nft", "kernel", "qemu", "vm-tools", "kvm", "chromium"}

// Groups are names --require takes for several checks at once.
var Groups = map[string][]string{
	"iptables": {"iptables-nft", "iptables-legacy"},
	"nftables": {"nft", "kernel"},
	"vm":       {"qemu", "vm-tools"},
	"netns":    {"root"},
}

// Diagnose runs every check.
func Diagnose(p Probes) []Check {
	root := p.Root()
	var out []Check
	if root {
		out = append(out, Check{Name: "root", OK: true, Found: "running as root", For: "--dataplane netns (namespaces, iptables, nftables, IPVS)"})
	} else {
		out = append(out, Check{Name: "root", Found: fmt.Sprintf("running as uid %d", os.Geteuid()), For: "--dataplane netns (namespaces, iptables, nftables, IPVS)",
			Fix: "sudo -E env PATH=\"$PATH\" proxysim ...", Why: "creating network namespaces and programming netfilter and IPVS needs CAP_SYS_ADMIN and CAP_NET_ADMIN"})
	}
	out = append(out, p.ipvs(root, p.Kernel))
	for _, b := range netns.IPTablesBackends {
		out = append(out, p.iptables(b))
	}
	nft, kernel := p.nftables()
	out = append(out, nft, kernel)
	out = append(out, p.qemu(), p.vmTools(), p.kvm(), p.chromium())
	return out
}

func (p Probes) ipvs(root bool, kernel func() (string, error)) Check {
	c := Check{Name: "ip_vs", For: "mode ipvs on --dataplane netns (otherwise --dataplane vm)"}
	ok, where := p.IPVS(root)
	if ok {
		c.OK, c.Found = true, where
		return c
	}
	c.Found = "no " + where
	c.Why = "kube-proxy's IPVS mode programs the kernel's IPVS, which this kernel has not loaded"
	c.Fix = "sudo modprobe ip_vs ip_vs_rr ip_vs_wrr ip_vs_sh (package kmod), or replay mode ipvs with --dataplane vm"
	if rel, err := kernel(); err == nil && !p.Exists("/lib/modules/"+rel) {
		// Nothing to load: a kernel without its modules folder (a
		// container's, a microVM's) gets IPVS only in the VM.
		c.Fix = "replay mode ipvs with --dataplane vm (this kernel has no /lib/modules/" + rel + " to load ip_vs from)"
	}
	return c
}

func (p Probes) iptables(b netns.IPTablesBackend) Check {
	c := Check{Name: "iptables-" + string(b), For: fmt.Sprintf("mode iptables on --dataplane netns --iptables %s", b)}
	bin := b.Binary()
	if path, ok := p.find(bin, true); ok {
		c.OK, c.Found = true, path
		return c
	}
	c.Found = bin + " not found"
	c.Fix = "sudo apt-get install iptables"
	c.Why = fmt.Sprintf("the netns dataplane runs iptables-restore and iptables-save through %s, which Debian's and Ubuntu's iptables package ships", bin)
	return c
}

var versionRE = regexp.MustCompile(`(\d+)\.(\d+)(?:\.(\d+))?`)

// parseVersion reads the first x.y[.z] in s.
func parseVersion(s string) ([3]int, bool) {
	m := versionRE.FindStringSubmatch(s)
	if m == nil {
		return [3]int{}, false
	}
	var v [3]int
	for i := range 3 {
		v[i], _ = strconv.Atoi(m[i+1])
	}
	return v, true
}

func older(v, min [3]int) bool { return slices.Compare(v[:], min[:]) < 0 }

func vstr(v [3]int) string { return fmt.Sprintf("%d.%d.%d", v[0], v[1], v[2]) }

func (p Probes) nftables() (Check, Check) {
	nft := Check{Name: "nft", For: "mode nftables on --dataplane netns"}
	if path, ok := p.find("nft", false); !ok {
		nft.Found = "nft not found"
		nft.Fix = "sudo apt-get install nftables"
		nft.Why = "the netns dataplane loads and lists kube-proxy's table with the nft command"
	} else if out, err := p.Output(path, "--version"); err != nil {
		nft.Found = fmt.Sprintf("%s --version: %v", path, err)
		nft.Fix = "sudo apt-get install --reinstall nftables"
		nft.Why = "nft is present but does not run"
	} else if v, ok := parseVersion(string(out)); !ok || older(v, MinNFT) {
		nft.Found = fmt.Sprintf("%s: %s", path, strings.TrimSpace(string(out)))
		nft.Fix = "sudo apt-get install nftables from Debian 12 (bookworm) / Ubuntu 22.04 or later"
		nft.Why = fmt.Sprintf("kube-proxy's nftables mode needs nft %s or later", vstr(MinNFT))
	} else {
		nft.OK = true
		nft.Found = fmt.Sprintf("%s (v%s)", path, vstr(v))
	}
	kernel := Check{Name: "kernel", For: "mode nftables on --dataplane netns"}
	rel, err := p.Kernel()
	v, ok := parseVersion(rel)
	switch {
	case err != nil:
		kernel.Found = "uname: " + err.Error()
		kernel.Fix, kernel.Why = "run on Linux", "the netns dataplane programs this kernel"
	case !ok || older(v, MinKernel):
		kernel.Found = "kernel " + rel
		kernel.Fix = "boot a kernel 5.13 or later (Debian 12, Ubuntu 22.04 HWE); the fake dataplane replays nftables scenarios on any kernel"
		kernel.Why = fmt.Sprintf("kube-proxy's nftables mode needs kernel %s or later", vstr(MinKernel))
	default:
		kernel.OK, kernel.Found = true, "kernel "+rel
	}
	return nft, kernel
}

func (p Probes) qemu() Check {
	c := Check{Name: "qemu", For: "--dataplane vm and proxysim vm (IPVS in Debian's kernel)"}
	if path, ok := p.find("qemu-system-x86_64", false); ok {
		c.OK, c.Found = true, path
		return c
	}
	c.Found = "qemu-system-x86_64 not found"
	c.Fix = "sudo apt-get install qemu-system-x86"
	c.Why = "the VM runner boots Debian's cloud kernel with qemu-system-x86_64"
	return c
}

// vmTools are the VM runner's other host tools, with their packages (see
// netns/vm's CheckHost), and the netfilter tools it copies into the guest
// for the IPVS mode's packet path (iptables' legacy backend, ipset).
var vmTools = []struct{ tool, pkg string }{
	{"cpio", "cpio"}, {"depmod", "kmod"}, {"modprobe", "kmod"}, {"apt-get", "apt"}, {"dpkg-deb", "dpkg"},
	{"xtables-legacy-multi", "iptables"}, {"ipset", "ipset"},
}

func (p Probes) vmTools() Check {
	c := Check{Name: "vm-tools", For: "--dataplane vm and proxysim vm (building the guest's initramfs)"}
	var missing, pkgs []string
	for _, t := range vmTools {
		if _, ok := p.find(t.tool, true); !ok {
			missing = append(missing, t.tool)
			if !slices.Contains(pkgs, t.pkg) {
				pkgs = append(pkgs, t.pkg)
			}
		}
	}
	if !p.Exists("/bin/busybox") {
		missing = append(missing, "/bin/busybox")
		pkgs = append(pkgs, "busybox-static")
	}
	if len(missing) == 0 {
		c.OK, c.Found = true, "cpio, kmod, apt, dpkg-deb, iptables, ipset, busybox"
		return c
	}
	c.Found = "missing " + strings.Join(missing, ", ")
	c.Fix = "sudo apt-get install " + strings.Join(pkgs, " ")
	c.Why = "the VM runner fetches the kernel package with apt and dpkg-deb and packs modules, busybox, iptables and ipset into an initramfs"
	return c
}

func (p Probes) kvm() Check {
	c := Check{Name: "kvm", For: "nothing required: the VM runner uses QEMU's software emulation (TCG)",
		Note: "proxysim boots its VM with -accel tcg, KVM or not: some hosts' /dev/kvm (nested or PVM) cannot boot a stock guest kernel; a boot takes seconds, a replay minutes"}
	err := p.KVM()
	switch {
	case err == nil:
		c.OK, c.Found = true, "/dev/kvm can be opened"
	case errors.Is(err, fs.ErrNotExist):
		c.OK, c.Found = true, "no /dev/kvm"
	default:
		c.OK, c.Found = true, "/dev/kvm: "+err.Error()
	}
	return c
}

func (p Probes) chromium() Check {
	c := Check{Name: "chromium", For: "the report page's browser test, a test of proxysim's own repository (proxysim report itself needs no browser)"}
	var missing []string
	path, ok := p.find("chromium", false)
	if !ok {
		missing = append(missing, "chromium")
	}
	if !p.Exists("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf") {
		missing = append(missing, "fonts-dejavu-core")
	}
	if len(missing) == 0 {
		c.OK, c.Found = true, path
		return c
	}
	c.Found = "missing " + strings.Join(missing, ", ")
	c.Fix = "sudo apt-get install " + strings.Join(missing, " ") + " (Ubuntu: sudo snap install chromium)"
	c.Why = "the browser test renders report pages in headless Chromium and screenshots them with a known font"
	return c
}

// find looks a tool up in PATH and, for tools the netns dataplane also
// finds in sbin, in SbinDirs.
func (p Probes) find(tool string, sbin bool) (string, bool) {
	if path, err := p.LookPath(tool); err == nil {
		return path, true
	}
	if sbin {
		for _, d := range p.SbinDirs {
			if f := filepath.Join(d, tool); p.IsExecutable(f) {
				return f, true
			}
		}
	}
	return "", false
}

// Require returns the checks that names (check names or Groups) ask for
// and that failed; an unknown name is an error.
func Require(checks []Check, names []string) ([]Check, error) {
	var want []string
	for _, n := range names {
		n = strings.TrimSpace(n)
		switch {
		case n == "":
		case Groups[n] != nil:
			want = append(want, Groups[n]...)
		case slices.Contains(Names, n):
			want = append(want, n)
		default:
			return nil, fmt.Errorf("--require %s: unknown check (want %s, or %s)", n, strings.Join(Names, ", "), strings.Join(groupNames(), ", "))
		}
	}
	var failed []Check
	for _, c := range checks {
		if slices.Contains(want, c.Name) && !c.OK {
			failed = append(failed, c)
		}
	}
	return failed, nil
}

func groupNames() []string {
	var out []string
	for g := range Groups {
		out = append(out, g)
	}
	slices.Sort(out)
	return out
}

// Capability is one way of replaying that the checks allow or not.
type Capability struct {
	What string `json:"what"`
	OK   bool   `json:"ok"`
	// Missing names the failed checks it needs.
	Missing []string `json:"missing,omitempty"`
}

// capabilities are the ways of replaying and the checks each needs; the
// iptables mode needs one backend (--iptables picks it, nft by default).
var capabilities = []struct {
	what  string
	needs []string
	any   []string
}{
	{what: "--dataplane fake (every mode, in memory)"},
	{what: "--dataplane netns, mode iptables", needs: []string{"root"}, any: []string{"iptables-nft", "iptables-legacy"}},
	{what: "--dataplane netns, mode nftables", needs: []string{"root", "nft", "kernel"}},
	{what: "--dataplane netns, mode ipvs", needs: []string{"root", "ip_vs"}},
	{what: "--dataplane vm (mode ipvs in Debian's kernel)", needs: []string{"qemu", "vm-tools"}},
	{what: "the report page's browser test", needs: []string{"chromium"}},
}

// Capabilities says, from checks, which ways of replaying this machine has.
func Capabilities(checks []Check) []Capability {
	ok := map[string]bool{}
	for _, c := range checks {
		ok[c.Name] = c.OK
	}
	var out []Capability
	for _, c := range capabilities {
		cp := Capability{What: c.what}
		for _, n := range c.needs {
			if !ok[n] {
				cp.Missing = append(cp.Missing, n)
			}
		}
		if len(c.any) > 0 && !slices.ContainsFunc(c.any, func(n string) bool { return ok[n] }) {
			cp.Missing = append(cp.Missing, strings.Join(c.any, " or "))
		}
		cp.OK = len(cp.Missing) == 0
		out = append(out, cp)
	}
	return out
}
