package doctor

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"
)

func byName(t *testing.T, checks []Check) map[string]Check {
	t.Helper()
	m := map[string]Check{}
	for _, c := range checks {
		m[c.Name] = c
	}
	for _, n := range Names {
		if _, ok := m[n]; !ok {
			t.Errorf("no check %s", n)
		}
	}
	if len(checks) != len(Names) {
		t.Errorf("%d checks, want %d", len(checks), len(Names))
	}
	return m
}

// This machine has iptables (both backends), nft and QEMU installed: the
// real probes find them, and say nothing needs installing for them.
func TestDiagnoseThisHost(t *testing.T) {
	for _, tool := range []string{"xtables-nft-multi", "xtables-legacy-multi", "nft", "qemu-system-x86_64"} {
		if _, ok := Host().find(tool, true); !ok {
			t.Skipf("%s is not installed on this host", tool)
		}
	}
	m := byName(t, Diagnose(Host()))
	for _, n := range []string{"iptables-nft", "iptables-legacy", "nft", "qemu", "kvm"} {
		if c := m[n]; !c.OK || c.Fix != "" || c.Found == "" {
			t.Errorf("%s: %+v", n, c)
		}
	}
	if c := m["nft"]; !strings.Contains(c.Found, "(v1.") {
		t.Errorf("nft's version not read: %+v", c)
	}
	if c := m["root"]; c.OK != (os.Geteuid() == 0) {
		t.Errorf("root: %+v", c)
	}
	if failed, err := Require(Diagnose(Host()), []string{"iptables", "nft"}); err != nil || len(failed) != 0 {
		t.Errorf("--require iptables,nft on this host: %v, %+v", err, failed)
	}
}

// With PATH an empty folder and nothing in sbin, every tool is missing, and
// each says how to install it.
func TestDiagnoseWithToolsHiddenFromPATH(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	p := Host()
	p.SbinDirs = nil
	p.Root = func() bool { return false }
	p.IPVS = func(bool) (bool, string) { return false, "/proc/net/ip_vs in this network namespace" }
	p.Exists = func(string) bool { return false }
	m := byName(t, Diagnose(p))
	for name, fix := range map[string]string{
		"iptables-nft":    "sudo apt-get install iptables",
		"iptables-legacy": "sudo apt-get install iptables",
		"nft":             "sudo apt-get install nftables",
		"qemu":            "sudo apt-get install qemu-system-x86",
		"vm-tools":        "sudo apt-get install cpio kmod apt dpkg iptables ipset busybox-static",
		"chromium":        "sudo apt-get install chromium fonts-dejavu-core",
		"ip_vs":           "replay mode ipvs with --dataplane vm (this kernel has no /lib/modules/",
		"root":            "sudo ",
	} {
		c := m[name]
		if c.OK || !strings.HasPrefix(c.Fix, fix) || c.Why == "" {
			t.Errorf("%s: %+v, want missing with fix %q and a reason", name, c, fix)
		}
	}
	failed, err := Require(Diagnose(p), []string{"iptables", "nft"})
	if err != nil || len(failed) != 3 {
		t.Errorf("--require iptables,nft: %v, %+v", err, failed)
	}
	if _, err := Require(nil, []string{"ipvs"}); err == nil || !strings.Contains(err.Error(), "--require ipvs: unknown check") {
		t.Errorf("unknown name: %v", err)
	}
}

// Versions below kube-proxy's floor for the nftables mode are reported with
// the floor; KVM never fails a diagnosis (the VM runs under TCG).
func TestDiagnoseOldNFTAndKernel(t *testing.T) {
	p := Probes{
		LookPath:     func(f string) (string, error) { return "/usr/sbin/" + f, nil },
		IsExecutable: func(string) bool { return true },
		Root:         func() bool { return true },
		Output: func(string, ...string) ([]byte, error) {
			return []byte("nftables v0.9.8 (E.D.S.)\n"), nil
		},
		Kernel: func() (string, error) { return "5.10.0-30-cloud-amd64", nil },
		IPVS:   func(bool) (bool, string) { return true, "/proc/net/ip_vs in a fresh network namespace" },
		KVM:    func() error { return &fs.PathError{Op: "open", Path: "/dev/kvm", Err: fs.ErrNotExist} },
		Exists: func(string) bool { return true },
	}
	m := byName(t, Diagnose(p))
	if c := m["nft"]; c.OK || !strings.Contains(c.Why, "nft 1.0.1 or later") {
		t.Errorf("nft 0.9.8: %+v", c)
	}
	if c := m["kernel"]; c.OK || !strings.Contains(c.Why, "kernel 5.13.0 or later") || !strings.Contains(c.Found, "5.10.0") {
		t.Errorf("kernel 5.10: %+v", c)
	}
	if c := m["kvm"]; !c.OK || c.Found != "no /dev/kvm" || !strings.Contains(c.Note, "tcg") {
		t.Errorf("kvm: %+v", c)
	}
	for _, n := range []string{"root", "ip_vs", "iptables-nft", "qemu", "vm-tools", "chromium"} {
		if !m[n].OK {
			t.Errorf("%s: %+v", n, m[n])
		}
	}
	p.Output = func(string, ...string) ([]byte, error) { return []byte("nftables v1.0.6 (Lester Gooch #5)"), nil }
	p.Kernel = func() (string, error) { return "6.1.0-28-cloud-amd64", nil }
	if m := byName(t, Diagnose(p)); !m["nft"].OK || !m["kernel"].OK {
		t.Errorf("nft 1.0.6 on 6.1: %+v %+v", m["nft"], m["kernel"])
	}
	p.Output = func(string, ...string) ([]byte, error) { return nil, errors.New("exit status 127") }
	if c := byName(t, Diagnose(p))["nft"]; c.OK || !strings.Contains(c.Found, "exit status 127") {
		t.Errorf("nft that does not run: %+v", c)
	}
}
