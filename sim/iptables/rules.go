package iptables

import (
	"fmt"
	"math/big"
	"net"
	"sort"
	"strconv"
	"strings"
)

// Rule is one parsed iptables rule: the matches and the target that
// kube-proxy writes, and nothing else. Text is the rule as written, after
// "-A CHAIN", and is what iptables-save prints back.
type Rule struct {
	Text string

	Src, Dst       *net.IPNet
	NotSrc, NotDst bool
	Protocol       string // "tcp", "udp", "sctp" or ""
	DPort          int    // 0: any
	Comment        string

	// Probability is a statistic random match; nil when there is none.
	// It is the exact rational of the decimal text (0.3333333333 is
	// 3333333333/10000000000), so that the tracer's shares are exact.
	Probability *big.Rat

	HasMark          bool
	Mark, MarkMask   uint32
	NotMark          bool
	CTStates         []string
	NotCTState       bool
	SrcType, DstType string
	NotSrcT, NotDstT bool
	RecentName       string
	RecentCheck      bool // --rcheck: matches only with history
	RecentSet        bool
	RecentSeconds    int
	RecentReap       bool
	NFAcctName       string

	// MatchSet is an ipset match (`-m set [!] --match-set NAME FLAGS`, as
	// kube-proxy's IPVS proxier writes them); FLAGS is the src/dst list.
	MatchSet      string
	MatchSetFlags string
	NotMatchSet   bool
	// PhysdevIsIn is `-m physdev [!] --physdev-is-in`: the packet came in
	// through a bridge port.
	PhysdevIsIn, NotPhysdevIsIn bool
	// VAddr, VProto and VPort are `-m ipvs --vaddr --vproto --vport`: the
	// packet belongs to an IPVS connection of that virtual server.
	VAddr  *net.IPNet
	VProto string
	VPort  int

	Target      string // a chain, or ACCEPT, DROP, REJECT, RETURN, DNAT, MARK, MASQUERADE
	ToDest      string // DNAT --to-destination ip:port, as written
	ToIP        net.IP
	ToPort      int
	OrMark      uint32
	XorMark     uint32
	HasOr       bool
	HasXor      bool
	RandomFully bool
	RejectWith  string
}

// standardTargets are the targets that are not chains, and the tables they
// are valid in (nil: any).
var standardTargets = map[string][]string{
	"ACCEPT": nil, "DROP": nil, "RETURN": nil, "MARK": nil,
	"REJECT":     {"filter"},
	"DNAT":       {"nat"},
	"MASQUERADE": {"nat"},
}

// tokenize splits a rule into words, keeping double-quoted words whole (and
// unquoted), as iptables-restore does.
func tokenize(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	in, have := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			in = !in
			have = true
		case c == ' ' && !in:
			if have {
				out = append(out, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteByte(c)
			have = true
		}
	}
	if in {
		return nil, fmt.Errorf("unterminated quote")
	}
	if have {
		out = append(out, cur.String())
	}
	return out, nil
}

func parseNet(s string) (*net.IPNet, error) {
	if !strings.Contains(s, "/") {
		ip := net.ParseIP(s)
		if ip == nil {
			return nil, fmt.Errorf("bad address %q", s)
		}
		bits := 32
		if ip.To4() == nil {
			bits = 128
		} else {
			ip = ip.To4()
		}
		return &net.IPNet{IP: ip, Mask: net.CIDRMask(bits, bits)}, nil
	}
	_, n, err := net.ParseCIDR(s)
	if err != nil {
		return nil, fmt.Errorf("bad address %q", s)
	}
	return n, nil
}

func parseMark(s string) (uint32, error) {
	v, err := strconv.ParseUint(s, 0, 32)
	if err != nil {
		return 0, fmt.Errorf("bad mark %q", s)
	}
	return uint32(v), nil
}

