package ipvsmode

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/replay"
	"github.com/proxysim/proxysim/sim"
	"github.com/proxysim/proxysim/sim/ipvs"
	"github.com/proxysim/proxysim/sim/trace"
)

// The operator's vocabulary: what someone chasing an IPVS bug does on a
// node behind kube-proxy's back (ipvsadm, sysctl -w) and what they look at
// (data on an open connection, timeouts, connection entries, ARP). Each
// part runs on the fake and, unchanged, on a real kernel.

var _ = func() bool {
	plugins.actions = append(plugins.actions,
		func() scenarios.Action { return &ipvsStep{} },
		func() scenarios.Action { return &sysctlsStep{} },
		func() scenarios.Action { return &sendStep{} },
		func() scenarios.Action { return &resetStep{} },
		func() scenarios.Action { return &abandonStep{} },
		func() scenarios.Action { return &shutdownStep{} },
	)
	plugins.expectations = append(plugins.expectations,
		func() scenarios.Expectation { return &sendsExpect{} },
		func() scenarios.Expectation { return &timeoutsExpect{} },
		func() scenarios.Expectation { return &expiryExpect{} },
		func() scenarios.Expectation { return &arpExpect{} },
		func() scenarios.Expectation { return &arpSenderExpect{} },
	)
	return true
}()

func validateSysctls(v *scenarios.Validator, at scenarios.Pos, values map[string]int) {
	for _, name := range slices.Sorted(maps.Keys(values)) {
		p := scenarios.Pos{Line: at.Line, Column: at.Column, Path: at.Path + "." + name}
		if !knownSysctls[name] {
			v.Errorf(p, "unknown sysctl %q (known: %s)", name, strings.Join(slices.Sorted(maps.Keys(knownSysctls)), ", "))
		} else if values[name] < 0 {
			v.Errorf(p, "must not be negative, got %d", values[name])
		}
	}
}

// writeNodeSysctls writes the node's own sysctls once, after the proxier's
// first startup writes: a restart's writes win over them, as on a node.
func (d *Dataplane) writeNodeSysctls(w *sim.World) error {
	if d.sysctlsWritten || len(d.sysctls) == 0 {
		return nil
	}
	d.sysctlsWritten = true
	return writeSysctls(d, w.Trace.Add, d.sysctls)
}

func writeSysctls(d *Dataplane, tr func(trace.Event), values map[string]int) error {
	d.pace()
	for _, name := range slices.Sorted(maps.Keys(values)) {
		tr(trace.Event{Kind: trace.Step, Op: "sysctl", Detail: fmt.Sprintf("sysctl -w %s=%d (operator)", name, values[name])})
		if err := d.raw.Sysctl.Set(name, values[name]); err != nil {
			return fmt.Errorf("sysctl -w %s=%d: %w", name, values[name], err)
		}
	}
	return nil
}

// sysctlsStep writes sysctls as an operator would: `sysctls: {name: N}`.
type sysctlsStep struct {
	Sysctls map[string]int `yaml:"sysctls"`
	Src     scenarios.Src
}

func (s *sysctlsStep) Validate(v *scenarios.Validator) {
	if s.Sysctls != nil {
		if len(s.Sysctls) == 0 {
			v.Errorf(s.Src.At("sysctls"), "name at least one sysctl")
		}
		validateSysctls(v, s.Src.At("sysctls"), s.Sysctls)
	}
}

func (s *sysctlsStep) Do(r *replay.Run) error {
	if len(s.Sysctls) == 0 {
		return nil
	}
	return writeSysctls(dataplaneOf(r), r.Trace, s.Sysctls)
}

// IPVSOp is one ipvsadm command on the node: a real server's weight
// (`ipvsadm -e -w`), its deletion (`-d`), or the whole table cleared (`-C`).
type IPVSOp struct {
	Service string `yaml:"service"` // "TCP 10.96.0.10:80"
	Server  string `yaml:"server"`  // "10.244.1.2:8080"
	Weight  *int   `yaml:"weight"`
	Delete  bool   `yaml:"delete"`
	Flush   bool   `yaml:"flush"`
	Src     scenarios.Src
}

