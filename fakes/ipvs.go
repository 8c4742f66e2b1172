package fakes

import (
	"fmt"
	"net"
	"sort"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/proxysim/proxysim/sim/ipvs"
)

// IPVS is an in-memory IPVS that behaves like the kernel's where proxysim's
// stories need it: real servers newest first, as the kernel lists them, the rr, wrr
// and sh schedulers, a connection table with TCP states and their timeouts,
// persistence templates, quiescent (weight 0) real servers, and the
// conn_reuse_mode, expire_nodest_conn and expire_quiescent_template rules,
// by kernel version. Each rule is pinned by a test phrased as a statement
// about the kernel; the privileged suite checks the same statements against
// a real one.
type IPVS struct {
	mu       sync.Mutex
	clock    clock.PassiveClock
	sysctl   ipvs.Sysctl
	kernel   ipvs.KernelVersion
	services map[string]*service // by key text, for callers naming a virtual server
	byID     map[vsID]*service   // the same, for the Handle calls of every sync
	order    []*service
	timeouts ipvs.Timeouts

	conns     map[string]*conn // by proto|client|vs
	named     map[string]*conn // scenario connection names
	templates map[string]*conn // by client ip|vs
}

// vsID identifies a virtual server as its key text does.
type vsID struct {
	proto, addr string
	port        uint16
}

func idOf(vs ipvs.VirtualServer) vsID { return vsID{vs.Protocol, vs.Address, vs.Port} }

type service struct {
	vs      ipvs.VirtualServer
	dests   []*dest
	rrLast  *dest // rr: the last dest chosen
	wrrIdx  int   // wrr: index of the current dest, -1 is the list head
	wrrCW   int   // wrr: current weight
	buckets [shTabSize]*dest
}

type dest struct {
	rs        ipvs.RealServer
	available bool
}

type conn struct {
	name     string
	proto    string
	client   string
	svc      *service
	vsKey    string
	dest     *dest
	state    string
	expires  time.Time // zero: does not expire by itself
	template *conn     // the persistence template controlling this conn
	// abandoned: the client forgot the connection without a word; a SYN
	// from its address and port finds the entry still ESTABLISHED.
	abandoned bool
	// Template fields.
	isTemplate bool
	nControl   int
	timeout    time.Duration
}

var (
	_ ipvs.Handle  = (*IPVS)(nil)
	_ ipvs.Traffic = (*IPVS)(nil)
)

// Default kernel timeouts (include/net/ip_vs.h and ip_vs_proto_tcp.c).
const (
	DefaultTCPTimeout      = 15 * time.Minute
	DefaultTCPFinTimeout   = 2 * time.Minute
	DefaultUDPTimeout      = 5 * time.Minute
	TimeWaitTimeout        = 2 * time.Minute
	CloseTimeout           = 10 * time.Second
	CloseWaitTimeout       = 60 * time.Second
	synRetransmitsFirstGap = time.Second
	synMaxRetries          = 6
)

// NewIPVS returns an empty IPVS for a kernel version, reading its sysctls
// from s (which may be nil: all zero) and time from clk (which may be nil:
// connections never expire).
func NewIPVS(kernel string, s ipvs.Sysctl, clk clock.PassiveClock) *IPVS {
	kv, _ := ipvs.ParseKernelVersion(kernel)
	return &IPVS{
		clock: clk, sysctl: s, kernel: kv,
		services: map[string]*service{}, byID: map[vsID]*service{}, conns: map[string]*conn{}, named: map[string]*conn{}, templates: map[string]*conn{},
	}
}

func (f *IPVS) now() time.Time {
	if f.clock == nil {
		return time.Time{}
	}
	return f.clock.Now()
}

func (f *IPVS) sysctlValue(name string) int {
	if f.sysctl == nil {
		return 0
	}
	v, _ := f.sysctl.Get(name)
	return v
}