// ParseRule parses the words of a rule after "-A CHAIN". It refuses what
// iptables would refuse among the options it knows, and every option it
// does not know: the fake must never accept a rule it cannot trace.
func ParseRule(text string) (*Rule, error) {
	words, err := tokenize(text)
	if err != nil {
		return nil, err
	}
	r := &Rule{Text: text}
	modules := map[string]bool{}
	not := false
	need := func(i int) (string, error) {
		if i+1 >= len(words) {
			return "", fmt.Errorf("option %q needs a value", words[i])
		}
		return words[i+1], nil
	}
	for i := 0; i < len(words); i++ {
		w := words[i]
		if w == "!" {
			if not {
				return nil, fmt.Errorf("double negation")
			}
			not = true
			continue
		}
		wasNot := not
		not = false
		negatable := false
		var v string
		switch w {
		case "--rcheck", "--set", "--reap", "--random-fully", "--physdev-is-in":
		default:
			if v, err = need(i); err != nil {
				return nil, err
			}
			i++
		}
		switch w {
		case "-s", "--source":
			if r.Src, err = parseNet(v); err != nil {
				return nil, err
			}
			r.NotSrc, negatable = wasNot, true
		case "-d", "--destination":
			if r.Dst, err = parseNet(v); err != nil {
				return nil, err
			}
			r.NotDst, negatable = wasNot, true
		case "-p", "--protocol":
			switch v {
			case "tcp", "udp", "sctp":
				r.Protocol = v
			default:
				return nil, fmt.Errorf("unknown protocol %q", v)
			}
		case "-m", "--match":
			switch v {
			case "comment", "tcp", "udp", "sctp", "statistic", "mark", "conntrack", "addrtype", "recent", "nfacct", "set", "physdev", "ipvs":
				modules[v] = true
			default:
				return nil, fmt.Errorf("unknown match %q", v)
			}
		case "--comment":
			if !modules["comment"] {
				return nil, fmt.Errorf("--comment without -m comment")
			}
			r.Comment = v
		case "--dport":
			if !modules["tcp"] && !modules["udp"] && !modules["sctp"] {
				return nil, fmt.Errorf("--dport without -m tcp, udp or sctp")
			}
			p, err := strconv.Atoi(v)
			if err != nil || p < 1 || p > 65535 {
				return nil, fmt.Errorf("bad port %q", v)
			}
			r.DPort = p
		case "--mode":
			if !modules["statistic"] || v != "random" {
				return nil, fmt.Errorf("--mode %s: only -m statistic --mode random is modelled", v)
			}
		case "--probability":
			if !modules["statistic"] {
				return nil, fmt.Errorf("--probability without -m statistic")
			}
			p, ok := new(big.Rat).SetString(v)
			if !ok || p.Sign() < 0 || p.Cmp(big.NewRat(1, 1)) > 0 {
				return nil, fmt.Errorf("bad probability %q", v)
			}
			r.Probability = p
		case "--mark":
			if !modules["mark"] {
				return nil, fmt.Errorf("--mark without -m mark")
			}
			val, mask, found := strings.Cut(v, "/")
			if r.Mark, err = parseMark(val); err != nil {
				return nil, err
			}
			r.MarkMask = 0xffffffff
			if found {
				if r.MarkMask, err = parseMark(mask); err != nil {
					return nil, err
				}
			}
			r.HasMark, r.NotMark, negatable = true, wasNot, true
		case "--ctstate":
			if !modules["conntrack"] {
				return nil, fmt.Errorf("--ctstate without -m conntrack")
			}
			r.CTStates = strings.Split(v, ",")
			r.NotCTState, negatable = wasNot, true
		case "--src-type", "--dst-type":
			if !modules["addrtype"] {
				return nil, fmt.Errorf("%s without -m addrtype", w)
			}
			if w == "--src-type" {
				r.SrcType, r.NotSrcT = v, wasNot
			} else {
				r.DstType, r.NotDstT = v, wasNot
			}
			negatable = true
		case "--name":
			if !modules["recent"] {
				return nil, fmt.Errorf("--name without -m recent")
			}
			r.RecentName = v
		case "--rcheck", "--set", "--reap":
			if !modules["recent"] {
				return nil, fmt.Errorf("%s without -m recent", w)
			}
			r.RecentCheck = r.RecentCheck || w == "--rcheck"
			r.RecentSet = r.RecentSet || w == "--set"
			r.RecentReap = r.RecentReap || w == "--reap"
		case "--seconds":
			if !modules["recent"] {
				return nil, fmt.Errorf("--seconds without -m recent")
			}
			if r.RecentSeconds, err = strconv.Atoi(v); err != nil || r.RecentSeconds < 0 {
				return nil, fmt.Errorf("bad --seconds %q", v)
			}
		case "--nfacct-name":
			if !modules["nfacct"] {
				return nil, fmt.Errorf("--nfacct-name without -m nfacct")
			}
			r.NFAcctName = v
		case "--match-set":
			if !modules["set"] {
				return nil, fmt.Errorf("--match-set without -m set")
			}
			if i+1 >= len(words) {
				return nil, fmt.Errorf("--match-set needs a set name and flags")
			}
			i++
			r.MatchSet, r.MatchSetFlags, r.NotMatchSet, negatable = v, words[i], wasNot, true
			for _, f := range strings.Split(r.MatchSetFlags, ",") {
				if f != "src" && f != "dst" {
					return nil, fmt.Errorf("bad --match-set flags %q (want src/dst, comma-separated)", r.MatchSetFlags)
				}
			}
		case "--physdev-is-in":
			if !modules["physdev"] {
				return nil, fmt.Errorf("--physdev-is-in without -m physdev")
			}
			r.PhysdevIsIn, r.NotPhysdevIsIn, negatable = true, wasNot, true
		case "--vaddr":
			if !modules["ipvs"] {
				return nil, fmt.Errorf("--vaddr without -m ipvs")
			}
			if r.VAddr, err = parseNet(v); err != nil {
				return nil, err
			}
		case "--vproto":
			if !modules["ipvs"] {
				return nil, fmt.Errorf("--vproto without -m ipvs")
			}
			switch v {
			case "tcp", "udp", "sctp":
				r.VProto = v
			default:
				return nil, fmt.Errorf("unknown --vproto %q", v)
			}
		case "--vport":
			if !modules["ipvs"] {
				return nil, fmt.Errorf("--vport without -m ipvs")
			}
			p, err := strconv.Atoi(v)
			if err != nil || p < 1 || p > 65535 {
				return nil, fmt.Errorf("bad --vport %q", v)
			}
			r.VPort = p
		case "-j", "--jump":
			if r.Target != "" {
				return nil, fmt.Errorf("two targets")
			}
			r.Target = v
		case "--to-destination":
			if r.Target != "DNAT" {
				return nil, fmt.Errorf("--to-destination without -j DNAT")
			}
			host, port, err := net.SplitHostPort(v)
			p, perr := strconv.Atoi(port)
			if err != nil || net.ParseIP(host) == nil || perr != nil || p < 1 || p > 65535 {
				return nil, fmt.Errorf("bad --to-destination %q (want ip:port)", v)
			}
			r.ToDest, r.ToIP, r.ToPort = v, net.ParseIP(host), p
		case "--or-mark", "--xor-mark":
			if r.Target != "MARK" {
				return nil, fmt.Errorf("%s without -j MARK", w)
			}
			m, err := parseMark(v)
			if err != nil {
				return nil, err
			}
			if w == "--or-mark" {
				r.OrMark, r.HasOr = m, true
			} else {
				r.XorMark, r.HasXor = m, true
			}
		case "--random-fully":
			if r.Target != "MASQUERADE" {
				return nil, fmt.Errorf("--random-fully without -j MASQUERADE")
			}
			r.RandomFully = true
		case "--reject-with":
			if r.Target != "REJECT" {
				return nil, fmt.Errorf("--reject-with without -j REJECT")
			}
			r.RejectWith = v
		default:
			return nil, fmt.Errorf("unknown option %q", w)
		}
		if wasNot && !negatable {
			return nil, fmt.Errorf("%q cannot be negated", w)
		}
	}
	if not {
		return nil, fmt.Errorf("dangling !")
	}
	if r.DPort != 0 && r.Protocol == "" {
		return nil, fmt.Errorf("--dport needs -p")
	}
	switch {
	case r.Target == "DNAT" && r.ToDest == "":
		return nil, fmt.Errorf("DNAT needs --to-destination")
	case r.Target == "MARK" && !r.HasOr && !r.HasXor:
		return nil, fmt.Errorf("MARK needs --or-mark or --xor-mark")
	case r.RecentName != "" && !r.RecentCheck && !r.RecentSet:
		return nil, fmt.Errorf("-m recent needs --rcheck or --set")
	}
	return r, nil
}

