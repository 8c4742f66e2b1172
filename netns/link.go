package netns

import (
	"fmt"
	"net"
	"sort"
	"syscall"

	"github.com/vishvananda/netlink"

	"github.com/proxysim/proxysim/sim/ipvs"
)

// netlinkHandle opens a route-only netlink handle in n (the cloud kernels
// have no xfrm, which the default handle asks for).
func (n *Namespace) netlinkHandle() (*netlink.Handle, error) {
	return netlink.NewHandleAt(n.handle, syscall.NETLINK_ROUTE)
}

func (n *Namespace) linkUp(name string) error {
	h, err := n.netlinkHandle()
	if err != nil {
		return err
	}
	defer h.Close()
	l, err := h.LinkByName(name)
	if err != nil {
		return fmt.Errorf("%s: %s: %w", n.Name, name, err)
	}
	return h.LinkSetUp(l)
}

// Veth joins a and b with a veth pair: aName in a with aAddr (CIDR), bName
// in b with bAddr. Both ends come up.
func Veth(a *Namespace, aName, aAddr string, b *Namespace, bName, bAddr string) error {
	h, err := a.netlinkHandle()
	if err != nil {
		return err
	}
	defer h.Close()
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: aName}, PeerName: bName, PeerNamespace: netlink.NsFd(b.handle)}
	if err := h.LinkAdd(veth); err != nil {
		return fmt.Errorf("veth %s/%s: %w", a.Name, aName, err)
	}
	if err := a.AddrAdd(aName, aAddr); err != nil {
		return err
	}
	return b.AddrAdd(bName, bAddr)
}

// AddrAdd puts a CIDR address on a link and brings the link up.
func (n *Namespace) AddrAdd(link, cidr string) error {
	h, err := n.netlinkHandle()
	if err != nil {
		return err
	}
	defer h.Close()
	l, err := h.LinkByName(link)
	if err != nil {
		return fmt.Errorf("%s: %s: %w", n.Name, link, err)
	}
	addr, err := netlink.ParseAddr(cidr)
	if err != nil {
		return err
	}
	if err := h.AddrAdd(l, addr); err != nil {
		return fmt.Errorf("%s: add %s to %s: %w", n.Name, cidr, link, err)
	}
	return h.LinkSetUp(l)
}

// DefaultRoute routes everything via gw.
func (n *Namespace) DefaultRoute(gw string) error {
	h, err := n.netlinkHandle()
	if err != nil {
		return err
	}
	defer h.Close()
	return h.RouteAdd(&netlink.Route{Gw: net.ParseIP(gw)})
}

// AddressBinder manages addresses on a dummy device in a namespace: the
// kube-ipvs0 of the real kernel.
type AddressBinder struct{ ns *Namespace }

var _ ipvs.AddressBinder = AddressBinder{}

// Binder returns n's address binder.
func (n *Namespace) Binder() AddressBinder { return AddressBinder{n} }

// EnsureDevice creates the dummy device if it is missing and leaves it
// down, as kube-proxy does (pkg/proxy/ipvs netlinkHandle.EnsureDummyDevice
// only adds the link): an IPv4 address on a down device still gets its
// local route, and a down device gets no IPv6 link-local address.
func (b AddressBinder) EnsureDevice(dev string) error {
	h, err := b.ns.netlinkHandle()
	if err != nil {
		return err
	}
	defer h.Close()
	if _, err := h.LinkByName(dev); err == nil {
		return nil
	}
	if err := h.LinkAdd(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: dev}}); err != nil {
		return fmt.Errorf("%s: create dummy %s: %w", b.ns.Name, dev, err)
	}
	return nil
}

func (b AddressBinder) Addresses(dev string) ([]string, error) {
	h, err := b.ns.netlinkHandle()
	if err != nil {
		return nil, err
	}
	defer h.Close()
	l, err := h.LinkByName(dev)
	if err != nil {
		return nil, err
	}
	addrs, err := h.AddrList(l, netlink.FAMILY_ALL)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(addrs))
	for _, a := range addrs {
		if a.IP.IsLinkLocalUnicast() {
			continue
		}
		out = append(out, a.IP.String())
	}
	sort.Strings(out)
	return out, nil
}

func (b AddressBinder) hostAddr(addr string) (*netlink.Addr, error) {
	ip := net.ParseIP(addr)
	if ip == nil {
		return nil, fmt.Errorf("bad address %q", addr)
	}
	bits := 32
	if ip.To4() == nil {
		bits = 128
	}
	return &netlink.Addr{IPNet: &net.IPNet{IP: ip, Mask: net.CIDRMask(bits, bits)}}, nil
}

func (b AddressBinder) change(dev, addr string, add bool) error {
	h, err := b.ns.netlinkHandle()
	if err != nil {
		return err
	}
	defer h.Close()
	l, err := h.LinkByName(dev)
	if err != nil {
		return err
	}
	a, err := b.hostAddr(addr)
	if err != nil {
		return err
	}
	if add {
		return h.AddrAdd(l, a)
	}
	return h.AddrDel(l, a)
}

func (b AddressBinder) Bind(dev, addr string) error   { return b.change(dev, addr, true) }
func (b AddressBinder) Unbind(dev, addr string) error { return b.change(dev, addr, false) }
