package netns

import (
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/proxysim/proxysim/sim/ipvs"
	"github.com/proxysim/proxysim/sim/route"
)

// IPVSPathNode is a ProxyNode (pods around a node namespace) that holds the
// whole packet path of kube-proxy's IPVS mode: IPVS and its kube-ipvs0
// dummy device, and the ipsets and iptables rules the mode writes next to
// them (through iptables' legacy backend, which the VM's kernels carry as
// modules). Real connections from the pods, the node and off-cluster
// addresses (pods too, routed to the node like any other) then check where
// the tracer says they go (CheckRoute), and whether they arrive
// masqueraded.
type IPVSPathNode struct {
	*ProxyNode
	// Dataplane is what the proxier programs: the kernel's IPVS,
	// addresses, sysctls, ipsets and iptables.
	Dataplane ipvs.Dataplane
	IPSets    *IPSets
	IPTables  *IPTables
	handle    *IPVS
	measurements
}

// IPVSPathBackend is the iptables backend of the IPVS packet path.
const IPVSPathBackend = Legacy

// IPVSPerOutcome is the connections per predicted outcome of a spread
// through the IPVS packet path: with the chi-square test at Significance,
// enough to fail 1/2, 1/4, 1/4 claimed for three endpoints that get 1/3
// each (N 200, as the rarest claimed share must expect 50: an expected
// statistic of 22.2 against a bound of 13.8) or 3/4, 1/4 claimed for two
// that get 1/2 (N 200, 66.7 against 10.8); few enough for the VM.
const IPVSPerOutcome = 50

// IPVSPathTimeout bounds one connection through the IPVS packet path.
const IPVSPathTimeout = 5 * time.Second

// OpenIPVSPathNode creates the node with nodeIPs on lo. It fails without
// root, IPVS, ipset or iptables' legacy tools.
func OpenIPVSPathNode(nodeIPs []string) (_ *IPVSPathNode, err error) {
	ips, kv, err := nodeIPsAndKernel(nodeIPs)
	if err != nil {
		return nil, err
	}
	if _, err := LookIPSet(); err != nil {
		return nil, err
	}
	if _, err := LookIPTables(IPVSPathBackend); err != nil {
		return nil, err
	}
	node, err := NewProxyNode(ips)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			node.Close()
		}
	}()
	h, err := node.NS.NewIPVS()
	if err != nil {
		return nil, err
	}
	sets, err := node.NS.IPSets()
	if err != nil {
		h.Close()
		return nil, err
	}
	ipt, err := node.NS.IPTables(IPVSPathBackend)
	if err != nil {
		h.Close()
		return nil, err
	}
	binder := node.NS.Binder()
	// An address on kube-ipvs0 (a ClusterIP, an LB IP) is the node's own:
	// a connection from it, as kube-proxy's KUBE-IPVS-OUT-FILTER has in
	// mind, starts on the node.
	node.alsoLocal = func(ip net.IP) bool {
		bound, err := binder.Addresses(ipvs.DummyDevice)
		return err == nil && slices.Contains(bound, ip.String())
	}
	// Under QEMU's software emulation on a busy host a connection can take
	// seconds; a spread is held to fewer connections than on the host
	// (IPVSPerOutcome).
	node.Timeout = IPVSPathTimeout
	node.PerOutcome = IPVSPerOutcome
	return &IPVSPathNode{
		ProxyNode: node, IPSets: sets, IPTables: ipt, handle: h,
		Dataplane: ipvs.Dataplane{IPVS: h, Addresses: binder, Sysctl: node.NS.Sysctl(), KernelVersion: kv, IPSets: sets, IPTables: ipt},
	}, nil
}

// Close removes the node and its pods.
func (n *IPVSPathNode) Close() error {
	n.handle.Close()
	return n.ProxyNode.Close()
}

// Verify compares the kernel's ipsets with wantSets (ipvs.SaveIPSets's
// text) and its filter and nat tables with wantRules (iptables-save text,
// by meaning: see CompareSaves).
func (n *IPVSPathNode) Verify(wantSets, wantRules string) error {
	saved, err := n.IPSets.saved()
	if err != nil {
		return err
	}
	got, err := ipvs.SaveIPSets(saved)
	if err != nil {
		return err
	}
	if got != wantSets {
		return fmt.Errorf("the kernel holds other ipsets than were written:\nwritten:\n%skernel:\n%s", wantSets, got)
	}
	rules, err := n.IPTables.SaveAll()
	if err != nil {
		return err
	}
	return CompareSaves(wantRules, rules)
}

// CheckRoute measures where real connections like pkt go and whether
// their endpoints see them masqueraded, against the tracer's shares and
// masqueraded parts, and reports a disagreement as an error. A persistent
// virtual server's templates are not cleared between connections: a
// spread through one is the caller's to avoid.
func (n *IPVSPathNode) CheckRoute(pkt route.Packet, predicted, masq route.Shares) error {
	if masq == nil {
		masq = route.Shares{}
	}
	return n.record(n.measure(pkt, predicted, trial{masq: masq}))
}

// Programmed is the dataplane the proxier programs (see Dataplane).
func (n *IPVSPathNode) Programmed() ipvs.Dataplane { return n.Dataplane }
