package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/proxysim/proxysim/netns"
	"github.com/proxysim/proxysim/netns/doctor"
)

// On this machine (iptables, nft and QEMU installed) doctor finds them and
// exits 0; --require passes for what is there.
func TestDoctorOnThisMachine(t *testing.T) {
	code, out, errs := runCLI("doctor")
	if code != exitPass {
		t.Fatalf("code %d: %s", code, errs)
	}
	for _, want := range []string{"proxysim doctor: what this machine can drive", "this machine can replay on:", "yes  --dataplane fake"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "MISSING  nft ") || strings.Contains(out, "MISSING  iptables-nft") || strings.Contains(out, "MISSING  qemu") {
		t.Skipf("this host lacks iptables, nft or QEMU:\n%s", out)
	}
	if code, _, errs := runCLI("doctor", "--require", "iptables,nft,qemu"); code != exitPass {
		t.Errorf("--require iptables,nft,qemu: code %d: %s", code, errs)
	}
	code, out, _ = runCLI("doctor", "--format", "json")
	var doc struct {
		Checks       []doctor.Check
		Capabilities []doctor.Capability
	}
	if err := json.Unmarshal([]byte(out), &doc); code != exitPass || err != nil || len(doc.Checks) != len(doctor.Names) || !doc.Capabilities[0].OK {
		t.Errorf("--format json: code %d, %v\n%s", code, err, out)
	}
}

// With PATH an empty folder (and sbin, fonts and busybox out of sight),
// each tool is reported missing with its install command; exit 0 unless
// --require names one.
func TestDoctorWithToolsHiddenFromPATH(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	defer func(p func() doctor.Probes) { doctorProbes = p }(doctorProbes)
	doctorProbes = func() doctor.Probes {
		p := doctor.Host()
		p.SbinDirs = nil
		p.Exists = func(string) bool { return false }
		return p
	}
	code, out, errs := runCLI("doctor")
	if code != exitPass {
		t.Fatalf("code %d: %s", code, errs)
	}
	for _, c := range []struct{ name, install string }{
		{"iptables-nft", "sudo apt-get install iptables"},
		{"iptables-legacy", "sudo apt-get install iptables"},
		{"nft", "sudo apt-get install nftables"},
		{"qemu", "sudo apt-get install qemu-system-x86"},
		{"vm-tools", "sudo apt-get install cpio kmod apt dpkg iptables ipset busybox-static"},
		{"chromium", "sudo apt-get install chromium fonts-dejavu-core"},
	} {
		i := strings.Index(out, "MISSING  "+c.name+" ")
		if i < 0 {
			t.Errorf("%s not reported missing:\n%s", c.name, out)
			continue
		}
		// The check's line and its indented detail lines.
		lines := strings.Split(out[i:], "\n")
		block := lines[0]
		for _, l := range lines[1:] {
			if !strings.HasPrefix(l, "      ") {
				break
			}
			block += "\n" + l
		}
		if !strings.Contains(block, "install: "+c.install) || !strings.Contains(block, "why:") {
			t.Errorf("%s: no install command %q or reason in:\n%s", c.name, c.install, block)
		}
	}
	for _, want := range []string{"no   --dataplane netns, mode iptables (missing:", "no   --dataplane vm"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	code, _, errs = runCLI("doctor", "--require", "iptables,nft")
	if code != exitCannotRun || !strings.Contains(errs, "required but missing: iptables-nft, iptables-legacy, nft") {
		t.Errorf("--require iptables,nft: code %d, %s", code, errs)
	}
	code, _, errs = runCLI("doctor", "--require", "ipvs")
	if code != exitInvalid || !strings.Contains(errs, "--require ipvs: unknown check") {
		t.Errorf("--require ipvs: code %d, %s", code, errs)
	}
}

// A netns replay whose tool is missing says to run `proxysim doctor`, not
// a script of the repository (root: the namespace comes first).
func TestMissingToolErrorPointsAtDoctor(t *testing.T) {
	for _, err := range []error{netns.ErrNoIPTables, netns.ErrNoIPVS} {
		if m := err.Error(); !strings.Contains(m, "run `proxysim doctor`") || strings.Contains(m, ".sh") || strings.Contains(m, "make ") {
			t.Errorf("%q points elsewhere than proxysim doctor", m)
		}
	}
	if !netns.Privileged() {
		t.Skip("needs root")
	}
	t.Setenv("PATH", t.TempDir())
	code, out, errs := runCLI("replay", "--dataplane", "netns", "churn-nftables")
	if code != exitCannotRun || !strings.Contains(out, "nft is not installed") || !strings.Contains(out, "run `proxysim doctor`") {
		t.Errorf("code %d\n%s%s", code, out, errs)
	}
}
