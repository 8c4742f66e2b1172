package netns

import (
	"bufio"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/proxysim/proxysim/sim/ipvs"
)

// Topology is a client, a node running IPVS and backends, each in its own
// namespace, joined by veth pairs:
//
//	client 10.0.0.5-9/24 ── 10.0.0.1 node 10.244.K.1 ── 10.244.K.2 backend K
//
// Backends answer TCP and UDP on port 8080 with their own ip:port, so a
// client learns which real server took its connection.
type Topology struct {
	Client   *Namespace
	Node     *Namespace
	Backends []*Backend
	// ConnectTimeout bounds one connect (default 5s).
	ConnectTimeout time.Duration

	mu    sync.Mutex
	conns map[string]*clientConn
	// closed are connections closed or reset from the client: their IPVS
	// entries live on until they expire, and Conn still finds them.
	closed map[string]*clientConn
}

// ClientIPs are the addresses the client namespace has.
var ClientIPs = []string{"10.0.0.5", "10.0.0.6", "10.0.0.7", "10.0.0.8", "10.0.0.9"}

// BackendPort is where every backend listens.
const BackendPort = 8080

// Backend is one real server.
type Backend struct {
	NS *Namespace
	IP string
	ln net.Listener
	pc net.PacketConn
}

// Addr is the backend's ip:port.
func (b *Backend) Addr() string { return net.JoinHostPort(b.IP, strconv.Itoa(BackendPort)) }

type clientConn struct {
	c      net.Conn
	r      *bufio.Reader
	client string
	svc    string
}

var _ ipvs.Traffic = (*Topology)(nil)

// NewTopology builds a topology for a test and removes it at the end.
func NewTopology(t testing.TB, backends int) *Topology {
	t.Helper()
	topo, err := BuildTopology(backends)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { topo.Destroy() })
	return topo
}

// BuildTopology builds a topology with n backends; Destroy removes it.
func BuildTopology(n int) (topo *Topology, err error) {
	topo = &Topology{ConnectTimeout: 5 * time.Second, conns: map[string]*clientConn{}, closed: map[string]*clientConn{}}
	defer func() {
		if err != nil {
			topo.Destroy()
		}
	}()
	if topo.Client, err = Create("client"); err != nil {
		return nil, err
	}
	if topo.Node, err = Create("node"); err != nil {
		return nil, err
	}
	if err = Veth(topo.Node, "c0", "10.0.0.1/24", topo.Client, "eth0", ClientIPs[0]+"/24"); err != nil {
		return nil, err
	}
	for _, ip := range ClientIPs[1:] {
		if err = topo.Client.AddrAdd("eth0", ip+"/24"); err != nil {
			return nil, err
		}
	}
	if err = topo.Client.DefaultRoute("10.0.0.1"); err != nil {
		return nil, err
	}
	for k := 1; k <= n; k++ {
		b := &Backend{IP: fmt.Sprintf("10.244.%d.2", k)}
		if b.NS, err = Create(fmt.Sprintf("backend%d", k)); err != nil {
			return nil, err
		}
		topo.Backends = append(topo.Backends, b)
		if err = Veth(topo.Node, fmt.Sprintf("b%d", k), fmt.Sprintf("10.244.%d.1/24", k), b.NS, "eth0", b.IP+"/24"); err != nil {
			return nil, err
		}
		if err = b.NS.DefaultRoute(fmt.Sprintf("10.244.%d.1", k)); err != nil {
			return nil, err
		}
		if err = b.serve(); err != nil {
			return nil, err
		}
	}
	return topo, nil
}

// Destroy closes every connection and server and removes every namespace.
func (t *Topology) Destroy() error {
	t.mu.Lock()
	for _, c := range t.conns {
		c.c.Close()
	}
	t.conns = map[string]*clientConn{}
	t.mu.Unlock()
	var errs []error
	for _, b := range t.Backends {
		if b.NS == nil {
			continue
		}
		if b.ln != nil {
			b.ln.Close()
		}
		if b.pc != nil {
			b.pc.Close()
		}
		errs = append(errs, b.NS.Close())
	}
	for _, n := range []*Namespace{t.Node, t.Client} {
		if n != nil {
			errs = append(errs, n.Close())
		}
	}
	return errors.Join(errs...)
}

