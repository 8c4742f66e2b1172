package netns

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
)

// IPTablesNode is a node whose iptables hold a proxy's rules, with pods
// around it: one namespace per pod IP, joined to the node by its own veth
// pair and created the first time the IP is needed (as a client or as an
// endpoint), so any scenario's addresses can be served:
//
//	pod 10.244.1.2/32 ─ eth0 169.254.0.6/30 ── p1 169.254.0.5/30 ─ node (lo: nodeIPs)
//
// The node forwards between pods and routes each pod IP to its veth; it has
// no default route, so a packet the rules leave alone towards an address
// nobody has is unreachable. Pods answer TCP and UDP with their own
// "ip:port" and close, so a client learns which endpoint the kernel chose.
type IPTablesNode struct {
	NS       *Namespace
	IPTables *IPTables
	NodeIPs  []net.IP
	// Timeout bounds one connection, connect and answer (default 2s): a
	// dropped packet shows as a timeout.
	Timeout time.Duration

	mu     sync.Mutex
	pods   map[string]*Pod
	own    *servers // the node's own listeners, on its node IPs
	world  *Namespace
	closed bool
}

// Pod is one pod namespace with one address.
type Pod struct {
	NS *Namespace
	IP string
	*servers
}

// Outcomes of a connection besides an endpoint's "ip:port".
const (
	OutcomeRefused     = "REFUSED"     // ICMP port unreachable or a reset: REJECT, or no listener
	OutcomeTimeout     = "TIMEOUT"     // nothing came back: DROP
	OutcomeUnreachable = "UNREACHABLE" // no route on the way: delivered unchanged to nobody
)

// NewIPTablesNode creates the node namespace, with forwarding on and the
// node IPs on a dummy device, and its iptables through backend b. Close
// removes it and every pod.
func NewIPTablesNode(b IPTablesBackend, nodeIPs []net.IP) (_ *IPTablesNode, err error) {
	if !Privileged() {
		return nil, fmt.Errorf("the netns iptables dataplane needs root")
	}
	if _, err := LookIPTables(b); err != nil {
		return nil, err
	}
	ns, err := Create("node")
	if err != nil {
		return nil, err
	}
	node := &IPTablesNode{NS: ns, NodeIPs: nodeIPs, Timeout: 2 * time.Second, pods: map[string]*Pod{}}
	defer func() {
		if err != nil {
			node.Close()
		}
	}()
	node.own = &servers{ns: ns}
	if node.IPTables, err = ns.IPTables(b); err != nil {
		return nil, err
	}
	if err = ns.Sysctl().Set("net/ipv4/ip_forward", 1); err != nil {
		return nil, err
	}
	// Without a default route a connection from the node to a ClusterIP
	// fails its route lookup before nat OUTPUT can translate it, and a
	// packet to be forwarded fails before filter FORWARD can reject it:
	// the node routes everything else to a world namespace that forwards
	// nothing (so what the rules let through to nobody is lost).
	world, err := Create("world")
	if err != nil {
		return nil, err
	}
	node.world = world
	if err = Veth(ns, "up0", worldNode+"/30", world, "eth0", worldPeer+"/30"); err != nil {
		return nil, err
	}
	if err = ns.DefaultRoute(worldPeer); err != nil {
		return nil, err
	}
	// REJECT answers with ICMP, which the kernel rate-limits per
	// destination (one a second after a burst of six): off, so every
	// rejected connection is refused, not timed out.
	if err = ns.Sysctl().Set("net/ipv4/icmp_ratelimit", 0); err != nil {
		return nil, err
	}
	// kube-proxy's NewProxier sets route_localnet so that node ports
	// answer on 127.0.0.1 (pkg/proxy/iptables/proxier.go, with localhost
	// node ports on, the default).
	if err = ns.Sysctl().Set("net/ipv4/conf/all/route_localnet", 1); err != nil {
		return nil, err
	}
	// The node IPs go on lo (this host's kernel has no dummy devices):
	// local addresses all the same, so addrtype LOCAL matches them.
	for _, ip := range nodeIPs {
		if err = ns.AddrAdd("lo", ip.String()+"/32"); err != nil {
			return nil, fmt.Errorf("node IP %s: %w", ip, err)
		}
	}
	return node, nil
}

// Close closes every listener and removes every pod and the node.
func (n *IPTablesNode) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil
	}
	n.closed = true
	var errs []error
	for _, ip := range sortedKeys(n.pods) {
		p := n.pods[ip]
		p.close()
		errs = append(errs, p.NS.Close())
	}
	if n.own != nil {
		n.own.close()
	}
	if n.world != nil {
		errs = append(errs, n.world.Close())
	}
	errs = append(errs, n.NS.Close())
	return errors.Join(errs...)
}

