package netns

import (
	"encoding/binary"
	"fmt"
	"net"
	"time"

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
