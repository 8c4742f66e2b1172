package netns

import (
	"encoding/binary"
	"fmt"
	"net"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// ARPAnswered sends an ARP request from namespace n, out of dev with source
// address src, asking who has target, and reports whether anyone answered
// within wait: what a peer on the same L2 segment sees of an address bound
// to another host's kube-ipvs0.
func (n *Namespace) ARPAnswered(dev, src, target string, wait time.Duration) (bool, error) {
	var answered bool
	err := n.Do(func() error {
		ifi, err := net.InterfaceByName(dev)
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, int(htons(unix.ETH_P_ARP)))
		if err != nil {
			return fmt.Errorf("raw socket: %w", err)
		}
		defer unix.Close(fd)
		sll := &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ARP), Ifindex: ifi.Index, Halen: 6}
		copy(sll.Addr[:], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ARP), Ifindex: ifi.Index}); err != nil {
			return err
		}
		tip, sip := net.ParseIP(target).To4(), net.ParseIP(src).To4()
		frame := make([]byte, 42)
		copy(frame[0:6], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
		copy(frame[6:12], ifi.HardwareAddr)
		binary.BigEndian.PutUint16(frame[12:], unix.ETH_P_ARP)
		binary.BigEndian.PutUint16(frame[14:], 1)      // Ethernet
		binary.BigEndian.PutUint16(frame[16:], 0x0800) // IPv4
		frame[18], frame[19] = 6, 4
		binary.BigEndian.PutUint16(frame[20:], 1) // request
		copy(frame[22:28], ifi.HardwareAddr)
		copy(frame[28:32], sip)
		copy(frame[38:42], tip)
		if err := unix.Sendto(fd, frame, 0, sll); err != nil {
			return fmt.Errorf("send ARP: %w", err)
		}
		deadline := time.Now().Add(wait)
		buf := make([]byte, 128)
		for time.Now().Before(deadline) {
			tv := unix.NsecToTimeval(int64(time.Until(deadline)))
			if tv.Sec == 0 && tv.Usec == 0 {
				break
			}
			unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
			k, _, err := unix.Recvfrom(fd, buf, 0)
			if err != nil {
				break
			}
			if k >= 42 && binary.BigEndian.Uint16(buf[20:]) == 2 && net.IP(buf[28:32]).Equal(tip) {
				answered = true
				return nil
			}
		}
		return nil
	})
	return answered, err
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// ARPSender makes the node namespace n send a UDP datagram from src (one of
// its addresses, a kube-ipvs0 address for instance) to target, a neighbour
// on n's link dev whose address n has to resolve afresh, and reports the
// sender address of the ARP request n broadcasts for it, as the neighbour
// namespace peer sees it on its link peerDev. The kernel picks that address
// by arp_announce (net/ipv4/arp.c arp_solicit): 0 keeps the datagram's own
// source, 1 keeps it only when it is in the target's subnet, 2 always uses
// the best address of the outgoing interface.
func (n *Namespace) ARPSender(dev, src, target string, peer *Namespace, peerDev string, wait time.Duration) (string, error) {
	// Forget any earlier resolution, so that the datagram asks again.
	h, err := n.netlinkHandle()
	if err != nil {
		return "", err
	}
	link, err := h.LinkByName(dev)
	if err != nil {
		h.Close()
		return "", fmt.Errorf("%s: %s: %w", n.Name, dev, err)
	}
	_ = h.NeighDel(&netlink.Neigh{LinkIndex: link.Attrs().Index, IP: net.ParseIP(target)})
	h.Close()

	// The capture socket is opened in the peer's namespace and stays bound
	// to it; reading it needs no namespace.
	var fd int
	err = peer.Do(func() error {
		ifi, err := net.InterfaceByName(peerDev)
		if err != nil {
			return err
		}
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, int(htons(unix.ETH_P_ARP)))
		if err != nil {
			return fmt.Errorf("raw socket: %w", err)
		}
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ARP), Ifindex: ifi.Index}); err != nil {
			unix.Close(fd)
			return err
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	defer unix.Close(fd)
	err = n.Do(func() error {
		c, err := net.DialUDP("udp4", &net.UDPAddr{IP: net.ParseIP(src)}, &net.UDPAddr{IP: net.ParseIP(target), Port: 9})
		if err != nil {
			return fmt.Errorf("udp from %s to %s: %w", src, target, err)
		}
		defer c.Close()
		_, err = c.Write([]byte("who-has\n"))
		return err
	})
	if err != nil {
		return "", err
	}
	tip := net.ParseIP(target).To4()
	deadline := time.Now().Add(wait)
	buf := make([]byte, 128)
	for time.Now().Before(deadline) {
		tv := unix.NsecToTimeval(int64(time.Until(deadline)))
		if tv.Sec == 0 && tv.Usec == 0 {
			break
		}
		unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
		k, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			break
		}
		if k >= 42 && binary.BigEndian.Uint16(buf[20:]) == 1 && net.IP(buf[38:42]).Equal(tip) {
			return net.IP(buf[28:32]).String(), nil
		}
	}
	return "", fmt.Errorf("no ARP request for %s within %v", target, wait)
}