type ipvsStep struct {
	IPVS *IPVSOp `yaml:"ipvs"`
}

func (s *ipvsStep) Validate(v *scenarios.Validator) {
	op := s.IPVS
	if op == nil {
		return
	}
	n := 0
	for _, given := range []bool{op.Weight != nil, op.Delete, op.Flush} {
		if given {
			n++
		}
	}
	if n != 1 {
		v.Errorf(scenarios.Pos{Line: op.Src.Line, Column: op.Src.Column, Path: op.Src.Path}, "say one thing to do: weight, delete: true or flush: true")
		return
	}
	if op.Flush {
		if op.Service != "" || op.Server != "" {
			v.Errorf(op.Src.At("flush"), "flush clears the whole table: it takes no service or server")
		}
		return
	}
	if _, _, _, err := parseService(op.Service); err != nil {
		v.Errorf(op.Src.At("service"), "%v", err)
	}
	if _, _, err := splitHostPort(op.Server); err != nil {
		v.Errorf(op.Src.At("server"), "%v", err)
	}
	if op.Weight != nil && *op.Weight < 0 {
		v.Errorf(op.Src.At("weight"), "must not be negative, got %d", *op.Weight)
	}
}

// parseService reads "TCP 10.96.0.10:80".
func parseService(s string) (proto, addr string, port uint16, err error) {
	f := strings.Fields(s)
	if len(f) != 2 || (f[0] != "TCP" && f[0] != "UDP" && f[0] != "SCTP") {
		return "", "", 0, fmt.Errorf("want PROTOCOL IP:PORT such as \"TCP 10.96.0.10:80\", got %q", s)
	}
	addr, port, err = splitHostPort(f[1])
	return f[0], addr, port, err
}

func (s *ipvsStep) Do(r *replay.Run) error {
	op, d := s.IPVS, dataplaneOf(r)
	if op == nil {
		return nil
	}
	d.pace()
	h := d.raw.IPVS
	if op.Flush {
		r.Step("ipvs", "", "ipvsadm -C (operator)")
		vss, err := h.VirtualServers()
		if err != nil {
			return err
		}
		for _, vs := range vss {
			if err := h.DeleteVirtualServer(vs); err != nil {
				return fmt.Errorf("ipvsadm -C: %w", err)
			}
		}
		return nil
	}
	vs, rs, err := findRealServer(h, op.Service, op.Server)
	if err != nil {
		return err
	}
	if op.Delete {
		r.Step("ipvs", "", fmt.Sprintf("ipvsadm -d %s -r %s (operator)", op.Service, op.Server))
		return h.DeleteRealServer(vs, rs)
	}
	rs.Weight = *op.Weight
	r.Step("ipvs", "", fmt.Sprintf("ipvsadm -e %s -r %s -w %d (operator)", op.Service, op.Server, rs.Weight))
	return h.UpdateRealServer(vs, rs)
}

func findRealServer(h ipvs.Handle, service, server string) (ipvs.VirtualServer, ipvs.RealServer, error) {
	proto, addr, port, _ := parseService(service)
	vss, err := h.VirtualServers()
	if err != nil {
		return ipvs.VirtualServer{}, ipvs.RealServer{}, err
	}
	for _, vs := range vss {
		if vs.Protocol != proto || vs.Address != addr || vs.Port != port {
			continue
		}
		rss, err := h.RealServers(vs)
		if err != nil {
			return vs, ipvs.RealServer{}, err
		}
		for _, rs := range rss {
			if rs.Key() == server {
				return vs, rs, nil
			}
		}
		return vs, ipvs.RealServer{}, fmt.Errorf("virtual server %s has no real server %s", service, server)
	}
	return ipvs.VirtualServer{}, ipvs.RealServer{}, fmt.Errorf("no virtual server %s", service)
}

// Send sends data on an open connection and waits for the answer.
type Send struct {
	Conn    string              `yaml:"conn"`
	Timeout *scenarios.Duration `yaml:"timeout"` // how long to wait (default 3s)
	Src     scenarios.Src
}

// DefaultSendTimeout is how long a send waits for its answer.
const DefaultSendTimeout = 3 * time.Second

type sendStep struct {
	Send *Send `yaml:"send"`
}

