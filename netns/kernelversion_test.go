package netns

import (
	"testing"

	"github.com/proxysim/proxysim/sim/ipvs"
)

// The upstream version comes from uname -v as Debian's three releases print
// it (read in the VM, 2026-11-28).
func TestUpstreamVersion(t *testing.T) {
	for _, tc := range []struct{ release, version, want string }{
		{"5.10.0-46-cloud-amd64", "#1 SMP Debian 5.10.262-1 (2026-07-31)", "5.10.262"},
		{"6.1.0-56-cloud-amd64", "#1 SMP PREEMPT_DYNAMIC Debian 6.1.192-2 (2026-11-16)", "6.1.192"},
		{"6.12.118+deb13-cloud-amd64", "#1 SMP PREEMPT_DYNAMIC Debian 6.12.118-1 (2026-11-20)", "6.12.118"},
		// Not Debian's, or not this release's: none.
		{"6.5.6-300.fc39.x86_64", "#1 SMP PREEMPT_DYNAMIC Fri Oct  6 19:57:21 UTC 2023", ""},
		{"5.10.0-46-cloud-amd64", "#1 SMP Debian 6.1.2-1", ""},
		{"5.10.0-46-cloud-amd64", "#1 SMP Debian", ""},
	} {
		got := upstreamVersion(tc.release, tc.version)
		if got != tc.want {
			t.Errorf("upstreamVersion(%q, %q) = %q, want %q", tc.release, tc.version, got, tc.want)
		}
		if got == "" {
			continue
		}
		// What KernelVersion reports parses to the upstream version.
		v, err := ipvs.ParseKernelVersion(tc.release + " (" + got + ")")
		if w, _ := ipvs.ParseKernelVersion(tc.want); err != nil || v != w {
			t.Errorf("%s (%s) parses to %v, %v", tc.release, got, v, err)
		}
	}
}
