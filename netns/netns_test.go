package netns

import (
	"errors"
	"os"
	"testing"
)

// On a kernel without IPVS (this project's hosts), moby/ipvs would report
// success for every call; the namespace dataplane must refuse instead.
func TestNoIPVSIsReportedNotIgnored(t *testing.T) {
	if !Privileged() {
		t.Skip("needs root to create a namespace")
	}
	if _, err := os.Stat("/proc/net/ip_vs"); err == nil {
		t.Skip("this kernel has IPVS")
	}
	ns := New(t, "noipvs")
	if ns.HasIPVS() {
		t.Fatal("HasIPVS true on a kernel without ip_vs")
	}
	if _, err := ns.NewIPVS(); !errors.Is(err, ErrNoIPVS) {
		t.Fatalf("NewIPVS: %v, want ErrNoIPVS", err)
	}
}

// Sysctls written in one namespace stay there.
func TestSysctlsArePerNamespace(t *testing.T) {
	if !Privileged() {
		t.Skip("needs root to create a namespace")
	}
	const name = "net/ipv4/conf/all/arp_ignore"
	hostBefore, _ := os.ReadFile("/proc/sys/" + name)
	a, b := New(t, "a"), New(t, "b")
	if err := a.Sysctl().Set(name, 1); err != nil {
		t.Fatal(err)
	}
	if v, err := a.Sysctl().Get(name); err != nil || v != 1 {
		t.Fatalf("a: %d %v", v, err)
	}
	if v, err := b.Sysctl().Get(name); err != nil || v != 0 {
		t.Fatalf("b sees a's sysctl: %d %v", v, err)
	}
	if hostAfter, _ := os.ReadFile("/proc/sys/" + name); string(hostAfter) != string(hostBefore) {
		t.Fatalf("the host's %s changed: %q -> %q", name, hostBefore, hostAfter)
	}
}