func (s *sendStep) Validate(v *scenarios.Validator) {
	if s.Send == nil {
		return
	}
	if !connsOf(v).open[s.Send.Conn] {
		v.Errorf(s.Send.Src.At("conn"), "no open connection named %q", s.Send.Conn)
	}
	if s.Send.Timeout != nil && s.Send.Timeout.D() == 0 {
		v.Errorf(s.Send.Src.At("timeout"), "must be positive")
	}
}

func (s *sendStep) Do(r *replay.Run) error {
	c, d := s.Send, dataplaneOf(r)
	if c == nil {
		return nil
	}
	snd, ok := d.traffic.(ipvs.Sender)
	if !ok {
		return fmt.Errorf("the %s dataplane cannot send on connections", d.name)
	}
	timeout := DefaultSendTimeout
	if c.Timeout != nil {
		timeout = c.Timeout.D()
	}
	d.pace()
	err := snd.Ping(c.Conn, timeout)
	out := "delivered"
	switch {
	case errors.Is(err, ipvs.ErrReset):
		out = "reset"
	case errors.Is(err, ipvs.ErrTimeout):
		out = "dropped"
	case err != nil:
		out = err.Error()
	}
	d.sends[c.Conn] = out
	r.Trace(trace.Event{Kind: trace.Conn, Op: "send", Object: c.Conn, Detail: out})
	return nil
}

// ConnRef names a connection.
type ConnRef struct {
	Conn string `yaml:"conn"`
	Src  scenarios.Src
}

// validateEnding checks that a step ending a connection (reset, abandon,
// shutdown) names an open one, which is then no longer open.
func validateEnding(v *scenarios.Validator, c *ConnRef) {
	if c == nil {
		return
	}
	st := connsOf(v)
	if !st.open[c.Conn] {
		v.Errorf(c.Src.At("conn"), "no open connection named %q", c.Conn)
	}
	delete(st.open, c.Conn)
}

// endConn ends connection c with the dataplane's Sender method end,
// traced as op; verb says what a dataplane without a Sender cannot do.
func endConn(r *replay.Run, c *ConnRef, op, verb string, end func(ipvs.Sender, string) error) error {
	d := dataplaneOf(r)
	if c == nil {
		return nil
	}
	snd, ok := d.traffic.(ipvs.Sender)
	if !ok {
		return fmt.Errorf("the %s dataplane cannot %s", d.name, verb)
	}
	d.pace()
	r.Trace(trace.Event{Kind: trace.Conn, Op: op, Object: c.Conn})
	return end(snd, c.Conn)
}

// resetStep aborts a connection with a client RST: `reset: {conn: NAME}`.
type resetStep struct {
	Reset *ConnRef `yaml:"reset"`
}

func (s *resetStep) Validate(v *scenarios.Validator) { validateEnding(v, s.Reset) }

func (s *resetStep) Do(r *replay.Run) error {
	return endConn(r, s.Reset, "reset", "reset connections", ipvs.Sender.Reset)
}

// sendsExpect: the latest send on each named connection was delivered,
// dropped (no answer in time) or reset.
type sendsExpect struct {
	Sends map[string]string `yaml:"sends"`
	Src   scenarios.Src
}

var sendOutcomes = map[string]bool{"delivered": true, "dropped": true, "reset": true}

func (e *sendsExpect) Validate(v *scenarios.Validator) {
	for _, name := range slices.Sorted(maps.Keys(e.Sends)) {
		p := e.Src.At("sends")
		p.Path += "." + name
		if !connsOf(v).opened[name] {
			v.Errorf(p, "no connection named %q has been opened", name)
		}
		if !sendOutcomes[e.Sends[name]] {
			v.Errorf(p, "want delivered, dropped or reset, got %q", e.Sends[name])
		}
	}
}

func (e *sendsExpect) Check(r *replay.Run) {
	d := dataplaneOf(r)
	for _, name := range slices.Sorted(maps.Keys(e.Sends)) {
		got, ok := d.sends[name]
		if !ok {
			got = "(nothing sent)"
		}
		if got != e.Sends[name] {
			p := e.Src.At("sends")
			p.Path += "." + name
			r.Fail(p, "sends."+name, e.Sends[name], got)
		}
	}
}

