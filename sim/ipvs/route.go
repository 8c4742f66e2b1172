package ipvs

import (
	"fmt"
	"math/big"
	"net"
	"strconv"
	"strings"

	"github.com/proxysim/proxysim/sim/iptables"
	"github.com/proxysim/proxysim/sim/route"
)

// PathView is what the IPVS mode's tracer reads of a node: the iptables
// rules, the ipsets, the IPVS table, the addresses that are the node's
// own (its NodeIPs and kube-ipvs0's) and, for persistent virtual servers,
// the clients' persistence templates.
type PathView struct {
	Rules   iptables.Ruleset
	Sets    map[string]IPSetContents
	Table   []VirtualServerWithReals
	Local   []net.IP
	Persist Persistence // nil: no client has a template

	// Indexes of the virtual servers and set members, built on first use
	// so that tracing many connections through one view costs what each
	// path does: a view must not change once traced (nor be traced from
	// two goroutines at once).
	vsIndex  map[string]*VirtualServerWithReals
	setIndex map[string]map[string][]IPSetEntry
	localSet map[string]bool
}

// VirtualServerWithReals is one virtual server and its real servers, in
// the kernel's listing order (newest first), which sh's buckets follow.
type VirtualServerWithReals struct {
	VS    VirtualServer
	Reals []RealServer
}

// Persistence answers, for a client address and a persistent virtual
// server's key, the real server ("ip:port") its live persistence template
// names, if it has one that would still be used (fakes.IPVS keeps them
// from `connect` steps).
type Persistence interface {
	Template(client, vsKey string) (server string, ok bool)
}

// ReadPath reads a PathView from a dataplane that has ipsets and
// iptables; nodeIPs are the node's addresses besides kube-ipvs0's.
func ReadPath(dp Dataplane, nodeIPs []string) (*PathView, error) {
	if dp.IPSets == nil || dp.IPTables == nil {
		return nil, fmt.Errorf("the IPVS dataplane has no ipsets and iptables rules to trace (set proxy.packetPath)")
	}
	v := &PathView{}
	rs := iptables.NewRuleset()
	for _, t := range iptables.Tables {
		text, err := dp.IPTables.Save(t)
		if err != nil {
			return nil, err
		}
		if rs, err = iptables.Apply(rs, text); err != nil {
			return nil, fmt.Errorf("reading iptables-save of %s: %w", t, err)
		}
	}
	v.Rules = rs
	var err error
	if v.Sets, err = ReadIPSets(dp.IPSets); err != nil {
		return nil, err
	}
	vss, err := dp.IPVS.VirtualServers()
	if err != nil {
		return nil, err
	}
	for _, vs := range vss {
		reals, err := dp.IPVS.RealServers(vs)
		if err != nil {
			return nil, err
		}
		v.Table = append(v.Table, VirtualServerWithReals{VS: vs, Reals: reals})
	}
	bound, err := dp.Addresses.Addresses(DummyDevice)
	if err != nil {
		return nil, err
	}
	for _, a := range append(append([]string(nil), nodeIPs...), bound...) {
		if ip := net.ParseIP(a); ip != nil {
			v.Local = append(v.Local, ip)
		}
	}
	if p, ok := dp.IPVS.(Persistence); ok {
		v.Persist = p
	}
	return v, nil
}