func (f *IPVS) VirtualServers() ([]ipvs.VirtualServer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]ipvs.VirtualServer, 0, len(f.order))
	for _, s := range f.order {
		out = append(out, s.vs)
	}
	return out, nil
}

func (f *IPVS) AddVirtualServer(vs ipvs.VirtualServer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.byID[idOf(vs)]; ok {
		return fmt.Errorf("virtual server %s: file exists", vs.Key())
	}
	s := &service{vs: vs, wrrIdx: -1}
	f.services[vs.Key()] = s
	f.byID[idOf(vs)] = s
	f.order = append(f.order, s)
	return nil
}

func (f *IPVS) UpdateVirtualServer(vs ipvs.VirtualServer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.byID[idOf(vs)]
	if !ok {
		return fmt.Errorf("virtual server %s: no such process", vs.Key())
	}
	s.vs = vs
	s.changed()
	return nil
}

// DeleteVirtualServer removes the service and its real servers; their
// connections stay in the table, bound to destinations that are no longer
// available, until they expire.
func (f *IPVS) DeleteVirtualServer(vs ipvs.VirtualServer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.byID[idOf(vs)]
	if !ok {
		return fmt.Errorf("virtual server %s: no such process", vs.Key())
	}
	for _, d := range s.dests {
		d.available = false
	}
	delete(f.services, vs.Key())
	delete(f.byID, idOf(vs))
	for i, o := range f.order {
		if o == s {
			f.order = append(f.order[:i], f.order[i+1:]...)
			break
		}
	}
	return nil
}

func (f *IPVS) RealServers(vs ipvs.VirtualServer) ([]ipvs.RealServer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.byID[idOf(vs)]
	if !ok {
		return nil, fmt.Errorf("virtual server %s: no such process", vs.Key())
	}
	if len(f.conns)+len(f.templates) > 0 {
		f.expire(f.now())
	}
	out := make([]ipvs.RealServer, 0, len(s.dests))
	for _, d := range s.dests {
		rs := d.rs
		if len(f.conns) > 0 {
			rs.ActiveConn, rs.InactiveConn = f.counters(d)
		}
		out = append(out, rs)
	}
	return out, nil
}

// counters are ActiveConn (ESTABLISHED) and InactiveConn (every other
// state) of a destination; templates count in neither.
func (f *IPVS) counters(d *dest) (active, inactive int) {
	for _, c := range f.conns {
		if c.dest != d {
			continue
		}
		if c.state == "ESTABLISHED" {
			active++
		} else {
			inactive++
		}
	}
	return active, inactive
}

func (f *IPVS) AddRealServer(vs ipvs.VirtualServer, rs ipvs.RealServer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.byID[idOf(vs)]
	if !ok {
		return fmt.Errorf("virtual server %s: no such process", vs.Key())
	}
	if s.findRS(rs) != nil {
		return fmt.Errorf("real server %s: file exists", rs.Key())
	}
	rs.ActiveConn, rs.InactiveConn = 0, 0
	// The kernel adds a destination at the head of its list (list_add), so
	// the newest comes first: in listings and for the schedulers.
	s.dests = append(s.dests, nil)
	copy(s.dests[1:], s.dests)
	s.dests[0] = &dest{rs: rs, available: true}
	s.changed()
	return nil
}

func (f *IPVS) UpdateRealServer(vs ipvs.VirtualServer, rs ipvs.RealServer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, d, err := f.dst(vs, rs)
	if err != nil {
		return err
	}
	d.rs.Weight = rs.Weight
	s.changed()
	return nil
}