// timeoutsExpect: the IPVS timeouts in force, as `ipvsadm -L --timeout`.
type timeoutsExpect struct {
	Timeouts *Timeouts `yaml:"timeouts"`
	Src      scenarios.Src
}

func (e *timeoutsExpect) Validate(v *scenarios.Validator) {
	if t := e.Timeouts; t != nil && t.TCP == 0 && t.TCPFin == 0 && t.UDP == 0 {
		v.Errorf(e.Src.At("timeouts"), "say what to expect: tcp, tcpFin or udp")
	}
}

func (e *timeoutsExpect) Check(r *replay.Run) {
	t := e.Timeouts
	if t == nil {
		return
	}
	d := dataplaneOf(r)
	tr, ok := d.raw.IPVS.(ipvs.TimeoutReader)
	if !ok {
		r.Fail(e.Src.At("timeouts"), "timeouts", "timeouts", "the "+d.name+" dataplane cannot read them")
		return
	}
	d.pace()
	got, err := tr.ReadTimeouts()
	for _, c := range []struct {
		key       string
		want, got time.Duration
	}{{"tcp", t.TCP.D(), got.TCP}, {"tcpFin", t.TCPFin.D(), got.TCPFin}, {"udp", t.UDP.D(), got.UDP}} {
		p := e.Src.At("timeouts")
		p.Path += "." + c.key
		switch {
		case c.want == 0:
		case err != nil:
			r.Fail(p, "timeouts."+c.key, c.want.String(), err.Error())
		case c.got != c.want:
			r.Fail(p, "timeouts."+c.key, c.want.String(), c.got.String())
		}
	}
}

// ExpiryExpect bounds how long a connection's entry has left.
type ExpiryExpect struct {
	AtLeast *scenarios.Duration `yaml:"atLeast"`
	AtMost  *scenarios.Duration `yaml:"atMost"`
	Src     scenarios.Src
}

// expiryExpect: `connExpiry: {NAME: {atLeast, atMost}}`, the time left
// before the named connection's IPVS entry expires by itself (the kernel
// shows whole seconds; an entry that is gone fails).
type expiryExpect struct {
	ConnExpiry map[string]ExpiryExpect `yaml:"connExpiry"`
	Src        scenarios.Src
}

func (e *expiryExpect) Validate(v *scenarios.Validator) {
	for _, name := range slices.Sorted(maps.Keys(e.ConnExpiry)) {
		x := e.ConnExpiry[name]
		if !connsOf(v).opened[name] {
			v.Errorf(e.Src.At("connExpiry"), "no connection named %q has been opened", name)
		}
		switch {
		case x.AtLeast == nil && x.AtMost == nil:
			v.Errorf(scenarios.Pos{Line: x.Src.Line, Column: x.Src.Column, Path: x.Src.Path}, "say what to expect: atLeast or atMost")
		case x.AtLeast != nil && x.AtMost != nil && *x.AtMost < *x.AtLeast:
			v.Errorf(x.Src.At("atMost"), "atMost %v is below atLeast %v", x.AtMost, x.AtLeast)
		}
	}
}

func (e *expiryExpect) Check(r *replay.Run) {
	d := dataplaneOf(r)
	for _, name := range slices.Sorted(maps.Keys(e.ConnExpiry)) {
		x := e.ConnExpiry[name]
		if d.traffic == nil {
			r.Fail(x.Src.At("atLeast"), "connExpiry."+name, "an entry", "the "+d.name+" dataplane has no connections")
			continue
		}
		d.pace()
		info, ok := d.traffic.Conn(name)
		got := info.Expires.String()
		if !ok || info.State == "GONE" {
			got = "no entry"
		}
		if x.AtLeast != nil && (got == "no entry" || info.Expires < x.AtLeast.D()) {
			r.Fail(x.Src.At("atLeast"), "connExpiry."+name+".atLeast", "at least "+x.AtLeast.String(), got)
		}
		if x.AtMost != nil && (got == "no entry" || info.Expires > x.AtMost.D()) {
			r.Fail(x.Src.At("atMost"), "connExpiry."+name+".atMost", "at most "+x.AtMost.String(), got)
		}
	}
}

