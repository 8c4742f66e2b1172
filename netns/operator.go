package netns

import (
	"strconv"
	"time"

	"github.com/proxysim/proxysim/sim/ipvs"
)

var (
	_ ipvs.Sender        = (*Topology)(nil)
	_ ipvs.TimeoutReader = (*IPVS)(nil)
)

// ReadTimeouts reads the namespace's IPVS timeouts (IPVS_CMD_GET_CONFIG).
func (i *IPVS) ReadTimeouts() (ipvs.Timeouts, error) {
	c, err := i.h.GetConfig()
	if err != nil {
		return ipvs.Timeouts{}, err
	}
	return ipvs.Timeouts{TCP: c.TimeoutTCP, TCPFin: c.TimeoutTCPFin, UDP: c.TimeoutUDP}, nil
}

// ARP asks, from the client's segment, whether anyone answers for addr.
func (t *Topology) ARP(addr string) (bool, error) {
	return t.Client.ARPAnswered("eth0", ClientIPs[0], addr, time.Second)
}

// ARPSender reports the sender address in the ARP request the node sends
// when a datagram from src (a kube-ipvs0 address) leaves for a neighbour on
// the client's segment (10.0.0.9, resolved afresh).
func (t *Topology) ARPSender(src string) (string, error) {
	return t.Node.ARPSender("c0", src, ClientIPs[len(ClientIPs)-1], t.Client, "eth0", time.Second)
}

// OpenTopology builds a topology with two backends (10.244.1.2 and
// 10.244.2.2, port 8080) and returns its node's IPVS dataplane, the
// topology (its client's traffic) and how to remove it all: what a replay
// with client connections needs on this kernel.
func OpenTopology() (ipvs.Dataplane, *Topology, func() error, error) {
	topo, err := BuildTopology(2)
	if err != nil {
		return ipvs.Dataplane{}, nil, nil, err
	}
	dp, h, err := topo.Node.Dataplane()
	if err != nil {
		topo.Destroy()
		return ipvs.Dataplane{}, nil, nil, err
	}
	topo.ConnectTimeout = 3 * time.Second
	return dp, topo, func() error { h.Close(); return topo.Destroy() }, nil
}

// expiresOf reads ip_vs_conn's Expires column (whole seconds).
func expiresOf(field string) time.Duration {
	n, err := strconv.Atoi(field)
	if err != nil {
		return 0
	}
	return time.Duration(n) * time.Second
}