func (n *IPTablesNode) isNodeIP(ip net.IP) bool {
	if ip.IsLoopback() {
		return true
	}
	for _, l := range n.NodeIPs {
		if l.Equal(ip) {
			return true
		}
	}
	return false
}

// Pod returns the pod with this IP, creating it on first use.
func (n *IPTablesNode) Pod(ip string) (*Pod, error) {
	addr := net.ParseIP(ip).To4()
	if addr == nil {
		return nil, fmt.Errorf("pod IP %q is not an IPv4 address", ip)
	}
	if n.isNodeIP(addr) {
		return nil, fmt.Errorf("%s is a node IP, not a pod's", ip)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, fmt.Errorf("the node is closed")
	}
	if p := n.pods[addr.String()]; p != nil {
		return p, nil
	}
	k := len(n.pods) + 1
	if k >= 1<<14-1 { // the last /30 is the world's
		return nil, fmt.Errorf("too many pods")
	}
	ns, err := Create("pod")
	if err != nil {
		return nil, err
	}
	p := &Pod{NS: ns, IP: addr.String(), servers: &servers{ns: ns}}
	// Link addresses: the k-th /30 of 169.254.0.0/16, node side .1, pod .2.
	base := uint32(169)<<24 | uint32(254)<<16 | uint32(k)<<2
	nodeSide, podSide := ipv4(base+1), ipv4(base+2)
	err = Veth(n.NS, fmt.Sprintf("p%d", k), nodeSide+"/30", ns, "eth0", podSide+"/30")
	if err == nil {
		err = ns.AddrAdd("eth0", p.IP+"/32")
	}
	if err == nil {
		err = ns.DefaultRoute(nodeSide)
	}
	if err == nil {
		err = n.NS.routeVia(p.IP+"/32", podSide)
	}
	if err != nil {
		ns.Close()
		return nil, fmt.Errorf("pod %s: %w", ip, err)
	}
	n.pods[p.IP] = p
	return p, nil
}

// The node's link to the world namespace: the last /30 of 169.254.0.0/16.
const worldNode, worldPeer = "169.254.255.253", "169.254.255.254"

func ipv4(v uint32) string {
	return net.IPv4(byte(v>>24), byte(v>>16), byte(v>>8), byte(v)).String()
}

// routeVia routes a CIDR through a gateway.
func (n *Namespace) routeVia(cidr, gw string) error {
	h, err := n.netlinkHandle()
	if err != nil {
		return err
	}
	defer h.Close()
	_, dst, err := net.ParseCIDR(cidr)
	if err != nil {
		return err
	}
	if err := h.RouteAdd(&netlink.Route{Dst: dst, Gw: net.ParseIP(gw)}); err != nil {
		return fmt.Errorf("%s: route %s via %s: %w", n.Name, cidr, gw, err)
	}
	return nil
}

// Serve makes ip:port answer with its own address, for the protocol (TCP
// or UDP): a pod's address, or one of the node's.
func (n *IPTablesNode) Serve(protocol, hostport string) error {
	host, port, err := splitHostPort(hostport)
	if err != nil {
		return err
	}
	ip := net.ParseIP(host)
	if n.isNodeIP(ip) {
		return n.own.serve(protocol, ip.String(), port)
	}
	p, err := n.Pod(host)
	if err != nil {
		return err
	}
	return p.serve(protocol, p.IP, port)
}

func splitHostPort(hostport string) (string, int, error) {
	host, ps, err := net.SplitHostPort(hostport)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port < 1 || port > 65535 {
		return "", 0, fmt.Errorf("bad port in %q", hostport)
	}
	return host, port, nil
}

// servers are the listeners of one namespace, each answering with the
// address it was asked for.
type servers struct {
	ns  *Namespace
	mu  sync.Mutex
	tcp map[string]net.Listener
	udp map[string]net.PacketConn
}

