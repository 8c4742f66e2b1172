package netns

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/proxysim/proxysim/sim/route"
)

// ProxyNode is a node namespace whose rules (iptables or nftables) a proxy
// programs, with pods around it: one namespace per pod IP, joined to the node by its own veth
// pair and created the first time the IP is needed (as a client or as an
// endpoint), so any scenario's addresses can be served:
//
//	pod 10.244.1.2/32 ─ eth0 169.254.0.6/30 ── p1 169.254.0.5/30 ─ node (lo: nodeIPs)
//
// The node forwards between pods and routes each pod IP to its veth; its
// default route leads to a world namespace that forwards nothing, so a
// packet the rules leave alone towards an address nobody has is lost. Pods answer TCP and UDP with their own
// "ip:port" and close, so a client learns which endpoint the kernel chose.
type ProxyNode struct {
	NS      *Namespace
	NodeIPs []net.IP
	// Timeout bounds one connection, connect and answer (default 2s): a
	// dropped packet shows as a timeout.
	Timeout time.Duration
	// PerOutcome, if above 0, is the connections per predicted outcome of
	// a spread (default 200, see samplesPerOutcome).
	PerOutcome int

	// alsoLocal, if set, names more addresses of the node's own (those on
	// a dummy device, say): connections from them start on the node.
	alsoLocal func(net.IP) bool

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

// NewProxyNode creates the node namespace, with forwarding on, ICMP unlimited,
// a default route to the world namespace and the node IPs on lo. Close
// removes it and every pod.
func NewProxyNode(nodeIPs []net.IP) (_ *ProxyNode, err error) {
	if !Privileged() {
		return nil, fmt.Errorf("a netns node needs root")
	}
	ns, err := Create("node")
	if err != nil {
		return nil, err
	}
	node := &ProxyNode{NS: ns, NodeIPs: nodeIPs, Timeout: 2 * time.Second, pods: map[string]*Pod{}}
	defer func() {
		if err != nil {
			node.Close()
		}
	}()
	node.own = &servers{ns: ns}
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
	// The node IPs go on lo (this host's kernel has no dummy devices):
	// local addresses all the same, so addrtype LOCAL and fib type local
	// match them.
	for _, ip := range nodeIPs {
		if err = ns.AddrAdd("lo", ip.String()+"/32"); err != nil {
			return nil, fmt.Errorf("node IP %s: %w", ip, err)
		}
	}
	return node, nil
}

// Close closes every listener and removes every pod and the node.
func (n *ProxyNode) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil
	}
	n.closed = true
	var errs []error
	for _, ip := range slices.Sorted(maps.Keys(n.pods)) {
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

func (n *ProxyNode) isNodeIP(ip net.IP) bool {
	if ip.IsLoopback() {
		return true
	}
	for _, l := range n.NodeIPs {
		if l.Equal(ip) {
			return true
		}
	}
	return n.alsoLocal != nil && n.alsoLocal(ip)
}

// Pod returns the pod with this IP, creating it on first use.
func (n *ProxyNode) Pod(ip string) (*Pod, error) {
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
func (n *ProxyNode) Serve(protocol, hostport string) error {
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
// address it was asked for and the source address the connection came
// from ("ip:port SRC"), so that a client learns which endpoint the kernel
// chose and whether its source was rewritten on the way.
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
				src, _, _ := net.SplitHostPort(c.RemoteAddr().String())
				fmt.Fprintf(c, "%s %s\n", addr, src)
				// The client closes first, so its side keeps the
				// TIME_WAIT: its port is not reused by the next
				// connections, whose SYN would otherwise meet this
				// side's TIME_WAIT and be retransmitted a second later.
				go func() {
					c.SetReadDeadline(time.Now().Add(10 * time.Second))
					io.Copy(io.Discard, c)
					c.Close()
				}()
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
				src, _, _ := net.SplitHostPort(from.String())
				pc.WriteTo([]byte(addr+" "+src+"\n"), from)
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
func (n *ProxyNode) source(ip string) (*Namespace, error) {
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
func (n *ProxyNode) Connect(protocol, from, to string) (string, error) {
	out, err := n.spray(protocol, from, to, 1, trial{})
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

// trial is how one observation of a spray runs: prepare, if set, before
// it (the trials then run one at a time, each from the state prepared);
// with again, two connections of the client, between run between them,
// and the outcome "FIRST -> SECOND" (one at a time too).
//
// masq, when set, is the part of each outcome's share the tracer says
// leaves masqueraded: the measurement then checks it (Measurement.PredictedMasq).
type trial struct {
	prepare func() error
	again   bool
	between func() error
	masq    route.Shares
}

// spray runs count trials from from to to and counts their outcomes.
func (n *ProxyNode) spray(protocol, from, to string, count int, t trial) (map[string]int, error) {
	counts, _, err := n.sprayTracked(protocol, from, to, count, t)
	return counts, err
}

// sprayTracked is spray that also counts, by outcome, the trials whose
// endpoint saw another source than the client's address: masqueraded
// (one connection per trial; with again, the second's).
func (n *ProxyNode) sprayTracked(protocol, from, to string, count int, t trial) (map[string]int, map[string]int, error) {
	ns, err := n.source(from)
	if err != nil {
		return nil, nil, err
	}
	protocol = strings.ToUpper(protocol)
	if protocol == "" {
		protocol = "TCP"
	}
	if protocol != "TCP" && protocol != "UDP" {
		return nil, nil, fmt.Errorf("protocol %q: want TCP or UDP", protocol)
	}
	local, err := resolve(protocol, net.JoinHostPort(from, "0"))
	if err != nil {
		return nil, nil, err
	}
	client := net.ParseIP(from)
	workers := sprayWorkers
	if t.prepare != nil || t.again || count < workers {
		workers = 1 // one at a time: each starts from the history prepared
	}
	counts, masq := map[string]int{}, map[string]int{}
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
					o, src, err := n.trial(protocol, local, to, t)
					if err != nil {
						return err
					}
					mu.Lock()
					counts[o]++
					if src != nil && !src.Equal(client) {
						masq[o]++
					}
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
	return counts, masq, errors.Join(errs...)
}

// trial runs one trial on the calling thread's namespace: its outcome and
// the source its (last) endpoint saw, nil when none answered.
func (n *ProxyNode) trial(protocol string, local net.Addr, to string, t trial) (string, net.IP, error) {
	if t.prepare != nil {
		if err := t.prepare(); err != nil {
			return "", nil, err
		}
	}
	o, src := n.dial(protocol, local, to)
	if !t.again {
		return o, src, nil
	}
	if t.between != nil {
		if err := t.between(); err != nil {
			return "", nil, err
		}
	}
	second, src := n.dial(protocol, local, to)
	return o + " -> " + second, src, nil
}

// dial is one connection, on the calling thread's namespace: who
// answered, and the source address the endpoint saw (nil when nobody
// answered).
func (n *ProxyNode) dial(protocol string, local net.Addr, to string) (string, net.IP) {
	d := net.Dialer{LocalAddr: local, Timeout: n.Timeout}
	deadline := time.Now().Add(n.Timeout)
	c, err := d.DialContext(context.Background(), strings.ToLower(protocol)+"4", to)
	if err != nil {
		return outcomeOf(err), nil
	}
	defer c.Close()
	c.SetDeadline(deadline)
	if protocol == "UDP" {
		if _, err := c.Write([]byte("hello\n")); err != nil {
			return outcomeOf(err), nil
		}
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return outcomeOf(err), nil
	}
	who, src, _ := strings.Cut(strings.TrimSpace(line), " ")
	return who, net.ParseIP(src)
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
