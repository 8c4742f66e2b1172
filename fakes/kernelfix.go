package fakes

import "github.com/proxysim/proxysim/sim/ipvs"

// kernelFix is a kernel change one of the fake's rules depends on: the
// mainline release that first had it, and the first release of each stable
// series it was backported to. Distributions ship stable series, so a kernel
// has a fix when it is at least the mainline release, or at least the
// backport of its own series: Debian's 5.10.262 has a 5.16 fix that 5.10.83
// took. Series not listed (say 5.11 to 5.14, ended before the fix) never got
// it.
type kernelFix struct {
	commit   string // mainline commit, and its title
	mainline ipvs.KernelVersion
	stable   []ipvs.KernelVersion
}

// in reports whether kernel v has the fix.
func (f kernelFix) in(v ipvs.KernelVersion) bool {
	if v.Compare(f.mainline) >= 0 {
		return true
	}
	for _, s := range f.stable {
		if s.Major == v.Major && s.Minor == v.Minor && v.Patch >= s.Patch {
			return true
		}
	}
	return false
}

func kv(major, minor, patch int) ipvs.KernelVersion {
	return ipvs.KernelVersion{Major: major, Minor: minor, Patch: patch}
}

// The fixes the fake's version rules follow. Stable versions are those of
// Greg Kroah-Hartman's review series that carried the backport (the
// "[PATCH X.Y NNN/MMM]" mails on stable@vger.kernel.org); a series not named
// had none in the archive.
var (
	// f0a5e4d7a594 "ipvs: allow connection reuse for unconfirmed
	// conntrack" (July 2020): a SYN that reuses a port is rescheduled with
	// its new, unconfirmed conntrack instead of being dropped for the old
	// one under vs/conntrack=1. Mainline 5.9; 5.7.16 and 5.8.2 (review of
	// 17 August 2020).
	fixUnconfirmedConntrack = kernelFix{
		commit:   "f0a5e4d7a594 ipvs: allow connection reuse for unconfirmed conntrack",
		mainline: kv(5, 9, 0),
		stable:   []ipvs.KernelVersion{kv(5, 7, 16), kv(5, 8, 2)},
	}
	// 04231e52d355 "ipvs: queue delayed work to expire no destination
	// connections if expire_nodest_conn=1" (August 2020): deleting a
	// destination drops its entries a jiffy later (ip_vs_ctl.c
	// __ip_vs_del_dest, ip_vs_conn.c ip_vs_expire_nodest_conn_flush), and a
	// packet that still finds such an entry expires it and is scheduled
	// afresh instead of being dropped (ip_vs_core.c ip_vs_in). Mainline 5.9
	// only: no stable series took it.
	fixNodestConnWork = kernelFix{
		commit:   "04231e52d355 ipvs: queue delayed work to expire no destination connections if expire_nodest_conn=1",
		mainline: kv(5, 9, 0),
	}
	// c95c07836fa4 "ipvs: Fix reuse connection if RS weight is 0" (October
	// 2021): with expire_nodest_conn, a SYN whose entry points at a
	// quiescent destination is rescheduled whatever conn_reuse_mode says;
	// before, only under conn_reuse_mode != 0. Mainline 5.16; 4.14.257,
	// 4.19.219, 5.4.163, 5.10.83 and 5.15.6 (reviews of 29 November and
	// 6 December 2021).
	fixQuiescentReuse = kernelFix{
		commit:   "c95c07836fa4 ipvs: Fix reuse connection if RS weight is 0",
		mainline: kv(5, 16, 0),
		stable:   []ipvs.KernelVersion{kv(4, 14, 257), kv(4, 19, 219), kv(5, 4, 163), kv(5, 10, 83), kv(5, 15, 6)},
	}
)