// Chain is one chain of a table. Policy is ACCEPT or DROP for a built-in
// chain and "-" for a user chain.
type Chain struct {
	Name   string
	Policy string
	Rules  []*Rule
	// refs counts the table's rules that jump to the chain (Apply keeps it,
	// to check jumps without reading the whole table).
	refs int
}

// Builtin reports whether the chain is one of the kernel's hooks.
func (c *Chain) Builtin() bool { return c.Policy != "-" }

// Table is one table's chains by name.
type Table map[string]*Chain

// Ruleset is the tables by name.
type Ruleset map[string]Table

// BuiltinChains are the hooks of the tables this package models, in the
// order iptables-save lists them.
var BuiltinChains = map[string][]string{
	"filter": {"INPUT", "FORWARD", "OUTPUT"},
	"nat":    {"PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"},
	"mangle": {"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"},
}

// Tables are the tables kube-proxy's rules are written to, in the order
// SaveAll lists them (and goldens hold).
var Tables = []string{"filter", "nat"}

// AllTables are the tables a Ruleset holds: Tables and mangle, where
// kube-proxy writes nothing but its canary chain (see Monitor).
var AllTables = []string{"filter", "nat", "mangle"}

// NewRuleset is an empty ruleset: the built-in chains, accepting.
func NewRuleset() Ruleset {
	rs := Ruleset{}
	for _, t := range AllTables {
		rs[t] = Table{}
		for _, c := range BuiltinChains[t] {
			rs[t][c] = &Chain{Name: c, Policy: "ACCEPT"}
		}
	}
	return rs
}