// Route traces the first packet of a new connection through the node's
// packet path in IPVS mode and returns where it ends up, each outcome with
// its exact share, and the part of each share that leaves masqueraded.
//
// The path, as the kernel takes it with kube-proxy's rules: a packet from
// elsewhere meets nat PREROUTING, then (its destination being one of the
// node's addresses) filter INPUT, then IPVS at LOCAL_IN; a packet from
// the node (its source is one of the node's addresses) meets nat OUTPUT,
// then IPVS at LOCAL_OUT. A packet IPVS takes is sent to the real server
// through filter OUTPUT (where `-m ipvs` matches it) and nat POSTROUTING
// (KUBE-POSTROUTING masquerades the marked, and the hairpin of
// KUBE-LOOP-BACK). A virtual server with no real server of weight above 0
// answers ICMP port unreachable: REJECT (ip_vs_leave). A packet no
// virtual server takes goes on to its destination unchanged: ACCEPT once
// filter INPUT lets it in (a node's own packet to a local address comes
// back in through lo), ACCEPT through filter FORWARD for an address that
// is not the node's.
//
// Shares are per connection, as the scheduler spreads connections:
// rr gives each real server of weight above 0 the same share; wrr gives
// weight/sum; sh hashes the client address to one of 256 buckets dealt to
// the real servers in listing order, each taking as many as its weight,
// so one client's connections all go to one server (share 1), or nowhere
// (REJECT) when its bucket's server has weight 0. A persistent virtual
// server sends a client with a live template to the template's server.
func (v *PathView) Route(pkt route.Packet) (route.Shares, route.Shares, error) {
	t := &tracer{view: v, pkt: pkt, out: route.Shares{}, masq: route.Shares{}}
	if v.localSet == nil {
		v.localSet = make(map[string]bool, len(v.Local))
		for _, ip := range v.Local {
			v.localSet[ip.String()] = true
		}
	}
	t.w = &iptables.Walker{Rules: v.Rules, Local: v.Local, LocalSet: v.localSet, Packet: pkt, Sets: t.matchSet}
	fromNode := t.w.IsLocal(pkt.Src)
	hook := "PREROUTING"
	if fromNode {
		hook = "OUTPUT"
	}
	one := big.NewRat(1, 1)
	nat, err := t.w.Chain("nat", hook, iptables.Path{Dst: pkt.Dst, DPort: pkt.DPort}, one)
	if err != nil {
		return nil, nil, err
	}
	for _, b := range nat {
		if b.Verdict == route.Drop || b.Verdict == route.Reject {
			t.out.Add(b.Verdict, b.W)
			continue
		}
		p := b.Path
		p.Filter = true
		switch {
		case fromNode:
			err = t.ipvs(p, b.W, true)
		case !t.w.IsLocal(p.Dst):
			err = t.filter("FORWARD", p, b.W, func(p iptables.Path, w *big.Rat) error {
				t.out.Add(route.Accept, w)
				return nil
			})
		default:
			err = t.filter("INPUT", p, b.W, func(p iptables.Path, w *big.Rat) error { return t.ipvs(p, w, false) })
		}
		if err != nil {
			return nil, nil, err
		}
	}
	return t.out, t.masq, nil
}

type tracer struct {
	view      *PathView
	pkt       route.Packet
	w         *iptables.Walker
	out, masq route.Shares
}

func (t *tracer) matchSet(name, flags string, src net.IP, proto string, p iptables.Path) (bool, error) {
	c, ok := t.view.Sets[name]
	if !ok {
		return false, fmt.Errorf("no ipset %s", name)
	}
	// The index's candidates are the members whose first dimensions
	// (address, protocol and port) are the packet's; Match then judges
	// them alone, as it would have judged the whole set.
	cands, ok := t.view.setCandidates(c, flags, src, p.Dst, proto, p.DPort)
	if !ok {
		return c.Match(flags, src, p.Dst, proto, p.DPort)
	}
	if len(cands) == 0 {
		return false, nil
	}
	return IPSetContents{Set: c.Set, Entries: cands}.Match(flags, src, p.Dst, proto, p.DPort)
}

