package netns

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"

	"sigs.k8s.io/knftables"

	"github.com/proxysim/proxysim/sim/nftables"
	"github.com/proxysim/proxysim/sim/route"
)

// NFTablesDataplane is a ProxyNode whose nftables hold a proxy's kube-proxy
// table (IPv4), as a replay's dataplane: the proxier programs it through
// the real nft (knftables.Interface), the replay checks that the kernel
// holds what a fake holds (Verify), and that real connections go where
// the tracer says (CheckRoute). It is what scenarios/nftablesmode.OnKernel
// opens.
type NFTablesDataplane struct {
	*ProxyNode
	*NFTables
	kernel, version string
	measurements
	syncTimes
}

// The proxier's transactions and listings are timed (SyncKernelTimes): the
// transaction after a whole-table listing ends a sync.

func (d *NFTablesDataplane) Run(ctx context.Context, tx *knftables.Transaction) (err error) {
	d.time(false, func() { err = d.NFTables.Run(ctx, tx) })
	if d.listed {
		d.listed = false
		d.endSync()
	}
	return err
}

func (d *NFTablesDataplane) ListAll(ctx context.Context) (out map[string][]string, err error) {
	d.time(true, func() { out, err = d.NFTables.ListAll(ctx) })
	d.listed = true
	return out, err
}

func (d *NFTablesDataplane) ListElements(ctx context.Context, objectType, name string) (out []*knftables.Element, err error) {
	d.time(true, func() { out, err = d.NFTables.ListElements(ctx, objectType, name) })
	return out, err
}

// OpenNFTablesDataplane creates a node (see NewProxyNode) with the given node
// IPs and the real kube-proxy table interface in it; Close removes it and
// its pods.
func OpenNFTablesDataplane(nodeIPs []string) (*NFTablesDataplane, error) {
	ips, kv, err := nodeIPsAndKernel(nodeIPs)
	if err != nil {
		return nil, err
	}
	out, err := exec.Command("nft", "--version").Output()
	if errors.Is(err, exec.ErrNotFound) {
		return nil, fmt.Errorf("nft is not installed (the nftables mode's netns dataplane runs it; Debian's and Ubuntu's package nftables): %s", DoctorHint)
	}
	if err != nil {
		return nil, fmt.Errorf("nft --version: %w", err)
	}
	version, _, _ := strings.Cut(strings.TrimSpace(string(out)), " (")
	node, err := NewProxyNode(ips)
	if err != nil {
		return nil, err
	}
	nft, err := node.NS.NFTables(knftables.IPv4Family, nftables.Table)
	if err != nil {
		node.Close()
		return nil, err
	}
	return &NFTablesDataplane{ProxyNode: node, NFTables: nft, kernel: kv, version: version}, nil
}

// Name says which kernel and which nft: "netns, kernel 6.1.0, nftables
// v1.0.6".
func (d *NFTablesDataplane) Name() string {
	return fmt.Sprintf("netns, kernel %s, %s", d.kernel, d.version)
}

// CheckRoute measures where real connections like pkt go, each trial run
// as p says (its affinity sets emptied before it, and between the two
// connections of a pair), and reports a disagreement with predicted as an
// error.
func (d *NFTablesDataplane) CheckRoute(pkt route.Packet, predicted route.Shares, p nftables.Probe) error {
	var t trial
	if len(p.Forget) > 0 && (len(predicted) > 1 || p.Again) {
		t.prepare = func() error { return d.flushSets(p.Forget) }
	}
	t.again = p.Again
	if len(p.Expire) > 0 {
		t.between = func() error { return d.flushSets(p.Expire) }
	}
	return d.record(d.measure(pkt, predicted, t))
}

// flushSets empties the named sets of the kube-proxy table.
func (d *NFTablesDataplane) flushSets(names []string) error {
	tx := d.NFTables.NewTransaction()
	for _, n := range names {
		tx.Flush(&knftables.Set{Name: n})
	}
	return d.NFTables.Run(context.Background(), tx)
}
