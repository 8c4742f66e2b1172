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

// KernelVersion is a parsed "major.minor.patch" kernel version: the
// upstream version when the release string carries it, which is what decides
// whether a stable fix is in.
type KernelVersion struct{ Major, Minor, Patch int }

// ParseKernelVersion reads a kernel release such as "6.1.0-28-cloud-amd64",
// "6.12.117" or "5.4". A distribution's release names an ABI, not the upstream
// version (Debian's 5.10.0-46-cloud-amd64 is upstream 5.10.262), so the
// upstream version may follow in parentheses, as netns.KernelVersion reports
// it: "5.10.0-46-cloud-amd64 (5.10.262)"; "(Debian 5.10.262-1)", as uname -v
// prints it, reads the same. When present, it is the version.
func ParseKernelVersion(s string) (KernelVersion, error) {
	s = strings.TrimSpace(s)
	release, upstream, paren := strings.Cut(s, "(")
	if !paren {
		return parseVersionNumbers(s, s)
	}
	upstream, closed := strings.CutSuffix(strings.TrimSpace(upstream), ")")
	if !closed || strings.Contains(upstream, "(") {
		return KernelVersion{}, fmt.Errorf("kernel version %q: want RELEASE or RELEASE (UPSTREAM), e.g. 5.10.0-46-cloud-amd64 (5.10.262)", s)
	}
	if _, err := parseVersionNumbers(s, release); err != nil {
		return KernelVersion{}, err
	}
	fields := strings.Fields(upstream)
	if len(fields) == 2 && fields[0] == "Debian" {
		fields = fields[1:]
	}
	if len(fields) != 1 {
		return KernelVersion{}, fmt.Errorf("kernel version %q: the upstream version in parentheses should be MAJOR.MINOR.PATCH, got %q", s, upstream)
	}
	v, err := parseVersionNumbers(s, fields[0])
	if err != nil {
		return v, err
	}
	if strings.Count(fields[0], ".") < 2 {
		return v, fmt.Errorf("kernel version %q: the upstream version in parentheses should be MAJOR.MINOR.PATCH, got %q", s, upstream)
	}
	if rel, _ := parseVersionNumbers(s, release); rel.Major != v.Major || rel.Minor != v.Minor {
		return v, fmt.Errorf("kernel version %q: release %d.%d and upstream %d.%d differ", s, rel.Major, rel.Minor, v.Major, v.Minor)
	}
	return v, nil
}

// parseVersionNumbers reads the leading MAJOR.MINOR[.PATCH] of text; whole is
// the string the error names.
func parseVersionNumbers(whole, text string) (KernelVersion, error) {
	var v KernelVersion
	fields := strings.SplitN(strings.TrimSpace(text), ".", 3)
	if len(fields) < 2 {
		return v, fmt.Errorf("kernel version %q: want MAJOR.MINOR[.PATCH]", whole)
	}
	nums := make([]int, 3)
	for i, f := range fields {
		end := 0
		for end < len(f) && f[end] >= '0' && f[end] <= '9' {
			end++
		}
		if end == 0 {
			if i < 2 {
				return v, fmt.Errorf("kernel version %q: want MAJOR.MINOR[.PATCH]", whole)
			}
			break
		}
		nums[i], _ = strconv.Atoi(f[:end])
	}
	return KernelVersion{nums[0], nums[1], nums[2]}, nil
}

// AtLeast reports whether v >= major.minor.
func (v KernelVersion) AtLeast(major, minor int) bool {
	return v.Compare(KernelVersion{major, minor, 0}) >= 0
}

// Compare orders two versions: -1, 0 or +1 as v is older than, the same as
// or newer than o.
func (v KernelVersion) Compare(o KernelVersion) int {
	for _, d := range [3]int{v.Major - o.Major, v.Minor - o.Minor, v.Patch - o.Patch} {
		if d < 0 {
			return -1
		}
		if d > 0 {
			return 1
		}
	}
	return 0
}

func (v KernelVersion) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// ConnReuseModeDecision is what kube-proxy does with conn_reuse_mode on a
// kernel: before 4.1 the sysctl does not exist (kube-proxy logs an error);
// from 4.1 up to 5.9 it sets 0, to avoid the 1-second first-SYN drop that mode
// 1 caused there; from 5.9 the kernel fixed that and the value is left alone.
// kube-proxy reads the release (uname -r: 5.10.0 on Debian's 5.10.262), but
// its thresholds are all .0 versions, so the upstream version decides alike.
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
