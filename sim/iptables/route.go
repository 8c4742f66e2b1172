package iptables

import (
	"fmt"
	"github.com/proxysim/proxysim/sim/route"
	"math/big"
	"net"
	"net/netip"
	"slices"
	"sort"
	"time"
)

// Packet is the first packet of a new connection, and Shares where it ends
// up: the mode-neutral vocabulary of sim/route, which the scenario
// format's route expectation reads for every mode.
type (
	Packet = route.Packet
	Shares = route.Shares
)

// Verdicts a route can end in besides an endpoint.
const (
	VerdictAccept = route.Accept // delivered to its original destination, unchanged
	VerdictDrop   = route.Drop
	VerdictReject = route.Reject
)

// Recent is the Path of the kernel's `recent` match (xt_recent): for each
// list, each source address and when a rule last --set it.
type Recent map[string]map[string]time.Time

// History is what the tracer knows of earlier connections: the recent
// lists, read at Now.
type History struct {
	Recent Recent
	Now    time.Time
}

// Remember records, at h.Now, that src's connection took a path that set
// the given lists (the --set of the endpoint chain it was DNATed in).
func (h History) Remember(src net.IP, lists []string) {
	for _, l := range lists {
		if h.Recent[l] == nil {
			h.Recent[l] = map[string]time.Time{}
		}
		h.Recent[l][src.String()] = h.Now
	}
}

// Route traces pkt through rs and returns each outcome's exact share.
// local are the node's own addresses (addrtype LOCAL; a packet from one of
// them is generated on the node): a locally generated packet takes nat
// OUTPUT then filter OUTPUT; any other nat PREROUTING then filter INPUT
// (when its destination, after DNAT, is local) or FORWARD.
//
// Every `-m statistic --mode random --probability P` rule splits the
// paths reaching it into P taken and 1-P not taken, with P the exact
// decimal kube-proxy printed: 0.3333333333 is not 1/3, so shares are exact
// for the rules as written and differ from 1/n by at most about 1e-10 per
// probabilistic rule on a path. The packet opens a new connection: ctstate
// is NEW (plus DNAT in filter once translated), marks start at 0, and the
// client has no history: `recent --rcheck` never matches (see RouteWith).
func Route(rs Ruleset, local []net.IP, pkt Packet) (Shares, error) {
	sh, _, err := RouteWith(rs, local, pkt, History{})
	return sh, err
}

// RouteWith is Route for a client with a history: `recent --rcheck
// --seconds S` matches when the list holds the source, set at most S
// seconds before h.Now (as xt_recent compares), so ClientIP affinity keeps
// a client on the endpoint of its earlier connection. It also returns, for
// each outcome, the recent lists a connection ending there sets.
func RouteWith(rs Ruleset, local []net.IP, pkt Packet, h History) (Shares, map[string][]string, error) {
	t := &Walker{Rules: rs, Local: local, Packet: pkt, History: h}
	isLocal := t.isLocal(pkt.Src)
	natHook := "PREROUTING"
	if isLocal {
		natHook = "OUTPUT"
	}
	start := Path{Dst: pkt.Dst, DPort: pkt.DPort}
	nat, err := t.chain("nat", natHook, start, big.NewRat(1, 1), 0)
	if err != nil {
		return nil, nil, err
	}
	out := Shares{}
	sets := map[string][]string{}
	addSets := func(k string, l []string) {
		for _, n := range l {
			if !slices.Contains(sets[k], n) {
				sets[k] = append(sets[k], n)
			}
		}
	}
	for _, b := range nat {
		if b.Verdict == VerdictDrop || b.Verdict == VerdictReject {
			out.Add(b.Verdict, b.W)
			continue
		}
		b.Path.Filter = true
		filter, err := t.chain("filter", t.filterHook(isLocal, b.Path.Dst), b.Path, b.W, 0)
		if err != nil {
			return nil, nil, err
		}
		for _, f := range filter {
			v := f.Verdict
			if v == VerdictAccept && f.Path.DNAT != "" {
				v = f.Path.DNAT
			}
			out.Add(v, f.W)
			if f.W.Sign() > 0 {
				addSets(v, f.Path.Sets)
			}
		}
	}
	for k := range sets {
		sort.Strings(sets[k])
	}
	return out, sets, nil
}