// serve starts the backend's servers: TCP writes the backend's address on
// accept, answers "ping" with "pong", and on "close" closes first (so the
// IPVS entry, not the client, ends up in TIME_WAIT); UDP echoes the address.
func (b *Backend) serve() error {
	err := b.NS.Do(func() error {
		var err error
		if b.ln, err = net.Listen("tcp4", fmt.Sprintf(":%d", BackendPort)); err != nil {
			return err
		}
		b.pc, err = net.ListenPacket("udp4", fmt.Sprintf(":%d", BackendPort))
		return err
	})
	if err != nil {
		return fmt.Errorf("%s: listen: %w", b.NS.Name, err)
	}
	go func() {
		for {
			c, err := b.ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				fmt.Fprintf(c, "%s\n", b.Addr())
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil || strings.TrimSpace(line) == "close" {
						return
					}
					if strings.TrimSpace(line) == "hold" {
						// keep this side open after the client's FIN,
						// until the namespace goes
						fmt.Fprintf(c, "held\n")
						io.Copy(io.Discard, r)
						select {}
					}
					fmt.Fprintf(c, "pong\n")
				}
			}()
		}
	}()
	go func() {
		buf := make([]byte, 512)
		for {
			_, from, err := b.pc.ReadFrom(buf)
			if err != nil {
				return
			}
			b.pc.WriteTo([]byte(b.Addr()+"\n"), from)
		}
	}()
	return nil
}

// Connect opens a connection from the client namespace, from the given
// source address and port, and reads which backend answered.
func (t *Topology) Connect(name, protocol, client, service string) ipvs.ConnectResult {
	if protocol == "" {
		protocol = "TCP"
	}
	var res ipvs.ConnectResult
	err := t.Client.Do(func() error {
		local, err := resolve(protocol, client)
		if err != nil {
			return err
		}
		d := net.Dialer{LocalAddr: local, Timeout: t.ConnectTimeout, Control: reuseAddr}
		start := time.Now()
		c, err := d.DialContext(context.Background(), strings.ToLower(protocol)+"4", service)
		res.Latency = time.Since(start)
		if err != nil {
			res.Err = trafficError(err)
			return nil
		}
		r := bufio.NewReader(c)
		if protocol == "UDP" {
			c.Write([]byte("hello\n"))
		}
		c.SetReadDeadline(time.Now().Add(t.ConnectTimeout))
		line, err := r.ReadString('\n')
		c.SetReadDeadline(time.Time{})
		if err != nil {
			c.Close()
			res.Err = trafficError(err)
			return nil
		}
		res.Server = strings.TrimSpace(line)
		t.mu.Lock()
		t.conns[name] = &clientConn{c: c, r: r, client: client, svc: service}
		t.mu.Unlock()
		return nil
	})
	if err != nil {
		res.Err = err
	}
	return res
}

// socketError is a socket error that also matches the sim/ipvs error a
// Traffic caller compares against, so both dataplanes fail in the same words.
type socketError struct{ kind, err error }

func (e socketError) Error() string   { return e.err.Error() }
func (e socketError) Unwrap() []error { return []error{e.kind, e.err} }

func trafficError(err error) error {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return socketError{ipvs.ErrRefused, err}
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return socketError{ipvs.ErrReset, err}
	case errors.Is(err, os.ErrDeadlineExceeded):
		return socketError{ipvs.ErrTimeout, err}
	}
	return err
}

func resolve(protocol, hostport string) (net.Addr, error) {
	if protocol == "UDP" {
		return net.ResolveUDPAddr("udp4", hostport)
	}
	return net.ResolveTCPAddr("tcp4", hostport)
}

func reuseAddr(_, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1)
	})
	return errors.Join(err, serr)
}

func (t *Topology) take(name string) (*clientConn, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c, ok := t.conns[name]
	if !ok {
		return nil, fmt.Errorf("no connection named %q", name)
	}
	delete(t.conns, name)
	t.closed[name] = c
	return c, nil
}

// Close asks the backend to close first, then closes the client side.
func (t *Topology) Close(name string) error {
	c, err := t.take(name)
	if err != nil {
		return err
	}
	defer c.c.Close()
	if _, err := c.c.Write([]byte("close\n")); err != nil {
		return err
	}
	c.c.SetReadDeadline(time.Now().Add(t.ConnectTimeout))
	_, err = c.r.ReadString('\n') // EOF once the server closed
	if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		return nil
	}
	return err
}

// Reset aborts a connection with a RST from the client.
func (t *Topology) Reset(name string) error {
	c, err := t.take(name)
	if err != nil {
		return err
	}
	if tc, ok := c.c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	return c.c.Close()
}

