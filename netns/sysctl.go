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

// KernelVersion is the running kernel's release ("6.1.0-28-cloud-amd64").
func KernelVersion() (string, error) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "", err
	}
	return unix.ByteSliceToString(u.Release[:]), nil
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