// arpExpect: `arp: {IP: answered|silent}`, whether a neighbour on the
// client's segment gets an ARP answer for the address (strictARP).
type arpExpect struct {
	ARP map[string]string `yaml:"arp"`
	Src scenarios.Src
}

func (e *arpExpect) Validate(v *scenarios.Validator) {
	for _, ip := range slices.Sorted(maps.Keys(e.ARP)) {
		p := e.Src.At("arp")
		p.Path += "." + ip
		if net.ParseIP(ip) == nil {
			v.Errorf(p, "%q is not an IP address", ip)
		}
		if w := e.ARP[ip]; w != "answered" && w != "silent" {
			v.Errorf(p, "want answered or silent, got %q", w)
		}
	}
}

func (e *arpExpect) Check(r *replay.Run) {
	d := dataplaneOf(r)
	for _, ip := range slices.Sorted(maps.Keys(e.ARP)) {
		p := e.Src.At("arp")
		p.Path += "." + ip
		if d.arp == nil {
			r.Fail(p, "arp."+ip, e.ARP[ip], "the "+d.name+" dataplane cannot ask")
			continue
		}
		d.pace()
		ok, err := d.arp(ip)
		got := "silent"
		switch {
		case err != nil:
			got = err.Error()
		case ok:
			got = "answered"
		}
		if got != e.ARP[ip] {
			r.Fail(p, "arp."+ip, e.ARP[ip], got)
		}
	}
}

// arpSenderExpect: `arpSender: {SRC: SENDER}`, the sender address the node
// names in its ARP request when a datagram from SRC (a kube-ipvs0 address)
// leaves for a neighbour on the client's segment (strictARP's
// arp_announce).
type arpSenderExpect struct {
	ARPSender map[string]string `yaml:"arpSender"`
	Src       scenarios.Src
}

func (e *arpSenderExpect) Validate(v *scenarios.Validator) {
	for _, ip := range slices.Sorted(maps.Keys(e.ARPSender)) {
		p := e.Src.At("arpSender")
		p.Path += "." + ip
		if net.ParseIP(ip) == nil {
			v.Errorf(p, "%q is not an IP address", ip)
		}
		if net.ParseIP(e.ARPSender[ip]) == nil {
			v.Errorf(p, "want the sender IP address, got %q", e.ARPSender[ip])
		}
	}
}

func (e *arpSenderExpect) Check(r *replay.Run) {
	d := dataplaneOf(r)
	for _, ip := range slices.Sorted(maps.Keys(e.ARPSender)) {
		p := e.Src.At("arpSender")
		p.Path += "." + ip
		if d.arpSender == nil {
			r.Fail(p, "arpSender."+ip, e.ARPSender[ip], "the "+d.name+" dataplane cannot send")
			continue
		}
		d.pace()
		got, err := d.arpSender(ip)
		if err != nil {
			got = err.Error()
		}
		if got != e.ARPSender[ip] {
			r.Fail(p, "arpSender."+ip, e.ARPSender[ip], got)
		}
	}
}

// abandonStep makes the client forget a connection without a packet:
// `abandon: {conn: NAME}`. Its entry stays ESTABLISHED (a client pod gone
// without closing, whose address and port come back later).
type abandonStep struct {
	Abandon *ConnRef `yaml:"abandon"`
}

func (s *abandonStep) Validate(v *scenarios.Validator) { validateEnding(v, s.Abandon) }

func (s *abandonStep) Do(r *replay.Run) error {
	return endConn(r, s.Abandon, "abandon", "abandon connections", ipvs.Sender.Abandon)
}

// shutdownStep closes the client's sending side while the server keeps
// its own open: `shutdown: {conn: NAME}`. The entry waits in CLOSE_WAIT.
type shutdownStep struct {
	Shutdown *ConnRef `yaml:"shutdown"`
}

func (s *shutdownStep) Validate(v *scenarios.Validator) { validateEnding(v, s.Shutdown) }

func (s *shutdownStep) Do(r *replay.Run) error {
	return endConn(r, s.Shutdown, "shutdown", "shut connections down", ipvs.Sender.Shutdown)
}
