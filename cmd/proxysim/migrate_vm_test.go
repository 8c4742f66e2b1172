package main

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/proxysim/proxysim/netns/vm"
	"github.com/proxysim/proxysim/scenarios/migrate"
)

// --dataplane vm on a machine that cannot boot the VM stops before
// anything runs, saying what is missing and where to look.
func TestMigrateVMWithoutQEMUPointsAtDoctor(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no qemu-system-x86_64, no cpio
	code, out, errs := runCLI("migrate", "--dataplane", "vm", "--cluster", stories+"load-balancer-source-ranges/cluster.yaml", "--config", stories+"load-balancer-source-ranges/kube-proxy.yaml", "--to", "nftables")
	if code != exitCannotRun || out != "" || !strings.Contains(errs, "--dataplane vm: missing host packages") || !strings.Contains(errs, "qemu-system-x86") || !strings.Contains(errs, "proxysim doctor") {
		t.Fatalf("code %d, want 3 naming qemu and proxysim doctor\n%s%s", code, out, errs)
	}
}

// The migrate inside the VM prints its kernel check, and nothing else, as
// one marked line that the host's report takes.
func TestMigrateVMResultLine(t *testing.T) {
	code, out, errs := runCLI("migrate", "--dataplane", "netns", "--vm-result", "--cost-profile=", "--cluster", stories+"session-affinity/cluster.yaml", "--config", stories+"session-affinity/kube-proxy.yaml", "--to", "nftables")
	if code != exitPass || strings.Count(out, "\n") != 1 || !strings.HasPrefix(out, migrateResultMarker) {
		t.Fatalf("code %d, want 0 and one marked line\n%s%s", code, out, errs)
	}
	var k migrate.KernelResult
	if err := json.Unmarshal([]byte(strings.TrimPrefix(out, migrateResultMarker)), &k); err != nil {
		t.Fatal(err)
	}
	// session-affinity has no difference: nothing measured, the ipvs side
	// checked (the VM's mode), the nftables side named.
	if k.Checked != 0 || len(k.Differences) != 0 || !strings.Contains(k.Note, "on the ipvs (before) side only") || !strings.Contains(k.Note, "nftables (after) side is not checked") {
		t.Fatalf("%+v", k)
	}
}

// The console reader keeps the marked line, even split across writes, and
// passes the rest through.
func TestMarkedLine(t *testing.T) {
	var rest strings.Builder
	c := &markedLine{marker: migrateResultMarker, w: &rest}
	for _, chunk := range []string{"removed 2 namespaces\n\x1b[0m" + migrateResultMarker[:5], migrateResultMarker[5:] + `{"note":`, "\"x\"}\r\nbye\n"} {
		if _, err := c.Write([]byte(chunk)); err != nil {
			t.Fatal(err)
		}
	}
	if string(c.line) != `{"note":"x"}` || rest.String() != "removed 2 namespaces\nbye\n" {
		t.Fatalf("line %q, rest %q", c.line, rest.String())
	}
}

// The whole path: `migrate --dataplane vm` boots the VM, which measures
// the ipvs side of a library story with real connections, and the host's
// report shows each measured connection and says which side was checked.
func TestMigrateInVM(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	needVM(t, root)
	proxysim := buildStatic(t, t.TempDir(), "proxysim", ".")
	story := filepath.Join(root, "scenarios/migrate/stories/load-balancer-source-ranges")
	start := time.Now()
	cmd := exec.Command(proxysim, "migrate", "--dataplane", "vm", "--cluster", filepath.Join(story, "cluster.yaml"), "--config", filepath.Join(story, "kube-proxy.yaml"), "--to", "nftables")
	cmd.Dir = root // for .cache/vm
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	t.Logf("migrate --dataplane vm: %v", time.Since(start).Round(100*time.Millisecond))
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("%v, want exit 1 (a difference, measured as predicted)\n%s%s", err, out, stderr.String())
	}
	text := string(out)
	for _, want := range []string{
		"kernel: ipvs on netns, kernel ",
		"with the packet path: 192.168.10.11 -> 198.51.100.80:443 on node node-a: as predicted",
		"with the packet path: 192.168.10.12 -> 198.51.100.80:443 on node node-b: as predicted",
		"Kernel check: each difference's connections measured on the kernel on the ipvs (before) side only (masquerade measured too); the nftables (after) side is not checked on a kernel: it needs --dataplane netns",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the report lacks %q\n%s%s", want, text, stderr.String())
		}
	}
}

// A migration without an IPVS side has nothing for the VM: no boot, and
// the report names both sides with the dataplane that checks them.
func TestMigrateVMWithoutIPVSSideBootsNothing(t *testing.T) {
	if err := vm.CheckHost(); err != nil {
		t.Skip("the flag stops earlier without QEMU: ", err)
	}
	start := time.Now()
	code, out, errs := runCLI("migrate", "--dataplane", "vm", "--cluster", stories+"nodeport-second-address/cluster.yaml", "--config", stories+"nodeport-second-address/kube-proxy.yaml", "--to", "nftables")
	want := "Kernel check: not checked on a kernel: the iptables (before) side needs --dataplane netns; the nftables (after) side needs --dataplane netns"
	if code != 1 || !strings.Contains(out, want) || strings.Contains(out, "        kernel: ") || time.Since(start) > 20*time.Second {
		t.Fatalf("code %d in %v, want 1 and %q, no kernel line, no boot\n%s%s", code, time.Since(start), want, out, errs)
	}
}
