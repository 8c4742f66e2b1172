package iptables

import (
	"fmt"
	"github.com/proxysim/proxysim/sim/route"
	"math/big"
	"net"
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

// Recent is the state of the kernel's `recent` match (xt_recent): for each
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
	t := &tracer{rs: rs, local: local, pkt: pkt, hist: h}
	isLocal := t.isLocal(pkt.Src)
	natHook := "PREROUTING"
	if isLocal {
		natHook = "OUTPUT"
	}
	start := state{dst: pkt.Dst, dport: pkt.DPort}
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
		if b.verdict == VerdictDrop || b.verdict == VerdictReject {
			out.Add(b.verdict, b.w)
			continue
		}
		hook := "OUTPUT"
		if !isLocal {
			hook = "FORWARD"
			if t.isLocal(b.st.dst) {
				hook = "INPUT"
			}
		}
		b.st.filter = true
		filter, err := t.chain("filter", hook, b.st, b.w, 0)
		if err != nil {
			return nil, nil, err
		}
		for _, f := range filter {
			v := f.verdict
			if v == VerdictAccept && f.st.dnat != "" {
				v = f.st.dnat
			}
			out.Add(v, f.w)
			if f.w.Sign() > 0 {
				addSets(v, f.st.sets)
			}
		}
	}
	for k := range sets {
		sort.Strings(sets[k])
	}
	return out, sets, nil
}

type state struct {
	dst    net.IP
	dport  int
	mark   uint32
	dnat   string // ip:port once DNATed
	filter bool   // in the filter table: ctstate has DNAT once translated
	// sets are the recent lists --set on the way, shared copy-on-append.
	sets []string
}

type branch struct {
	st      state
	w       *big.Rat
	verdict string // "" while running, or returned from a user chain
}

type tracer struct {
	rs    Ruleset
	local []net.IP
	pkt   Packet
	hist  History
}

func (t *tracer) isLocal(ip net.IP) bool {
	if ip.IsLoopback() {
		return true
	}
	for _, l := range t.local {
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
func (t *tracer) chain(table, name string, st state, w *big.Rat, depth int) ([]branch, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("tracer: chains nest deeper than %d at %s", maxDepth, name)
	}
	c := t.rs[table][name]
	if c == nil {
		return nil, fmt.Errorf("tracer: no chain %s in table %s", name, table)
	}
	live := []branch{{st: st, w: w}}
	var done []branch
	for _, r := range c.Rules {
		var next []branch
		for _, b := range live {
			ok, err := t.matches(r, b.st)
			if err != nil {
				return nil, fmt.Errorf("tracer: %s %s: %v", table, name, err)
			}
			if !ok {
				next = append(next, b)
				continue
			}
			taken := b.w
			if r.Probability != nil {
				taken = new(big.Rat).Mul(b.w, r.Probability)
				rest := new(big.Rat).Sub(b.w, taken)
				if rest.Sign() > 0 {
					next = append(next, branch{st: b.st, w: rest})
				}
			}
			if taken.Sign() == 0 {
				continue
			}
			st := b.st
			if r.RecentSet {
				st.sets = append(st.sets[:len(st.sets):len(st.sets)], r.RecentName)
			}
			switch r.Target {
			case "": // a match with no target only counts
				next = append(next, branch{st: st, w: taken})
			case "MARK":
				if r.HasOr {
					st.mark |= r.OrMark
				}
				if r.HasXor {
					st.mark ^= r.XorMark
				}
				next = append(next, branch{st: st, w: taken})
			case "RETURN":
				done = append(done, branch{st: st, w: taken})
			case "ACCEPT", "MASQUERADE":
				done = append(done, branch{st: st, w: taken, verdict: VerdictAccept})
			case "DROP", "REJECT":
				done = append(done, branch{st: st, w: taken, verdict: r.Target})
			case "DNAT":
				st.dnat, st.dst, st.dport = r.ToDest, r.ToIP, r.ToPort
				done = append(done, branch{st: st, w: taken, verdict: VerdictAccept})
			default:
				sub, err := t.chain(table, r.Target, st, taken, depth+1)
				if err != nil {
					return nil, err
				}
				for _, s := range sub {
					if s.verdict == "" {
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
			b.verdict = c.Policy
		}
		done = append(done, b)
	}
	return done, nil
}

// matches reports whether a rule's matches hold for the packet in state st.
func (t *tracer) matches(r *Rule, st state) (bool, error) {
	if r.Src != nil && r.Src.Contains(t.pkt.Src) == r.NotSrc {
		return false, nil
	}
	if r.Dst != nil && r.Dst.Contains(st.dst) == r.NotDst {
		return false, nil
	}
	if r.Protocol != "" && r.Protocol != t.pkt.Protocol {
		return false, nil
	}
	if r.DPort != 0 && r.DPort != st.dport {
		return false, nil
	}
	if r.HasMark && (st.mark&r.MarkMask == r.Mark) == r.NotMark {
		return false, nil
	}
	if r.CTStates != nil {
		in := false
		for _, s := range r.CTStates {
			switch s {
			case "NEW":
				in = true
			case "DNAT":
				in = in || (st.filter && st.dnat != "")
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
	}{{r.SrcType, r.NotSrcT, t.pkt.Src}, {r.DstType, r.NotDstT, st.dst}} {
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
	return true, nil
}

// seen is xt_recent's --rcheck --seconds: the source is in the list and
// was last set at most seconds ago (0: any time).
func (t *tracer) seen(list string, seconds int) bool {
	at, ok := t.hist.Recent[list][t.pkt.Src.String()]
	return ok && fresh(at, t.hist.Now, seconds)
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