func (f *IPVS) DeleteRealServer(vs ipvs.VirtualServer, rs ipvs.RealServer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, d, err := f.dst(vs, rs)
	if err != nil {
		return err
	}
	d.available = false
	if fixNodestConnWork.in(f.kernel) && f.sysctlValue(ipvs.SysctlExpireNodestConn) == 1 {
		// From 5.9 deleting a destination with expire_nodest_conn queues
		// work (a jiffy later) that drops every entry still bound to it and
		// each template left controlling none (ip_vs_ctl.c ip_vs_del_dest,
		// ip_vs_conn.c ip_vs_expire_nodest_conn_flush), so the table loses
		// them at deletion, not at their next packet.
		f.flushNodest(f.now())
	}
	for i, o := range s.dests {
		if o == d {
			if s.rrLast == d {
				// rr resumes from the previous destination, as the kernel's
				// del_dest hook moves its list pointer back one.
				s.rrLast = nil
				if i > 0 {
					s.rrLast = s.dests[i-1]
				}
			}
			s.dests = append(s.dests[:i], s.dests[i+1:]...)
			break
		}
	}
	s.changed()
	return nil
}

func (f *IPVS) dst(vs ipvs.VirtualServer, rs ipvs.RealServer) (*service, *dest, error) {
	s, ok := f.byID[idOf(vs)]
	if !ok {
		return nil, nil, fmt.Errorf("virtual server %s: no such process", vs.Key())
	}
	d := s.findRS(rs)
	if d == nil {
		return nil, nil, fmt.Errorf("real server %s: no such process", rs.Key())
	}
	return s, d, nil
}

// findRS finds a destination by address and port, the fields of its key.
func (s *service) findRS(rs ipvs.RealServer) *dest {
	for _, d := range s.dests {
		if d.rs.Address == rs.Address && d.rs.Port == rs.Port {
			return d
		}
	}
	return nil
}

func (s *service) find(key string) *dest {
	for _, d := range s.dests {
		if d.rs.Key() == key {
			return d
		}
	}
	return nil
}

func (f *IPVS) SetTimeouts(t ipvs.Timeouts) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t.TCP > 0 {
		f.timeouts.TCP = t.TCP
	}
	if t.TCPFin > 0 {
		f.timeouts.TCPFin = t.TCPFin
	}
	if t.UDP > 0 {
		f.timeouts.UDP = t.UDP
	}
	return nil
}

// Timeouts reports the effective timeouts.
func (f *IPVS) Timeouts() ipvs.Timeouts {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.timeoutsLocked()
}

// SetConnections replaces a real server's connections with active
// ESTABLISHED and inactive TIME_WAIT ones from anonymous clients, for tests
// that need counters without a story of how they came about.
func (f *IPVS) SetConnections(vsKey, rsKey string, active, inactive int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.services[vsKey]
	if !ok {
		return fmt.Errorf("no virtual server %s", vsKey)
	}
	d := s.find(rsKey)
	if d == nil {
		return fmt.Errorf("no real server %s in %s", rsKey, vsKey)
	}
	for k, c := range f.conns {
		if c.dest == d && c.name == "" {
			delete(f.conns, k)
		}
	}
	now := f.now()
	for i := 0; i < active+inactive; i++ {
		c := &conn{proto: s.vs.Protocol, client: fmt.Sprintf("anon-%s-%d", rsKey, i), svc: s, vsKey: vsKey, dest: d, state: "ESTABLISHED"}
		if i >= active {
			c.state, c.expires = "TIME_WAIT", now.Add(TimeWaitTimeout)
		}
		f.conns[c.proto+"|"+c.client+"|"+vsKey] = c
	}
	return nil
}

// ---- schedulers ----

const (
	shTabBits = 8
	shTabSize = 1 << shTabBits
)

// changed recomputes scheduler state after the destinations changed, as the
// kernel's add/del/upd_dest hooks do.
func (s *service) changed() {
	switch s.vs.Scheduler {
	case "wrr":
		s.wrrIdx = -1
		if mw := s.maxWeight(); s.wrrCW > mw {
			s.wrrCW = mw
		}
	case "sh":
		s.reassignBuckets()
	}
}