// Clone copies the ruleset's chains. Rules are immutable and their lists
// shared: capped at their length, so that an append copies, and a restore
// that replaces a chain (most of a full sync) copies nothing.
func (rs Ruleset) Clone() Ruleset {
	out := Ruleset{}
	for tn, t := range rs {
		out[tn] = Table{}
		for cn, c := range t {
			out[tn][cn] = &Chain{Name: c.Name, Policy: c.Policy, Rules: c.Rules[:len(c.Rules):len(c.Rules)], refs: c.refs}
		}
	}
	return out
}

// Save renders the ruleset as iptables-save does, minus the comment
// header and counters: tables in Tables order, built-in chains first in
// hook order, then user chains by name, then the rules chain by chain in
// the same order. The same ruleset always gives the same text.
func (rs Ruleset) Save(table string) string {
	t := rs[table]
	if t == nil {
		return ""
	}
	var names []string
	var user []string
	for n, c := range t {
		if !c.Builtin() {
			user = append(user, n)
		}
	}
	sort.Strings(user)
	names = append(append(names, BuiltinChains[table]...), user...)
	size := len(table) + 16
	for _, n := range names {
		size += 2*len(n) + 16
		for _, r := range t[n].Rules {
			size += len(n) + len(r.Text) + 5
		}
	}
	var b strings.Builder
	b.Grow(size)
	b.WriteString("*" + table + "\n")
	for _, n := range names {
		b.WriteString(":")
		b.WriteString(n)
		b.WriteByte(' ')
		b.WriteString(t[n].Policy)
		b.WriteString(" [0:0]\n")
	}
	for _, n := range names {
		for _, r := range t[n].Rules {
			b.WriteString("-A ")
			b.WriteString(n)
			b.WriteByte(' ')
			b.WriteString(r.Text)
			b.WriteByte('\n')
		}
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// Flush is what `iptables -t table -F` then `-X` does to a copy of rs (a
// firewall reload from outside kube-proxy, say): every chain of the table
// emptied, every user chain deleted, the built-in chains' policies kept.
func (rs Ruleset) Flush(table string) (Ruleset, error) {
	if rs[table] == nil {
		return nil, &RestoreError{Msg: "table " + table + " is not modelled"}
	}
	out := rs.Clone()
	t := Table{}
	for name, c := range out[table] {
		if c.Builtin() {
			t[name] = &Chain{Name: name, Policy: c.Policy}
		}
	}
	out[table] = t
	return out, nil
}

// SaveAll is Save of the filter and nat tables (Tables).
func (rs Ruleset) SaveAll() string {
	var b strings.Builder
	for _, t := range Tables {
		b.WriteString(rs.Save(t))
	}
	return b.String()
}