// setCandidates looks a packet up in the set's index: false when the
// set's type or flags are not indexed.
func (v *PathView) setCandidates(c IPSetContents, flags string, src, dst net.IP, proto string, dport int) ([]string, bool) {
	dirs := strings.Split(flags, ",")
	if len(dirs) < c.Set.Type.dims() {
		return nil, false
	}
	// A bitmap:port holds ports alone, matched against the destination
	// port of a packet with a protocol. A source port dimension is Match's
	// error to report.
	bitmap := c.Set.Type == BitmapPort
	if bitmap && dirs[0] != "dst" || c.Set.Type.dims() > 1 && dirs[1] != "dst" {
		return nil, false
	}
	first := dst
	if dirs[0] == "src" {
		first = src
	}
	if v.setIndex == nil {
		v.setIndex = map[string]map[string][]IPSetEntry{}
	}
	idx, built := v.setIndex[c.Set.Name]
	if !built {
		idx = map[string][]IPSetEntry{}
		for _, raw := range c.Entries {
			e, err := ParseIPSetEntry(c.Set, raw)
			if err != nil {
				return nil, false // Match reports it
			}
			k := strconv.Itoa(e.Port)
			if !bitmap {
				k = setKey(c.Set.Type, net.ParseIP(e.IP), e.Protocol, e.Port)
			}
			idx[k] = append(idx[k], IPSetEntry{IP: raw})
		}
		v.setIndex[c.Set.Name] = idx
	}
	if bitmap {
		if proto == "" {
			return nil, true
		}
		var out []string
		for _, e := range idx[strconv.Itoa(dport)] {
			out = append(out, e.IP)
		}
		return out, true
	}
	var out []string
	for _, e := range idx[setKey(c.Set.Type, first, proto, dport)] {
		out = append(out, e.IP)
	}
	return out, true
}

func setKey(t IPSetType, ip net.IP, proto string, port int) string {
	if t == HashIP {
		return ip.String()
	}
	return fmt.Sprintf("%s,%s:%d", ip, proto, port)
}

// filter runs the branches through a filter hook: DROP and REJECT end
// there, the accepted go on to next.
func (t *tracer) filter(hook string, p iptables.Path, w *big.Rat, next func(iptables.Path, *big.Rat) error) error {
	bs, err := t.w.Chain("filter", hook, p, w)
	if err != nil {
		return err
	}
	for _, b := range bs {
		if b.Verdict != route.Accept {
			t.out.Add(b.Verdict, b.W)
			continue
		}
		if err := next(b.Path, b.W); err != nil {
			return err
		}
	}
	return nil
}