func (s *servers) serve(protocol, ip string, port int) error {
	// Bound to the address itself: an unbound UDP socket would answer
	// from the link address its route prefers, which conntrack does not
	// recognise as the reply.
	addr := net.JoinHostPort(ip, strconv.Itoa(port))
	bind := addr
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tcp == nil {
		s.tcp, s.udp = map[string]net.Listener{}, map[string]net.PacketConn{}
	}
	switch strings.ToUpper(protocol) {
	case "", "TCP":
		if s.tcp[addr] != nil {
			return nil
		}
		var ln net.Listener
		err := s.ns.Do(func() (err error) { ln, err = net.Listen("tcp4", bind); return err })
		if err != nil {
			return fmt.Errorf("%s: listen tcp %s: %w", s.ns.Name, bind, err)
		}
		s.tcp[addr] = ln
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				fmt.Fprintf(c, "%s\n", addr)
				c.Close()
			}
		}()
	case "UDP":
		if s.udp[addr] != nil {
			return nil
		}
		var pc net.PacketConn
		err := s.ns.Do(func() (err error) { pc, err = net.ListenPacket("udp4", bind); return err })
		if err != nil {
			return fmt.Errorf("%s: listen udp %s: %w", s.ns.Name, bind, err)
		}
		s.udp[addr] = pc
		go func() {
			buf := make([]byte, 512)
			for {
				_, from, err := pc.ReadFrom(buf)
				if err != nil {
					return
				}
				pc.WriteTo([]byte(addr+"\n"), from)
			}
		}()
	default:
		return fmt.Errorf("protocol %q: want TCP or UDP", protocol)
	}
	return nil
}

func (s *servers) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ln := range s.tcp {
		ln.Close()
	}
	for _, pc := range s.udp {
		pc.Close()
	}
}

// source is the namespace a connection from ip starts in: the node for a
// node IP (its packets take nat OUTPUT), else that IP's pod (nat
// PREROUTING on the node).
func (n *IPTablesNode) source(ip string) (*Namespace, error) {
	if n.isNodeIP(net.ParseIP(ip)) {
		return n.NS, nil
	}
	p, err := n.Pod(ip)
	if err != nil {
		return nil, err
	}
	return p.NS, nil
}

// Connect opens one new connection from the address from (a node IP or a
// pod's) to "ip:port" and returns who answered ("ip:port") or what
// happened instead (OutcomeRefused, OutcomeTimeout, OutcomeUnreachable).
func (n *IPTablesNode) Connect(protocol, from, to string) (string, error) {
	out, err := n.Spray(protocol, from, to, 1, false)
	if err != nil {
		return "", err
	}
	for k := range out {
		return k, nil
	}
	return "", fmt.Errorf("no outcome")
}

// sprayWorkers is how many connections are in flight at once.
const sprayWorkers = 16

// Spray opens count new connections from from to to and counts who
// answered. With forget, every connection starts with the node's
// `recent` lists emptied (no ClientIP affinity history, as the tracer
// assumes), so they run one at a time; otherwise several run at once.
func (n *IPTablesNode) Spray(protocol, from, to string, count int, forget bool) (map[string]int, error) {
	var prepare func() error
	if forget {
		prepare = n.ForgetAffinity
	}
	return n.spray(protocol, from, to, count, prepare)
}

// spray is Spray with prepare, if not nil, run before every connection
// (one at a time then).
func (n *IPTablesNode) spray(protocol, from, to string, count int, prepare func() error) (map[string]int, error) {
	ns, err := n.source(from)
	if err != nil {
		return nil, err
	}
	protocol = strings.ToUpper(protocol)
	if protocol == "" {
		protocol = "TCP"
	}
	if protocol != "TCP" && protocol != "UDP" {
		return nil, fmt.Errorf("protocol %q: want TCP or UDP", protocol)
	}
	local, err := resolve(protocol, net.JoinHostPort(from, "0"))
	if err != nil {
		return nil, err
	}
	workers := sprayWorkers
	if prepare != nil || count < workers {
		workers = 1 // one at a time: each starts from the history prepared
	}
	counts := map[string]int{}
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	per := count / workers
	for w := 0; w < workers; w++ {
		todo := per
		if w < count%workers {
			todo++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := ns.Do(func() error {
				for range todo {
					if prepare != nil {
						if err := prepare(); err != nil {
							return err
						}
					}
					o := n.dial(protocol, local, to)
					mu.Lock()
					counts[o]++
					mu.Unlock()
				}
				return nil
			})
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return counts, errors.Join(errs...)
}

// dial is one connection, on the calling thread's namespace.
func (n *IPTablesNode) dial(protocol string, local net.Addr, to string) string {
	d := net.Dialer{LocalAddr: local, Timeout: n.Timeout}
	deadline := time.Now().Add(n.Timeout)
	c, err := d.DialContext(context.Background(), strings.ToLower(protocol)+"4", to)
	if err != nil {
		return outcomeOf(err)
	}
	defer c.Close()
	c.SetDeadline(deadline)
	if protocol == "UDP" {
		if _, err := c.Write([]byte("hello\n")); err != nil {
			return outcomeOf(err)
		}
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return outcomeOf(err)
	}
	return strings.TrimSpace(line)
}

func outcomeOf(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET):
		return OutcomeRefused
	case errors.Is(err, os.ErrDeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return OutcomeTimeout
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return OutcomeUnreachable
	}
	return "ERROR " + err.Error()
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
		for _, name := range sortedKeys(lists) {
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

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
