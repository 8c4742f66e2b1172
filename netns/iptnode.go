package netns

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
)

// IPTablesNode is a ProxyNode whose iptables hold a proxy's rules.
type IPTablesNode struct {
	*ProxyNode
	IPTables *IPTables
}

// NewIPTablesNode creates a node (see NewProxyNode) and its iptables through
// backend b. Close removes it and every pod.
func NewIPTablesNode(b IPTablesBackend, nodeIPs []net.IP) (_ *IPTablesNode, err error) {
	if !Privileged() {
		return nil, fmt.Errorf("the netns iptables dataplane needs root")
	}
	if _, err := LookIPTables(b); err != nil {
		return nil, err
	}
	node, err := NewProxyNode(nodeIPs)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			node.Close()
		}
	}()
	ipt, err := node.NS.IPTables(b)
	if err != nil {
		return nil, err
	}
	// kube-proxy's NewProxier sets route_localnet so that node ports
	// answer on 127.0.0.1 (pkg/proxy/iptables/proxier.go, with localhost
	// node ports on, the default).
	if err = node.NS.Sysctl().Set("net/ipv4/conf/all/route_localnet", 1); err != nil {
		return nil, err
	}
	return &IPTablesNode{ProxyNode: node, IPTables: ipt}, nil
}

// Spray opens count new connections from from to to and counts who
// answered. With forget, every connection starts with the node's
// `recent` lists emptied (no ClientIP affinity history, as the tracer
// assumes), so they run one at a time; otherwise several run at once.
func (n *IPTablesNode) Spray(protocol, from, to string, count int, forget bool) (map[string]int, error) {
	var prepare func() error
	if forget {
		prepare = n.ForgetAffinity
	}
	return n.spray(protocol, from, to, count, trial{prepare: prepare})
}

// ForgetAffinity empties every `recent` list in the node: what ClientIP
// affinity remembers.
func (n *IPTablesNode) ForgetAffinity() error { return n.SetAffinity(nil) }

// SetAffinity makes the node's `recent` lists hold exactly the given
// client addresses, list by list (a list is named after an endpoint's
// KUBE-SEP chain), each as if just seen; every other list is emptied. It
// writes to /proc/net/xt_recent: "/" empties a list, "+ip" adds an
// address. A list that no loaded rule names does not exist, and is an
// error.
func (n *IPTablesNode) SetAffinity(lists map[string][]string) error {
	return n.NS.Do(func() error {
		dir := "/proc/thread-self/net/xt_recent"
		entries, err := os.ReadDir(dir)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		for _, e := range entries {
			if err := os.WriteFile(filepath.Join(dir, e.Name()), []byte("/\n"), 0o600); err != nil {
				return fmt.Errorf("empty recent list %s: %w", e.Name(), err)
			}
		}
		for _, name := range slices.Sorted(maps.Keys(lists)) {
			for _, ip := range lists[name] {
				if err := os.WriteFile(filepath.Join(dir, name), []byte("+"+ip+"\n"), 0o600); err != nil {
					return fmt.Errorf("recent list %s: add %s: %w", name, ip, err)
				}
			}
		}
		return nil
	})
}

// HasAffinityLists reports whether the node has any `recent` list, i.e.
// rules with ClientIP affinity were loaded.
func (n *IPTablesNode) HasAffinityLists() bool {
	found := false
	n.NS.Do(func() error {
		entries, _ := os.ReadDir("/proc/thread-self/net/xt_recent")
		found = len(entries) > 0
		return nil
	})
	return found
}
