package netns

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/proxysim/proxysim/sim/ipvs"
)

// Sysctls reads and writes /proc/sys inside a namespace (per-namespace
// sysctls such as net/ipv4/vs/* and net/ipv4/conf/all/*).
type Sysctls struct{ ns *Namespace }

var _ ipvs.Sysctl = Sysctls{}

// Sysctl returns n's sysctls.
func (n *Namespace) Sysctl() Sysctls { return Sysctls{n} }

func (s Sysctls) Get(name string) (int, error) {
	var v int
	err := s.ns.Do(func() error {
		b, err := os.ReadFile(filepath.Join("/proc/sys", name))
		if err != nil {
			return err
		}
		v, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err
	})
	return v, err
}

func (s Sysctls) Set(name string, value int) error {
	return s.ns.Do(func() error {
		return os.WriteFile(filepath.Join("/proc/sys", name), []byte(strconv.Itoa(value)), 0o644)
	})
}

// KernelVersion is the running kernel's release, followed by its upstream
// version in parentheses when the distribution reports one:
// "5.10.0-46-cloud-amd64 (5.10.262)". A Debian release names the ABI (patch
// always 0); which stable fixes the kernel has depends on the upstream
// version, which Debian prints in uname -v ("#1 SMP Debian 5.10.262-1
// (2026-07-31)"). /proc/version is not read for it: it also holds the
// compiler's Debian version in parentheses.
func KernelVersion() (string, error) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "", err
	}
	release := unix.ByteSliceToString(u.Release[:])
	if up := upstreamVersion(release, unix.ByteSliceToString(u.Version[:])); up != "" {
		return release + " (" + up + ")", nil
	}
	return release, nil
}

// upstreamVersion finds the upstream version in a Debian kernel's uname -v:
// the word after "Debian", without its package revision, when its major and
// minor are the release's; "" when there is none.
func upstreamVersion(release, version string) string {
	words := strings.Fields(version)
	for i := 0; i+1 < len(words); i++ {
		if words[i] != "Debian" {
			continue
		}
		up, _, _ := strings.Cut(words[i+1], "-")
		rel, err1 := ipvs.ParseKernelVersion(release)
		v, err2 := ipvs.ParseKernelVersion(up)
		if err1 == nil && err2 == nil && strings.Count(up, ".") == 2 && v.Major == rel.Major && v.Minor == rel.Minor {
			return up
		}
	}
	return ""
}

// HasIPVS reports whether the kernel has IPVS, as seen from n: moby/ipvs
// reports no error on a kernel without it, so look for /proc/net/ip_vs.
func (n *Namespace) HasIPVS() bool {
	err := n.Do(func() error {
		_, err := os.Stat("/proc/thread-self/net/ip_vs")
		return err
	})
	return err == nil
}

// ErrNoIPVS says the kernel has no IPVS.
var ErrNoIPVS = fmt.Errorf("this kernel has no IPVS (no /proc/net/ip_vs): load ip_vs, or replay in the VM (--dataplane vm); %s", DoctorHint)
