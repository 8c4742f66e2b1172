package ipvs

import (
	"fmt"
	"strconv"
	"strings"
)

// Sysctl names the proxier manages.
const (
	SysctlConntrack               = "net/ipv4/vs/conntrack"
	SysctlConnReuseMode           = "net/ipv4/vs/conn_reuse_mode"
	SysctlExpireNodestConn        = "net/ipv4/vs/expire_nodest_conn"
	SysctlExpireQuiescentTemplate = "net/ipv4/vs/expire_quiescent_template"
	SysctlIPForward               = "net/ipv4/ip_forward"
	SysctlArpIgnore               = "net/ipv4/conf/all/arp_ignore"
	SysctlArpAnnounce             = "net/ipv4/conf/all/arp_announce"
)

// KernelVersion is a parsed "major.minor.patch" kernel release.
type KernelVersion struct{ Major, Minor, Patch int }

// ParseKernelVersion reads the leading numbers of a release string such as
// "6.1.0-28-cloud-amd64" or "5.4".
func ParseKernelVersion(s string) (KernelVersion, error) {
	var v KernelVersion
	fields := strings.SplitN(strings.TrimSpace(s), ".", 3)
	if len(fields) < 2 {
		return v, fmt.Errorf("kernel version %q: want MAJOR.MINOR[.PATCH]", s)
	}
	nums := make([]int, 3)
	for i, f := range fields {
		end := 0
		for end < len(f) && f[end] >= '0' && f[end] <= '9' {
			end++
		}
		if end == 0 {
			if i < 2 {
				return v, fmt.Errorf("kernel version %q: want MAJOR.MINOR[.PATCH]", s)
			}
			break
		}
		nums[i], _ = strconv.Atoi(f[:end])
	}
	return KernelVersion{nums[0], nums[1], nums[2]}, nil
}

// AtLeast reports whether v >= major.minor.
func (v KernelVersion) AtLeast(major, minor int) bool {
	return v.Major > major || (v.Major == major && v.Minor >= minor)
}

func (v KernelVersion) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// ConnReuseModeDecision is what kube-proxy does with conn_reuse_mode on a
// kernel: before 4.1 the sysctl does not exist (kube-proxy logs an error);
// from 4.1 up to 5.9 it sets 0, to avoid the 1-second first-SYN drop that mode
// 1 caused there; from 5.9 the kernel fixed that and the value is left alone.
func ConnReuseModeDecision(v KernelVersion) (set bool, value int, note string) {
	switch {
	case !v.AtLeast(4, 1):
		return false, 0, fmt.Sprintf("kernel %s has no %s; leaving it", v, SysctlConnReuseMode)
	case !v.AtLeast(5, 9):
		return true, 0, ""
	default:
		return false, 0, ""
	}
}

// StartupSysctls lists the sysctls the proxier sets at startup, in the order
// it sets them, for a kernel version and strictARP setting; notes explain what
// it leaves alone.
func StartupSysctls(v KernelVersion, strictARP bool) (values []SysctlValue, notes []string) {
	values = append(values, SysctlValue{SysctlConntrack, 1})
	if set, val, note := ConnReuseModeDecision(v); set {
		values = append(values, SysctlValue{SysctlConnReuseMode, val})
	} else if note != "" {
		notes = append(notes, note)
	}
	values = append(values,
		SysctlValue{SysctlExpireNodestConn, 1},
		SysctlValue{SysctlExpireQuiescentTemplate, 1},
		SysctlValue{SysctlIPForward, 1},
	)
	if strictARP {
		values = append(values, SysctlValue{SysctlArpIgnore, 1}, SysctlValue{SysctlArpAnnounce, 2})
	}
	return values, notes
}

// SysctlValue is one sysctl setting.
type SysctlValue struct {
	Name  string
	Value int
}