func (s *service) maxWeight() int {
	mw := 0
	for _, d := range s.dests {
		if d.rs.Weight > mw {
			mw = d.rs.Weight
		}
	}
	return mw
}

func (s *service) gcdWeight() int {
	g := 0
	for _, d := range s.dests {
		if w := d.rs.Weight; w > 0 {
			if g == 0 {
				g = w
			} else {
				g = gcd(g, w)
			}
		}
	}
	if g == 0 {
		return 1
	}
	return g
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// schedule picks a destination for a new connection from client ip.
func (s *service) schedule(clientIP string) *dest {
	if len(s.dests) == 0 {
		return nil
	}
	switch s.vs.Scheduler {
	case "wrr":
		return s.scheduleWRR()
	case "sh":
		return s.scheduleSH(clientIP)
	default:
		return s.scheduleRR()
	}
}

// scheduleRR continues round robin after the last destination chosen,
// skipping quiescent (weight 0) ones.
func (s *service) scheduleRR() *dest {
	start := 0
	if s.rrLast != nil {
		for i, d := range s.dests {
			if d == s.rrLast {
				start = i + 1
				break
			}
		}
	}
	n := len(s.dests)
	for k := 0; k < n; k++ {
		d := s.dests[(start+k)%n]
		if d.rs.Weight > 0 {
			s.rrLast = d
			return d
		}
	}
	return nil
}

// scheduleWRR is the kernel's interleaved weighted round robin.
func (s *service) scheduleWRR() *dest {
	mw, di := s.maxWeight(), s.gcdWeight()
	if mw == 0 {
		return nil
	}
	n := len(s.dests)
	// At most one full sweep per weight step.
	for guard := 0; guard < (n+1)*(mw/di+1); guard++ {
		s.wrrIdx++
		if s.wrrIdx >= n {
			s.wrrIdx = -1
			s.wrrCW -= di
			if s.wrrCW <= 0 {
				s.wrrCW = mw
			}
			continue
		}
		d := s.dests[s.wrrIdx]
		if d.rs.Weight >= s.wrrCW && d.rs.Weight > 0 {
			return d
		}
	}
	return nil
}

// reassignBuckets fills the 256-bucket table, each destination taking as
// many consecutive buckets as its weight (at least one), cycling the list.
func (s *service) reassignBuckets() {
	if len(s.dests) == 0 {
		s.buckets = [shTabSize]*dest{}
		return
	}
	i, count := 0, 0
	for b := 0; b < shTabSize; b++ {
		d := s.dests[i]
		s.buckets[b] = d
		count++
		if count >= d.rs.Weight {
			i = (i + 1) % len(s.dests)
			count = 0
		}
	}
}

// scheduleSH hashes the client address to a bucket; a quiescent bucket
// owner means no destination (no fallback).
func (s *service) scheduleSH(clientIP string) *dest {
	ip := net.ParseIP(clientIP).To4()
	var fold uint32
	if ip != nil {
		fold = uint32(ip[0])<<24 | uint32(ip[1])<<16 | uint32(ip[2])<<8 | uint32(ip[3])
	}
	h := (fold * 0x61C88647) >> (32 - shTabBits)
	d := s.buckets[h&(shTabSize-1)]
	if d == nil || d.rs.Weight <= 0 {
		return nil
	}
	return d
}

// ---- connections ----

func hostOf(hp string) string {
	h, _, _ := net.SplitHostPort(hp)
	return h
}

func (f *IPVS) connKey(proto, client, vsKey string) string { return proto + "|" + client + "|" + vsKey }

// expire removes connections and templates whose time is up, in time order,
// so that a template outlives its last controlled connection by its timeout.
func (f *IPVS) expire(now time.Time) {
	if f.clock == nil || len(f.conns)+len(f.templates) == 0 {
		return
	}
	for {
		var next *conn
		var nextAt time.Time
		consider := func(c *conn, at time.Time) {
			if at.IsZero() || at.After(now) {
				return
			}
			if next == nil || at.Before(nextAt) || (at.Equal(nextAt) && before(c, next)) {
				next, nextAt = c, at
			}
		}
		for _, c := range f.conns {
			consider(c, c.expires)
		}
		for _, t := range f.templates {
			consider(t, t.expires)
		}
		if next == nil {
			return
		}
		f.drop(next, nextAt)
	}
}

// before orders entries that expire at the same instant, which the kernel
// leaves to its timers: connections go before templates (so a template sees
// its last connection gone), then by client and service.
func before(a, b *conn) bool {
	if a.isTemplate != b.isTemplate {
		return !a.isTemplate
	}
	if a.client != b.client {
		return a.client < b.client
	}
	return a.vsKey < b.vsKey
}

// flushNodest drops the connections whose destination is gone, and then
// their templates once those control nothing, as the kernel's nodest flush
// does; a template that still controls an entry stays.
func (f *IPVS) flushNodest(at time.Time) {
	keys := make([]string, 0, len(f.conns))
	for k := range f.conns {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		c := f.conns[k]
		if c.dest.available {
			continue
		}
		f.drop(c, at)
		if t := c.template; t != nil && t.nControl == 0 {
			delete(f.templates, hostOf(t.client)+"|"+t.vsKey)
		}
	}
}

// drop removes one entry that expired at instant at.
func (f *IPVS) drop(c *conn, at time.Time) {
	if c.isTemplate {
		if c.nControl > 0 {
			// The kernel re-arms a template that still controls connections.
			c.expires = at.Add(c.timeout)
			return
		}
		delete(f.templates, hostOf(c.client)+"|"+c.vsKey)
		return
	}
	delete(f.conns, f.connKey(c.proto, c.client, c.vsKey))
	c.state = "GONE"
	if t := c.template; t != nil {
		t.nControl--
	}
}

func (f *IPVS) stateTimeout(state string) time.Duration {
	t := f.timeoutsLocked()
	switch state {
	case "FIN_WAIT":
		return t.TCPFin
	case "TIME_WAIT":
		return TimeWaitTimeout
	case "CLOSE":
		return CloseTimeout
	case "CLOSE_WAIT":
		return CloseWaitTimeout
	case "UDP":
		return t.UDP
	case "ESTABLISHED":
		// An idle established entry expires after the TCP timeout; every
		// packet IPVS forwards re-arms it (ip_vs_conn.c ip_vs_conn_put),
		// a packet it drops does not (ip_vs_in puts the entry back with
		// __ip_vs_conn_put, which leaves the timer alone).
		return t.TCP
	}
	return 0
}

func (f *IPVS) timeoutsLocked() ipvs.Timeouts {
	t := ipvs.Timeouts{TCP: DefaultTCPTimeout, TCPFin: DefaultTCPFinTimeout, UDP: DefaultUDPTimeout}
	if f.timeouts.TCP > 0 {
		t.TCP = f.timeouts.TCP
	}
	if f.timeouts.TCPFin > 0 {
		t.TCPFin = f.timeouts.TCPFin
	}
	if f.timeouts.UDP > 0 {
		t.UDP = f.timeouts.UDP
	}
	return t
}

// Connect models a client opening a connection, following ip_vs_in's rules
// for a SYN: an existing entry for the same client address and port is
// reused, rescheduled (conn_reuse_mode 1, or expire_nodest_conn with a
// quiescent destination), or blocks the SYN while its destination is gone.
// A SYN the kernel drops is retransmitted after 1s, 2s, 4s ... as Linux
// does, so a drop shows up as connect latency.
func (f *IPVS) Connect(name, protocol, client, service string) ipvs.ConnectResult {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	f.expire(now)
	if protocol == "" {
		protocol = "TCP"
	}
	vip, vport, err := net.SplitHostPort(service)
	if err != nil {
		return ipvs.ConnectResult{Err: err}
	}
	vsKey := protocol + " " + net.JoinHostPort(vip, vport)
	var latency time.Duration
	gap := synRetransmitsFirstGap
	for attempt := 0; attempt <= synMaxRetries; attempt++ {
		at := now.Add(latency)
		f.expire(at)
		c, dropped, err := f.syn(name, protocol, client, vsKey, at)
		if err != nil {
			return ipvs.ConnectResult{Err: err, Latency: latency}
		}
		if !dropped {
			if c == nil {
				return ipvs.ConnectResult{Err: ipvs.ErrRefused, Latency: latency}
			}
			if name != "" {
				f.named[name] = c
			}
			return ipvs.ConnectResult{Server: c.dest.rs.Key(), Latency: latency}
		}
		if protocol == "UDP" {
			return ipvs.ConnectResult{Err: ipvs.ErrTimeout, Latency: latency}
		}
		latency += gap
		gap *= 2
	}
	return ipvs.ConnectResult{Err: ipvs.ErrTimeout, Latency: latency}
}

// syn handles one SYN at instant at: it returns the connection made, or
// dropped=true when the kernel dropped the packet, or (nil, false) when no
// destination could be found (the local stack answers with a reset).
func (f *IPVS) syn(name, proto, client, vsKey string, at time.Time) (*conn, bool, error) {
	key := f.connKey(proto, client, vsKey)
	if old, ok := f.conns[key]; ok {
		if old.state == "ESTABLISHED" && proto == "TCP" && !old.abandoned {
			return nil, false, fmt.Errorf("client %s is already connected to %s", client, vsKey)
		}
		reuse := f.sysctlValue(ipvs.SysctlConnReuseMode)
		nodest := f.sysctlValue(ipvs.SysctlExpireNodestConn) == 1
		oldCT := f.usesOldConntrack()
		// ip_vs_core.c ip_vs_in, for a SYN that finds an entry. A quiescent
		// destination with expire_nodest_conn reschedules; without
		// fixQuiescentReuse only under conn_reuse_mode != 0.
		// conn_reuse_mode != 0 also reschedules an entry that is not
		// controlled by a template and is in TIME_WAIT or CLOSE
		// (is_new_conn_expected).
		if proto == "TCP" {
			resched := false
			switch {
			case nodest && old.dest.available && old.dest.rs.Weight == 0 && (reuse != 0 || f.quiescentReschedAnyMode()):
				resched = true
			case reuse != 0 && old.template == nil && (old.state == "TIME_WAIT" || old.state == "CLOSE"):
				resched = true
			}
			if resched {
				f.drop(old, at)
				if oldCT {
					return nil, true, nil
				}
				return f.newConn(name, proto, client, vsKey, at)
			}
		}
		if old.state == "ESTABLISHED" && proto == "TCP" && old.dest.available {
			// Not rescheduled: the SYN is forwarded on the abandoned entry
			// to the old server, whose socket still holds the connection
			// and answers with a challenge ACK; the client, in SYN_SENT,
			// resets (closing the server's socket and moving the entry to
			// CLOSE) and sends its SYN again at once, not after its 1s
			// timer (net/ipv4/tcp_input.c tcp_rcv_synsent_state_process
			// re-arms it at TCP_TIMEOUT_MIN). That SYN meets an entry in
			// CLOSE. Measured: ~30ms on 6.1 under QEMU.
			old.state, old.expires, old.abandoned = "CLOSE", at.Add(CloseTimeout), false
			return f.syn(name, proto, client, vsKey, at)
		}
		if !old.dest.available {
			// The destination is gone. With expire_nodest_conn the entry
			// goes; with fixNodestConnWork (5.9) the SYN then goes on to be
			// scheduled afresh (its conntrack entry is new, unconfirmed);
			// without, it is dropped and its retransmission, a second
			// later, is scheduled. Without expire_nodest_conn the SYN is
			// dropped and the entry stays.
			if nodest {
				f.drop(old, at)
				if fixNodestConnWork.in(f.kernel) {
					return f.newConn(name, proto, client, vsKey, at)
				}
			}
			return nil, true, nil
		}
		// Reuse the entry: the new connection goes where the old one went,
		// weight 0 or not.
		old.state, old.abandoned = "ESTABLISHED", false
		old.name = name
		if proto == "UDP" {
			old.state = "UDP"
		}
		old.expires = expiry(at, f.stateTimeout(old.state))
		return old, false, nil
	}
	return f.newConn(name, proto, client, vsKey, at)
}

// quiescentReschedAnyMode reports whether the kernel reschedules a SYN whose
// entry points at a quiescent destination (with expire_nodest_conn) whatever
// conn_reuse_mode says: mainline from 5.16, and the stable series that took
// the fix (Debian's 5.10 among them; see fixQuiescentReuse).
func (f *IPVS) quiescentReschedAnyMode() bool {
	return fixQuiescentReuse.in(f.kernel)
}

// usesOldConntrack reports whether, on a reused port, the kernel finds an
// old confirmed conntrack entry and drops the SYN: with vs/conntrack=1 on a
// kernel without fixUnconfirmedConntrack.
func (f *IPVS) usesOldConntrack() bool {
	return f.sysctlValue(ipvs.SysctlConntrack) == 1 && !fixUnconfirmedConntrack.in(f.kernel)
}

func expiry(at time.Time, d time.Duration) time.Time {
	if d == 0 {
		return time.Time{}
	}
	return at.Add(d)
}

func (f *IPVS) newConn(name, proto, client, vsKey string, at time.Time) (*conn, bool, error) {
	s, ok := f.services[vsKey]
	if !ok {
		return nil, false, nil
	}
	var tmpl *conn
	var d *dest
	if s.vs.Persistent {
		tkey := hostOf(client) + "|" + vsKey
		if t, ok := f.templates[tkey]; ok {
			quiescent := f.sysctlValue(ipvs.SysctlExpireQuiescentTemplate) == 1 && t.dest.rs.Weight == 0
			if !t.dest.available || quiescent {
				delete(f.templates, tkey) // invalidated; schedule afresh
			} else {
				tmpl, d = t, t.dest
			}
		}
		if tmpl == nil {
			d = s.schedule(hostOf(client))
			if d == nil {
				return nil, false, nil
			}
			tmpl = &conn{isTemplate: true, client: client, svc: s, vsKey: vsKey, dest: d, timeout: time.Duration(s.vs.Timeout) * time.Second}
			f.templates[tkey] = tmpl
		}
		tmpl.nControl++
		tmpl.expires = at.Add(tmpl.timeout)
	} else {
		d = s.schedule(hostOf(client))
		if d == nil {
			return nil, false, nil
		}
	}
	c := &conn{name: name, proto: proto, client: client, svc: s, vsKey: vsKey, dest: d, template: tmpl, state: "ESTABLISHED"}
	if proto == "UDP" {
		c.state = "UDP"
	}
	c.expires = expiry(at, f.stateTimeout(c.state))
	f.conns[f.connKey(proto, client, vsKey)] = c
	return c, false, nil
}

// endNamed is how the client's side of a named connection ends, whatever
// ends it: the name is forgotten and the table's timers are run up to now,
// so the caller sees the entry as the kernel would at this instant. The
// lock is held.
func (f *IPVS) endNamed(name string) (*conn, time.Time, error) {
	c, ok := f.named[name]
	if !ok {
		return nil, time.Time{}, fmt.Errorf("no connection named %q", name)
	}
	delete(f.named, name)
	now := f.now()
	f.expire(now)
	return c, now, nil
}

// Close closes a named connection from the client side: TCP goes through
// FIN_WAIT to TIME_WAIT at once (both ends close promptly) and the entry
// expires two minutes later; a UDP entry expires after the UDP timeout.
func (f *IPVS) Close(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, now, err := f.endNamed(name)
	if err != nil {
		return err
	}
	if c.state == "GONE" {
		return nil
	}
	if c.proto == "TCP" {
		c.state = "TIME_WAIT"
	}
	c.expires = expiry(now, f.stateTimeout(c.state))
	if c.expires.IsZero() {
		c.expires = now
	}
	return nil
}

// Reset aborts a named connection with a client RST: the entry goes to
// CLOSE and expires 10s later.
func (f *IPVS) Reset(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, now, err := f.endNamed(name)
	if err != nil {
		return err
	}
	if c.state != "GONE" && c.proto == "TCP" {
		c.state, c.expires = "CLOSE", now.Add(CloseTimeout)
	}
	return nil
}

// Shutdown models a client FIN on a connection whose server keeps its own
// side open: a FIN from the client moves an ESTABLISHED entry to
// CLOSE_WAIT (ip_vs_proto_tcp.c, its state table), which lasts 60s.
func (f *IPVS) Shutdown(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, now, err := f.endNamed(name)
	if err != nil {
		return err
	}
	if c.state == "ESTABLISHED" && c.proto == "TCP" {
		c.state, c.expires = "CLOSE_WAIT", now.Add(CloseWaitTimeout)
	}
	return nil
}

// Abandon forgets a named connection on the client's side without a
// packet: the entry stays ESTABLISHED until it expires or a SYN from the
// same address and port finds it.
func (f *IPVS) Abandon(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, _, err := f.endNamed(name)
	if err != nil {
		return err
	}
	if c.state == "ESTABLISHED" {
		c.abandoned = true
	}
	return nil
}

// Ping models a data packet on an open connection: it flows while the entry
// and its destination exist. When the destination was deleted, the packet
// is dropped; with expire_nodest_conn the entry is expired too, so the
// client's retransmission meets the local stack and is reset, and without it
// the client hangs until it gives up.
func (f *IPVS) Ping(name string, _ time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.expire(f.now())
	c, ok := f.named[name]
	if !ok || c.state == "GONE" {
		return ipvs.ErrReset
	}
	if c.dest.available {
		c.expires = expiry(f.now(), f.stateTimeout(c.state))
		return nil
	}
	if f.sysctlValue(ipvs.SysctlExpireNodestConn) == 1 {
		f.drop(c, f.now())
		return ipvs.ErrReset
	}
	return ipvs.ErrTimeout
}

// Conn reports a named connection's entry.
func (f *IPVS) Conn(name string) (ipvs.ConnInfo, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.expire(f.now())
	c, ok := f.named[name]
	if !ok {
		// closed connections are still visible until they expire
		for _, cc := range f.conns {
			if cc.name == name {
				c, ok = cc, true
				break
			}
		}
	}
	if !ok {
		return ipvs.ConnInfo{State: "GONE"}, false
	}
	info := ipvs.ConnInfo{Server: c.dest.rs.Key(), State: c.state}
	if !c.expires.IsZero() {
		info.Expires = c.expires.Sub(f.now())
	}
	return info, true
}

var _ ipvs.Persistence = (*IPVS)(nil)

// Template is the real server a persistence template of the client's
// (an address) sends its next connection to vsKey to, as newConn would
// use it now: none when the template has expired, its server is gone, or
// the server is quiescent under expire_quiescent_template.
func (f *IPVS) Template(client, vsKey string) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.expire(f.now())
	t, ok := f.templates[client+"|"+vsKey]
	if !ok {
		return "", false
	}
	quiescent := f.sysctlValue(ipvs.SysctlExpireQuiescentTemplate) == 1 && t.dest.rs.Weight == 0
	if !t.dest.available || quiescent {
		return "", false
	}
	return t.dest.rs.Key(), true
}