// RouteMasquerade is Route that also follows each delivered connection
// through nat POSTROUTING, and returns, for each outcome, the part of its
// share that leaves masqueraded (KUBE-POSTROUTING's MASQUERADE of the
// 0x4000-marked, as kube-proxy's iptables proxier writes it).
func RouteMasquerade(rs Ruleset, local []net.IP, pkt Packet) (Shares, Shares, error) {
	return routeMasquerade(&Walker{Rules: rs, Local: local, Packet: pkt})
}

// Tracer traces many connections through a ruleset that does not change
// while it is used (a replay's end): each chain's rules are indexed by the
// destination they match, so that a packet meets only the rules that can
// match it (in their order), not every Service's.
type Tracer struct {
	rs    Ruleset
	local []net.IP
	index *ruleIndex
}

// NewTracer is a Tracer over rs; local are the node's addresses.
func NewTracer(rs Ruleset, local []net.IP) *Tracer {
	return &Tracer{rs: rs, local: local, index: &ruleIndex{chains: map[*Chain]*chainIndex{}}}
}

// RouteMasquerade is the package's RouteMasquerade over the tracer's rules.
func (x *Tracer) RouteMasquerade(pkt Packet) (Shares, Shares, error) {
	return routeMasquerade(&Walker{Rules: x.rs, Local: x.local, Packet: pkt, index: x.index})
}

type ruleIndex struct {
	chains map[*Chain]*chainIndex
}

// chainIndex is one chain's rules: those matching one destination address
// only (-d IP/32), by address; of the others, those matching one
// destination port (--dport), by port; and the rest, each list in rule
// order.
type chainIndex struct {
	byDst  map[netip.Addr][]int
	byPort map[int][]int
	rest   []int
}

// addrKey is an address as the index keys it (an IPv4 address in its
// 4-byte form, whichever form it came in).
func addrKey(ip net.IP) netip.Addr {
	a, _ := netip.AddrFromSlice(ip)
	return a.Unmap()
}

// candidates are c's rules a packet to dst:dport can match: three lists of
// rule indices, each in order, for the walker to merge.
func (x *ruleIndex) candidates(c *Chain, dst net.IP, dport int) (byDst, byPort, rest []int) {
	ci := x.chains[c]
	if ci == nil {
		ci = &chainIndex{byDst: map[netip.Addr][]int{}, byPort: map[int][]int{}}
		for i, r := range c.Rules {
			if r.Dst != nil && !r.NotDst {
				if ones, bits := r.Dst.Mask.Size(); ones == bits {
					k := addrKey(r.Dst.IP)
					ci.byDst[k] = append(ci.byDst[k], i)
					continue
				}
			}
			if r.DPort != 0 {
				ci.byPort[r.DPort] = append(ci.byPort[r.DPort], i)
				continue
			}
			ci.rest = append(ci.rest, i)
		}
		x.chains[c] = ci
	}
	return ci.byDst[addrKey(dst)], ci.byPort[dport], ci.rest
}

// ruleCursor walks a chain's rules in order: all of them, or the merge of
// an index's three lists.
type ruleCursor struct {
	all     int // the next rule, without an index
	n       int // how many rules the chain has
	indexed bool
	lists   [3][]int
}

func (rc *ruleCursor) next() (int, bool) {
	if !rc.indexed {
		if rc.all >= rc.n {
			return 0, false
		}
		rc.all++
		return rc.all - 1, true
	}
	best := -1
	for i, l := range rc.lists {
		if len(l) > 0 && (best < 0 || l[0] < rc.lists[best][0]) {
			best = i
		}
	}
	if best < 0 {
		return 0, false
	}
	k := rc.lists[best][0]
	rc.lists[best] = rc.lists[best][1:]
	return k, true
}