// ipvs is IPVS's hook: a virtual server takes the packet to its real
// servers, or nothing takes it and it goes on to its destination.
func (t *tracer) ipvs(p iptables.Path, w *big.Rat, fromNode bool) error {
	vs := t.view.lookup(t.pkt.Protocol, p.Dst, p.DPort)
	if vs == nil {
		if !fromNode {
			t.out.Add(route.Accept, w)
			return nil
		}
		// Out through filter OUTPUT, and back in through lo to filter
		// INPUT when the destination is the node's.
		return t.filter("OUTPUT", p, w, func(p iptables.Path, w *big.Rat) error {
			if !t.w.IsLocal(p.Dst) {
				t.out.Add(route.Accept, w)
				return nil
			}
			return t.filter("INPUT", p, w, func(_ iptables.Path, w *big.Rat) error {
				t.out.Add(route.Accept, w)
				return nil
			})
		})
	}
	picks, err := t.schedule(vs)
	if err != nil {
		return err
	}
	if len(picks) == 0 {
		t.out.Add(route.Reject, w)
		return nil
	}
	for _, pk := range picks {
		q := p
		q.DNAT = pk.rs.Key()
		q.Dst, q.DPort = net.ParseIP(pk.rs.Address), int(pk.rs.Port)
		q.VS = iptables.VirtualAddr{Addr: net.ParseIP(vs.VS.Address), Proto: strings.ToLower(vs.VS.Protocol), Port: int(vs.VS.Port)}
		share := new(big.Rat).Mul(w, pk.share)
		err := t.filter("OUTPUT", q, share, func(q iptables.Path, w *big.Rat) error {
			post, err := t.w.Chain("nat", "POSTROUTING", q, w)
			if err != nil {
				return err
			}
			for _, b := range post {
				t.out.Add(q.DNAT, b.W)
				if b.Masquerade {
					t.masq.Add(q.DNAT, b.W)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func (v *PathView) lookup(proto string, dst net.IP, port int) *VirtualServerWithReals {
	if v.vsIndex == nil {
		v.vsIndex = make(map[string]*VirtualServerWithReals, len(v.Table))
		for i := range v.Table {
			vs := &v.Table[i]
			k := fmt.Sprintf("%s %s %d", strings.ToLower(vs.VS.Protocol), net.ParseIP(vs.VS.Address), vs.VS.Port)
			if _, dup := v.vsIndex[k]; !dup {
				v.vsIndex[k] = vs
			}
		}
	}
	return v.vsIndex[fmt.Sprintf("%s %s %d", strings.ToLower(proto), dst, port)]
}

type pick struct {
	rs    RealServer
	share *big.Rat
}

// schedule is where the virtual server sends a new connection of the
// packet's client, each real server with its share.
func (t *tracer) schedule(vs *VirtualServerWithReals) ([]pick, error) {
	if vs.VS.Persistent && t.view.Persist != nil {
		if server, ok := t.view.Persist.Template(t.pkt.Src.String(), vs.VS.Key()); ok {
			for _, rs := range vs.Reals {
				if rs.Key() == server {
					return []pick{{rs, big.NewRat(1, 1)}}, nil
				}
			}
		}
	}
	var up []RealServer
	sum := 0
	for _, rs := range vs.Reals {
		if rs.Weight > 0 {
			up = append(up, rs)
			sum += rs.Weight
		}
	}
	switch vs.VS.Scheduler {
	case "rr":
		out := make([]pick, 0, len(up))
		for _, rs := range up {
			out = append(out, pick{rs, big.NewRat(1, int64(len(up)))})
		}
		return out, nil
	case "wrr":
		out := make([]pick, 0, len(up))
		for _, rs := range up {
			out = append(out, pick{rs, big.NewRat(int64(rs.Weight), int64(sum))})
		}
		return out, nil
	case "sh":
		rs, ok := SourceHash(t.pkt.Src, vs.Reals)
		if !ok {
			return nil, nil
		}
		return []pick{{rs, big.NewRat(1, 1)}}, nil
	}
	return nil, fmt.Errorf("scheduler %q of %s is not modelled (rr, wrr, sh)", vs.VS.Scheduler, vs.VS.Key())
}

// SourceHash is the sh scheduler's pick for a client (the kernel's
// ip_vs_sh.c without the port and fallback flags): 256 buckets dealt to
// the real servers in listing order, each taking as many consecutive
// buckets as its weight (at least one), and the client's address hashed
// to one with hash_32. A bucket whose server has weight 0 picks nothing.
func SourceHash(client net.IP, reals []RealServer) (RealServer, bool) {
	if len(reals) == 0 {
		return RealServer{}, false
	}
	const bits = 8
	var fold uint32
	if ip4 := client.To4(); ip4 != nil {
		fold = uint32(ip4[0])<<24 | uint32(ip4[1])<<16 | uint32(ip4[2])<<8 | uint32(ip4[3])
	} else if ip6 := client.To16(); ip6 != nil {
		for i := 0; i < 16; i += 4 {
			fold ^= uint32(ip6[i])<<24 | uint32(ip6[i+1])<<16 | uint32(ip6[i+2])<<8 | uint32(ip6[i+3])
		}
	}
	bucket := int((fold * 0x61C88647) >> (32 - bits))
	i, count := 0, 0
	for b := 0; b < bucket; b++ {
		count++
		if count >= reals[i].Weight {
			i = (i + 1) % len(reals)
			count = 0
		}
	}
	rs := reals[i]
	return rs, rs.Weight > 0
}