// Shutdown asks the backend to keep its side open, then sends the client's
// FIN (shutdown for writing) and lets the socket go: the node's IPVS entry
// waits in CLOSE_WAIT, as with a server that has not closed yet.
func (t *Topology) Shutdown(name string) error {
	c, err := t.take(name)
	if err != nil {
		return err
	}
	defer c.c.Close()
	if _, err := c.c.Write([]byte("hold\n")); err != nil {
		return err
	}
	c.c.SetReadDeadline(time.Now().Add(t.ConnectTimeout))
	if line, err := c.r.ReadString('\n'); err != nil || strings.TrimSpace(line) != "held" {
		return fmt.Errorf("backend did not hold %s: %q %v", name, line, err)
	}
	tc, ok := c.c.(*net.TCPConn)
	if !ok {
		return fmt.Errorf("%s is not TCP", name)
	}
	return tc.CloseWrite()
}

// Abandon destroys the client's socket without a packet: in TCP repair
// mode (TCP_REPAIR, what checkpoint/restore tools use) a close sends
// neither FIN nor RST, so the node's IPVS entry stays ESTABLISHED and the
// backend's socket stays open, as when a client vanishes.
func (t *Topology) Abandon(name string) error {
	c, err := t.take(name)
	if err != nil {
		return err
	}
	tc, ok := c.c.(*net.TCPConn)
	if !ok {
		return c.c.Close()
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_TCP, tcpRepair, 1)
	}); err != nil {
		return err
	}
	if serr != nil {
		tc.Close()
		return fmt.Errorf("TCP_REPAIR: %w", serr)
	}
	return tc.Close()
}

// tcpRepair is TCP_REPAIR (include/uapi/linux/tcp.h).
const tcpRepair = 19

// Ping sends a line on an open connection and waits up to timeout for the
// answer: it fails if the path through IPVS is gone.
func (t *Topology) Ping(name string, timeout time.Duration) error {
	t.mu.Lock()
	c, ok := t.conns[name]
	t.mu.Unlock()
	if !ok {
		return fmt.Errorf("no connection named %q", name)
	}
	c.c.SetDeadline(time.Now().Add(timeout))
	defer c.c.SetDeadline(time.Time{})
	if _, err := c.c.Write([]byte("ping\n")); err != nil {
		return trafficError(err)
	}
	line, err := c.r.ReadString('\n')
	if err != nil {
		return trafficError(err)
	}
	if strings.TrimSpace(line) != "pong" {
		return fmt.Errorf("unexpected answer %q", line)
	}
	return nil
}

// Conn reports the IPVS entry for a named connection (open or closed) from
// the node's /proc/net/ip_vs_conn.
func (t *Topology) Conn(name string) (ipvs.ConnInfo, bool) {
	t.mu.Lock()
	c, ok := t.conns[name]
	if !ok {
		c, ok = t.closed[name]
	}
	t.mu.Unlock()
	if !ok {
		return ipvs.ConnInfo{State: "GONE"}, false
	}
	entries, err := t.IPVSConns()
	if err != nil {
		return ipvs.ConnInfo{State: "GONE"}, false
	}
	for _, e := range entries {
		if e.Client == c.client && e.Service == c.svc {
			return ipvs.ConnInfo{Server: e.Server, State: e.State, Expires: e.Expires}, true
		}
	}
	return ipvs.ConnInfo{State: "GONE"}, false
}

// ConnEntry is one line of /proc/net/ip_vs_conn.
type ConnEntry struct {
	Protocol, Client, Service, Server, State string
	Expires                                  time.Duration
}

// IPVSConns reads the node's IPVS connection table.
func (t *Topology) IPVSConns() ([]ConnEntry, error) {
	var out []ConnEntry
	err := t.Node.Do(func() error {
		b, err := os.ReadFile("/proc/thread-self/net/ip_vs_conn")
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 8 {
				continue
			}
			e := ConnEntry{Protocol: f[0], Client: hexAddr(f[1], f[2]), Service: hexAddr(f[3], f[4]), Server: hexAddr(f[5], f[6]), State: f[7]}
			if len(f) > 8 {
				e.Expires = expiresOf(f[8])
			}
			out = append(out, e)
		}
		return nil
	})
	return out, err
}

// hexAddr decodes ip_vs_conn's hex address and port.
func hexAddr(ipHex, portHex string) string {
	b, err := hex.DecodeString(ipHex)
	if err != nil || len(b) != 4 {
		return ipHex
	}
	p, _ := strconv.ParseUint(portHex, 16, 16)
	return net.JoinHostPort(net.IP(b).String(), strconv.Itoa(int(p)))
}