func routeMasquerade(t *Walker) (Shares, Shares, error) {
	pkt := t.Packet
	isLocal := t.isLocal(pkt.Src)
	natHook := "PREROUTING"
	if isLocal {
		natHook = "OUTPUT"
	}
	nat, err := t.chain("nat", natHook, Path{Dst: pkt.Dst, DPort: pkt.DPort}, big.NewRat(1, 1), 0)
	if err != nil {
		return nil, nil, err
	}
	out, masq := Shares{}, Shares{}
	for _, b := range nat {
		if b.Verdict == VerdictDrop || b.Verdict == VerdictReject {
			out.Add(b.Verdict, b.W)
			continue
		}
		b.Path.Filter = true
		filter, err := t.chain("filter", t.filterHook(isLocal, b.Path.Dst), b.Path, b.W, 0)
		if err != nil {
			return nil, nil, err
		}
		for _, f := range filter {
			if f.Verdict != VerdictAccept {
				out.Add(f.Verdict, f.W)
				continue
			}
			v := VerdictAccept
			if f.Path.DNAT != "" {
				v = f.Path.DNAT
			}
			post, err := t.chain("nat", "POSTROUTING", f.Path, f.W, 0)
			if err != nil {
				return nil, nil, err
			}
			for _, p := range post {
				out.Add(v, p.W)
				if p.Masquerade {
					masq.Add(v, p.W)
				}
			}
		}
	}
	return out, masq, nil
}

// Path is one packet's state on its way through the hooks: where it is
// headed (after any DNAT), its mark, and what it met on the way.
type Path struct {
	Dst    net.IP
	DPort  int
	Mark   uint32
	DNAT   string // ip:port once DNATed
	Filter bool   // in the filter table: ctstate has DNAT once translated
	// Sets are the recent lists --set on the way, shared copy-on-append.
	Sets []string
	// VS is the IPVS virtual server that took the packet, for the `-m
	// ipvs --vaddr --vproto --vport` match; zero before IPVS.
	VS VirtualAddr
}

// VirtualAddr is an IPVS virtual server's address, protocol (lower case)
// and port, as xt_ipvs matches it.
type VirtualAddr struct {
	Addr  net.IP
	Proto string
	Port  int
}

// Branch is one of the paths a packet takes through a chain, with its
// share, and the verdict it reached ("" while running, or when it
// returned from a user chain).
type Branch struct {
	Path    Path
	W       *big.Rat
	Verdict string
	// Masquerade: the branch was accepted by MASQUERADE (its source is
	// rewritten on the way out).
	Masquerade bool
}

// SetMatcher answers `-m set --match-set NAME FLAGS` for a packet from src
// (protocol proto) on path p; FLAGS is the comma-separated src/dst list.
type SetMatcher func(name, flags string, src net.IP, proto string, p Path) (bool, error)

// Walker runs one packet through the chains of a ruleset: the iptables
// tracer's engine, which a mode whose hooks differ (IPVS) drives chain by
// chain. Local are the node's own addresses (addrtype LOCAL), Sets
// answers ipset matches (nil: a rule with one is an error). Bridges are
// not modelled: `-m physdev --physdev-is-in` never matches.
type Walker struct {
	Rules   Ruleset
	Local   []net.IP
	Packet  Packet
	History History
	Sets    SetMatcher
	// LocalSet, if set, holds Local's addresses (IP.String()), for a node
	// with many (IPVS binds every Service IP to kube-ipvs0).
	LocalSet map[string]bool

	index *ruleIndex // nil: every rule is tried
}

// Chain runs the branches of the packet, in path p with share w, through
// chain name of table: see chain.
func (t *Walker) Chain(table, name string, p Path, w *big.Rat) ([]Branch, error) {
	return t.chain(table, name, p, w, 0)
}

// IsLocal reports whether ip is the node's (loopback or one of Local).
func (t *Walker) IsLocal(ip net.IP) bool { return t.isLocal(ip) }

// filterHook is the filter chain a packet meets after nat: OUTPUT when the
// node sent it, INPUT when its (translated) destination is the node's own,
// FORWARD otherwise.
func (t *Walker) filterHook(fromLocal bool, dst net.IP) string {
	switch {
	case fromLocal:
		return "OUTPUT"
	case t.isLocal(dst):
		return "INPUT"
	}
	return "FORWARD"
}

