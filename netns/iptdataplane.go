package netns

import (
	"fmt"
	"net"
	"sync"

	"github.com/proxysim/proxysim/sim/iptables"
)

// IPTablesDataplane is an IPTablesNode as a replay's dataplane: the
// proxier programs its iptables (sim/iptables.Dataplane), the replay
// checks that the kernel holds what was written (Verify), and that real
// connections go where the tracer says (CheckRoute). It is what
// scenarios/iptablesmode.OnKernel opens.
type IPTablesDataplane struct {
	*IPTablesNode
	kernel, version string
	measurements
	syncTimes
}

var _ iptables.Dataplane = (*IPTablesDataplane)(nil)

// OpenIPTablesDataplane creates a node (see NewIPTablesNode) programmed
// through backend b; Close removes it and its pods.
func OpenIPTablesDataplane(b IPTablesBackend, nodeIPs []string) (*IPTablesDataplane, error) {
	ips, kv, err := nodeIPsAndKernel(nodeIPs)
	if err != nil {
		return nil, err
	}
	node, err := NewIPTablesNode(b, ips)
	if err != nil {
		return nil, err
	}
	v, err := node.IPTables.Version()
	if err != nil {
		node.Close()
		return nil, err
	}
	return &IPTablesDataplane{IPTablesNode: node, kernel: kv, version: v}, nil
}

// Name says which kernel and which iptables: "netns, kernel 6.1.0,
// iptables v1.8.9 (nf_tables)".
func (d *IPTablesDataplane) Name() string {
	return fmt.Sprintf("netns, kernel %s, %s", d.kernel, d.version)
}

// The proxier's calls are timed (SyncKernelTimes): each restore ends a
// sync.
func (d *IPTablesDataplane) Restore(payload string) (err error) {
	d.time(false, func() { err = d.IPTables.Restore(payload) })
	d.endSync()
	return err
}
func (d *IPTablesDataplane) Save(table string) (out string, err error) {
	d.time(true, func() { out, err = d.IPTables.Save(table) })
	return out, err
}
func (d *IPTablesDataplane) EnsureChain(table, chain string) (err error) {
	d.time(false, func() { err = d.IPTables.EnsureChain(table, chain) })
	return err
}
func (d *IPTablesDataplane) EnsureRule(table, chain, rule string) (err error) {
	d.time(false, func() { err = d.IPTables.EnsureRule(table, chain, rule) })
	return err
}
func (d *IPTablesDataplane) ChainExists(table, chain string) (bool, error) {
	return d.IPTables.ChainExists(table, chain)
}

// Flush empties a table from outside the proxier (see IPTables.Flush).
func (d *IPTablesDataplane) Flush(table string) error { return d.IPTables.Flush(table) }

// Verify compares the kernel's filter and nat tables with want
// (iptables-save text) by meaning (see CompareSaves).
func (d *IPTablesDataplane) Verify(want string) error {
	got, err := d.IPTables.SaveAll()
	if err != nil {
		return err
	}
	return CompareSaves(want, got)
}

// CheckRoute measures where real connections like pkt go (see Measure)
// and reports a disagreement with predicted as an error.
func (d *IPTablesDataplane) CheckRoute(pkt iptables.Packet, predicted iptables.Shares) error {
	return d.CheckRouteWith(pkt, predicted, nil)
}

// CheckRouteWith is CheckRoute for a prediction made with the clients'
// affinity history (see MeasureWith).
func (d *IPTablesDataplane) CheckRouteWith(pkt iptables.Packet, predicted iptables.Shares, affinity map[string][]string) error {
	return d.record(d.MeasureWith(pkt, predicted, affinity))
}

// measurements are the routes a dataplane checked, in order.
type measurements struct {
	mu       sync.Mutex
	measured []Measurement
}

// record keeps a measurement and says whether the kernel agreed.
func (l *measurements) record(m Measurement, err error) error {
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.measured = append(l.measured, m)
	l.mu.Unlock()
	return m.Agrees()
}

// Measurements are the routes checked so far, in order.
func (l *measurements) Measurements() []Measurement {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Measurement(nil), l.measured...)
}

// nodeIPsAndKernel parses a dataplane's node IPs and reads the kernel's
// version.
func nodeIPsAndKernel(nodeIPs []string) ([]net.IP, string, error) {
	ips, err := parseIPs(nodeIPs)
	if err != nil {
		return nil, "", err
	}
	kv, err := KernelVersion()
	return ips, kv, err
}

func parseIPs(list []string) ([]net.IP, error) {
	var out []net.IP
	for _, s := range list {
		ip := net.ParseIP(s).To4()
		if ip == nil {
			return nil, fmt.Errorf("node IP %q is not an IPv4 address", s)
		}
		out = append(out, ip)
	}
	return out, nil
}
