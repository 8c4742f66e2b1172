package fakes

import (
	"fmt"
	"net/netip"

	"github.com/proxysim/proxysim/sim/ipvs"
)

// Host is a node's interfaces and addresses as ARP sees them: which
// addresses it answers for on which interface (arp_ignore), and which
// sender address its own requests name (arp_announce), by the rules of
// net/ipv4/arp.c. kube-ipvs0's addresses are read from the fake binder when
// asked, so they follow the proxier's syncs.
type Host struct {
	Links   []Link
	Binder  *Dummy      // kube-ipvs0 and any other dummy device
	Sysctls ipvs.Sysctl // conf/all/arp_ignore and arp_announce
}

// Link is one interface and its addresses, in the order they were added.
type Link struct {
	Name  string
	Addrs []netip.Prefix
	// HostScope marks an interface whose addresses have host scope (lo).
	HostScope bool
}

// iface is a link with its addresses resolved, kube-ipvs0's included.
type iface struct {
	name      string
	addrs     []netip.Prefix
	hostScope bool
}

func (h *Host) interfaces() ([]iface, error) {
	var out []iface
	for _, l := range h.Links {
		out = append(out, iface{l.Name, l.Addrs, l.HostScope})
	}
	if h.Binder == nil {
		return out, nil
	}
	h.Binder.mu.Lock()
	devs := make([]string, 0, len(h.Binder.devices))
	for dev := range h.Binder.devices {
		devs = append(devs, dev)
	}
	h.Binder.mu.Unlock()
	for _, dev := range devs {
		addrs, err := h.Binder.Addresses(dev)
		if err != nil {
			return nil, err
		}
		f := iface{name: dev}
		for _, a := range addrs {
			ip, err := netip.ParseAddr(a)
			if err != nil {
				return nil, fmt.Errorf("%s: address %q: %w", dev, a, err)
			}
			// kube-proxy binds a service address as a /32 of global scope.
			f.addrs = append(f.addrs, netip.PrefixFrom(ip, ip.BitLen()))
		}
		out = append(out, f)
	}
	return out, nil
}

// local reports whether ip is one of the host's addresses (a RTN_LOCAL
// route: any interface, any scope).
func local(ifs []iface, ip netip.Addr) bool {
	for _, f := range ifs {
		for _, p := range f.addrs {
			if p.Addr() == ip {
				return true
			}
		}
	}
	return false
}

func find(ifs []iface, name string) (iface, error) {
	for _, f := range ifs {
		if f.name == name {
			return f, nil
		}
	}
	return iface{}, fmt.Errorf("link %s not found", name)
}

// AnswersARP reports whether the host answers an ARP request that arrives
// on interface in from sender asking who has target (arp.c arp_process: the
// target must be a local address, not loopback or multicast, and
// arp_ignore, the larger of conf/all and the interface's, must let it
// through; the interfaces' own values are 0 here). arp_ignore (arp.c
// arp_ignore, inet_confirm_addr):
//   - 0: any local address, configured on any interface;
//   - 1: only an address configured on the incoming interface;
//   - 2: as 1, and the sender in a subnet of that interface holding both;
//   - 3: any local address but those of host scope;
//   - 4-7 (reserved) as 0; 8: none.
func (h *Host) AnswersARP(in string, sender, target netip.Addr) (bool, error) {
	ifs, err := h.interfaces()
	if err != nil {
		return false, err
	}
	inIf, err := find(ifs, in)
	if err != nil {
		return false, err
	}
	if target.IsLoopback() || target.IsMulticast() || !local(ifs, target) {
		return false, nil
	}
	ignore, err := h.Sysctls.Get(ipvs.SysctlArpIgnore)
	if err != nil {
		return false, err
	}
	switch ignore {
	case 1, 2:
		configured, shared := false, ignore == 1
		for _, p := range inIf.addrs {
			configured = configured || p.Addr() == target
			shared = shared || (p.Contains(target) && p.Contains(sender))
		}
		return configured && shared, nil
	case 3:
		for _, f := range ifs {
			for _, p := range f.addrs {
				if p.Addr() == target && !f.hostScope {
					return true, nil
				}
			}
		}
		return false, nil
	case 8:
		return false, nil
	default:
		return true, nil
	}
}

// ARPSender is the sender address the host names in the ARP request it
// broadcasts on interface out to resolve target, for a datagram from src
// (arp.c arp_solicit, by arp_announce, the larger of conf/all and the
// interface's):
//   - 0: src, when it is a local address;
//   - 1: src, when it is local and a subnet of out holds both it and target;
//   - 2, and otherwise: out's own address for target (inet_select_addr:
//     the first address of out whose subnet holds target, else out's first
//     address).
func (h *Host) ARPSender(out string, src, target netip.Addr) (netip.Addr, error) {
	ifs, err := h.interfaces()
	if err != nil {
		return netip.Addr{}, err
	}
	outIf, err := find(ifs, out)
	if err != nil {
		return netip.Addr{}, err
	}
	announce, err := h.Sysctls.Get(ipvs.SysctlArpAnnounce)
	if err != nil {
		return netip.Addr{}, err
	}
	switch announce {
	case 0:
		if local(ifs, src) {
			return src, nil
		}
	case 1:
		if local(ifs, src) {
			for _, p := range outIf.addrs {
				if p.Contains(src) && p.Contains(target) {
					return src, nil
				}
			}
		}
	}
	for _, p := range outIf.addrs {
		if p.Contains(target) {
			return p.Addr(), nil
		}
	}
	if len(outIf.addrs) == 0 {
		return netip.Addr{}, fmt.Errorf("link %s has no address to send ARP from", out)
	}
	return outIf.addrs[0].Addr(), nil
}