func (t *Walker) isLocal(ip net.IP) bool {
	if ip.IsLoopback() {
		return true
	}
	if t.LocalSet != nil {
		return t.LocalSet[ip.String()]
	}
	for _, l := range t.Local {
		if l.Equal(ip) {
			return true
		}
	}
	return false
}

// maxDepth bounds chain nesting: the kernel refuses loops, a ruleset
// parsed from text is not checked for them.
const maxDepth = 32

// chain runs the branches of one packet through a chain. Branches that
// reach a verdict are returned with it; those that fall off a user chain or
// RETURN are returned with no verdict, for the caller to continue; those
// that fall off a built-in chain take its policy.
func (t *Walker) chain(table, name string, st Path, w *big.Rat, depth int) ([]Branch, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("tracer: chains nest deeper than %d at %s", maxDepth, name)
	}
	c := t.Rules[table][name]
	if c == nil {
		return nil, fmt.Errorf("tracer: no chain %s in table %s", name, table)
	}
	live := []Branch{{Path: st, W: w}}
	var done []Branch
	rc := ruleCursor{n: len(c.Rules)}
	if t.index != nil {
		// Every branch of this call shares st's destination address and
		// port: only a DNAT, which ends the branch, changes them.
		a, b, r := t.index.candidates(c, st.Dst, st.DPort)
		rc.indexed, rc.lists = true, [3][]int{a, b, r}
	}
	for {
		k, ok := rc.next()
		if !ok {
			break
		}
		r := c.Rules[k]
		var next []Branch
		for _, b := range live {
			ok, err := t.matches(r, b.Path)
			if err != nil {
				return nil, fmt.Errorf("tracer: %s %s: %v", table, name, err)
			}
			if !ok {
				next = append(next, b)
				continue
			}
			taken := b.W
			if r.Probability != nil {
				taken = new(big.Rat).Mul(b.W, r.Probability)
				rest := new(big.Rat).Sub(b.W, taken)
				if rest.Sign() > 0 {
					next = append(next, Branch{Path: b.Path, W: rest})
				}
			}
			if taken.Sign() == 0 {
				continue
			}
			st := b.Path
			if r.RecentSet {
				st.Sets = append(st.Sets[:len(st.Sets):len(st.Sets)], r.RecentName)
			}
			switch r.Target {
			case "": // a match with no target only counts
				next = append(next, Branch{Path: st, W: taken})
			case "MARK":
				if r.HasOr {
					st.Mark |= r.OrMark
				}
				if r.HasXor {
					st.Mark ^= r.XorMark
				}
				next = append(next, Branch{Path: st, W: taken})
			case "RETURN":
				done = append(done, Branch{Path: st, W: taken})
			case "ACCEPT":
				done = append(done, Branch{Path: st, W: taken, Verdict: VerdictAccept})
			case "MASQUERADE":
				done = append(done, Branch{Path: st, W: taken, Verdict: VerdictAccept, Masquerade: true})
			case "DROP", "REJECT":
				done = append(done, Branch{Path: st, W: taken, Verdict: r.Target})
			case "DNAT":
				st.DNAT, st.Dst, st.DPort = r.ToDest, r.ToIP, r.ToPort
				done = append(done, Branch{Path: st, W: taken, Verdict: VerdictAccept})
			default:
				sub, err := t.chain(table, r.Target, st, taken, depth+1)
				if err != nil {
					return nil, err
				}
				for _, s := range sub {
					if s.Verdict == "" {
						next = append(next, s)
					} else {
						done = append(done, s)
					}
				}
			}
		}
		live = next
	}
	for _, b := range live {
		if c.Builtin() {
			b.Verdict = c.Policy
		}
		done = append(done, b)
	}
	return done, nil
}

// matches reports whether a rule's matches hold for the packet in Path st.
func (t *Walker) matches(r *Rule, st Path) (bool, error) {
	if r.Src != nil && r.Src.Contains(t.Packet.Src) == r.NotSrc {
		return false, nil
	}
	if r.Dst != nil && r.Dst.Contains(st.Dst) == r.NotDst {
		return false, nil
	}
	if r.Protocol != "" && r.Protocol != t.Packet.Protocol {
		return false, nil
	}
	if r.DPort != 0 && r.DPort != st.DPort {
		return false, nil
	}
	if r.HasMark && (st.Mark&r.MarkMask == r.Mark) == r.NotMark {
		return false, nil
	}
	if r.CTStates != nil {
		in := false
		for _, s := range r.CTStates {
			switch s {
			case "NEW":
				in = true
			case "DNAT":
				in = in || (st.Filter && st.DNAT != "")
			case "INVALID", "ESTABLISHED", "RELATED", "UNTRACKED", "SNAT":
			default:
				return false, fmt.Errorf("unknown ctstate %q", s)
			}
		}
		if in == r.NotCTState {
			return false, nil
		}
	}
	for _, at := range []struct {
		typ string
		not bool
		ip  net.IP
	}{{r.SrcType, r.NotSrcT, t.Packet.Src}, {r.DstType, r.NotDstT, st.Dst}} {
		if at.typ == "" {
			continue
		}
		if at.typ != "LOCAL" {
			return false, fmt.Errorf("addrtype %s is not modelled", at.typ)
		}
		if t.isLocal(at.ip) == at.not {
			return false, nil
		}
	}
	if r.RecentCheck && !t.seen(r.RecentName, r.RecentSeconds) {
		return false, nil
	}
	if r.PhysdevIsIn && !r.NotPhysdevIsIn {
		return false, nil // no packet comes through a bridge port here
	}
	if r.VAddr != nil || r.VProto != "" || r.VPort != 0 {
		vs := st.VS
		if vs.Addr == nil || (r.VAddr != nil && !r.VAddr.Contains(vs.Addr)) ||
			(r.VProto != "" && r.VProto != vs.Proto) || (r.VPort != 0 && r.VPort != vs.Port) {
			return false, nil
		}
	}
	if r.MatchSet != "" {
		if t.Sets == nil {
			return false, fmt.Errorf("ipset %s: no ipsets to match against", r.MatchSet)
		}
		in, err := t.Sets(r.MatchSet, r.MatchSetFlags, t.Packet.Src, t.Packet.Protocol, st)
		if err != nil {
			return false, err
		}
		if in == r.NotMatchSet {
			return false, nil
		}
	}
	return true, nil
}

// seen is xt_recent's --rcheck --seconds: the source is in the list and
// was last set at most seconds ago (0: any time).
func (t *Walker) seen(list string, seconds int) bool {
	at, ok := t.History.Recent[list][t.Packet.Src.String()]
	return ok && fresh(at, t.History.Now, seconds)
}

// fresh is xt_recent's age test (net/netfilter/xt_recent.c, recent_mt): a
// stamp is skipped only when it is older than now minus the window, so an
// entry exactly seconds old still matches.
func fresh(at, now time.Time, seconds int) bool {
	return seconds == 0 || now.Sub(at) <= time.Duration(seconds)*time.Second
}

// Live is the part of the history that rs's `--rcheck` rules would still
// match at h.Now: for each list, the sources (sorted) whose entry is fresh
// for every rule that checks the list. It is what a real kernel's lists
// must hold for a connection there to start from the same history.
func (h History) Live(rs Ruleset) map[string][]string {
	window := map[string]int{} // the shortest window a rule checks a list with
	for _, table := range Tables {
		for _, c := range rs[table] {
			for _, r := range c.Rules {
				if !r.RecentCheck {
					continue
				}
				if w, ok := window[r.RecentName]; !ok || (r.RecentSeconds != 0 && (w == 0 || r.RecentSeconds < w)) {
					window[r.RecentName] = r.RecentSeconds
				}
			}
		}
	}
	out := map[string][]string{}
	for list, w := range window {
		for src, at := range h.Recent[list] {
			if fresh(at, h.Now, w) {
				out[list] = append(out[list], src)
			}
		}
		sort.Strings(out[list])
	}
	return out
}
