package nftables

import (
	"fmt"
	"math/big"
	"net"
	"strconv"
	"strings"

	"sigs.k8s.io/knftables"

	"github.com/proxysim/proxysim/sim/route"
)

// compile parses a rule into items once per trace.
func (tr *tracer) compile(r *knftables.Rule) ([]item, error) {
	if items, ok := tr.rules[r]; ok {
		return items, nil
	}
	ps := &parser{toks: strings.Fields(r.Rule)}
	items, err := ps.rule()
	if err != nil {
		return nil, err
	}
	tr.rules[r] = items
	return items, nil
}

type parser struct {
	toks []string
	i    int
}

func (ps *parser) done() bool { return ps.i >= len(ps.toks) }

func (ps *parser) peek(k int) string {
	if ps.i+k < len(ps.toks) {
		return ps.toks[ps.i+k]
	}
	return ""
}

func (ps *parser) next() string {
	t := ps.peek(0)
	ps.i++
	return t
}

func (ps *parser) expect(words ...string) error {
	for _, w := range words {
		if got := ps.next(); got != w {
			return fmt.Errorf("want %q, got %q", w, got)
		}
	}
	return nil
}

// selector reads the value a packet has for one nft selector.
type selector struct {
	text string
	kind string // "addr", "port", "proto", "mark", "word"
	get  func(tr *tracer, p path) string
}

func (ps *parser) selector() (*selector, error) {
	switch w := ps.next(); w {
	case "ip", "ip6":
		switch f := ps.next(); f {
		case "saddr":
			return &selector{w + " saddr", "addr", func(tr *tracer, _ path) string { return tr.pkt.Src.String() }}, nil
		case "daddr":
			return &selector{w + " daddr", "addr", func(_ *tracer, p path) string { return p.dst.String() }}, nil
		default:
			return nil, fmt.Errorf("selector %s %s is not modelled", w, f)
		}
	case "meta":
		switch f := ps.next(); f {
		case "l4proto":
			return &selector{"meta l4proto", "proto", func(tr *tracer, _ path) string { return tr.pkt.Protocol }}, nil
		case "mark":
			return markSelector, nil
		default:
			return nil, fmt.Errorf("selector meta %s is not modelled", f)
		}
	case "mark":
		return markSelector, nil
	case "th":
		if f := ps.next(); f != "dport" {
			return nil, fmt.Errorf("selector th %s is not modelled", f)
		}
		return &selector{"th dport", "port", func(_ *tracer, p path) string { return strconv.Itoa(p.dport) }}, nil
	case "ct":
		switch f := ps.next(); f {
		case "state":
			// Every traced packet opens a new connection.
			return &selector{"ct state", "word", func(*tracer, path) string { return "new" }}, nil
		case "status":
			return &selector{"ct status", "word", func(_ *tracer, p path) string {
				if p.dnat != "" {
					return "dnat"
				}
				return ""
			}}, nil
		default:
			return nil, fmt.Errorf("selector ct %s is not modelled", f)
		}
	case "fib":
		which := ps.next()
		if which != "saddr" && which != "daddr" {
			return nil, fmt.Errorf("selector fib %s is not modelled", which)
		}
		if err := ps.expect("type"); err != nil {
			return nil, err
		}
		return &selector{"fib " + which + " type", "word", func(tr *tracer, p path) string {
			ip := p.dst
			if which == "saddr" {
				ip = tr.pkt.Src
			}
			if tr.isLocal(ip) {
				return "local"
			}
			return "unicast"
		}}, nil
	default:
		return nil, fmt.Errorf("unknown expression %q", w)
	}
}

var markSelector = &selector{"mark", "mark", func(_ *tracer, p path) string { return strconv.FormatUint(uint64(p.mark), 10) }}

// rule parses a whole rule: matches, then statements.
func (ps *parser) rule() ([]item, error) {
	var items []item
	for !ps.done() {
		var it item
		var err error
		switch w := ps.peek(0); {
		case w == "mark" && ps.peek(1) == "set", w == "meta" && ps.peek(1) == "mark" && ps.peek(2) == "set":
			it, err = ps.markSet()
		case w == "jump" || w == "goto":
			ps.next()
			target := ps.next()
			if target == "" {
				return nil, fmt.Errorf("%s needs a chain", w)
			}
			it = func(_ *tracer, p path) ([]path, bool, error) { p.next = w + " " + target; return []path{p}, true, nil }
		case w == "accept" || w == "drop" || w == "reject" || w == "return":
			ps.next()
			it = verdictItem(w)
		case w == "masquerade":
			ps.next()
			if f := ps.peek(0); f == "fully-random" || f == "random" || f == "persistent" {
				ps.next()
			}
			it = func(_ *tracer, p path) ([]path, bool, error) {
				p.verdict, p.masq = route.Accept, true
				return []path{p}, true, nil
			}
		case w == "counter":
			ps.next()
			continue
		case w == "dnat":
			it, err = ps.dnat()
		case w == "update":
			it, err = ps.update()
		case w == "numgen":
			it, err = ps.numgenVmap()
		default:
			it, err = ps.match()
		}
		if err != nil {
			return nil, err
		}
		items = append(items, it)
	}
	return items, nil
}

// verdictItem ends the rule. accept ends the packet's walk through this
// hook's chain; drop and reject end it everywhere.
func verdictItem(v string) item {
	return func(_ *tracer, p path) ([]path, bool, error) {
		switch v {
		case "accept":
			p.verdict = route.Accept
		case "drop":
			p.verdict = route.Drop
		case "reject":
			p.verdict = route.Reject
		case "return":
			p.next = "return"
		}
		return []path{p}, true, nil
	}
}

// verdictOf turns a verdict written in a map element ("goto X", "drop")
// into an item.
func verdictOf(v string) (item, error) {
	words := strings.Fields(v)
	switch {
	case len(words) == 2 && (words[0] == "goto" || words[0] == "jump"):
		return func(_ *tracer, p path) ([]path, bool, error) { p.next = v; return []path{p}, true, nil }, nil
	case len(words) == 1 && (words[0] == "accept" || words[0] == "drop" || words[0] == "reject" || words[0] == "return"):
		return verdictItem(words[0]), nil
	}
	return nil, fmt.Errorf("verdict %q is not modelled", v)
}

func (ps *parser) markSet() (item, error) {
	if ps.peek(0) == "meta" {
		ps.next()
	}
	if err := ps.expect("mark", "set", "mark"); err != nil {
		return nil, err
	}
	op := ps.next()
	v, err := strconv.ParseUint(ps.next(), 0, 32)
	if err != nil || (op != "or" && op != "xor") {
		return nil, fmt.Errorf("mark set: only `mark set mark or|xor VALUE` is modelled")
	}
	return func(_ *tracer, p path) ([]path, bool, error) {
		if op == "or" {
			p.mark |= uint32(v)
		} else {
			p.mark ^= uint32(v)
		}
		return []path{p}, true, nil
	}, nil
}

// braces reads `{ a b , c d , ... }` into its comma-separated entries.
func (ps *parser) braces() ([][]string, error) {
	if err := ps.expect("{"); err != nil {
		return nil, err
	}
	var out [][]string
	var cur []string
	for {
		t := ps.next()
		switch t {
		case "":
			return nil, fmt.Errorf("unterminated {")
		case "}":
			if len(cur) > 0 {
				out = append(out, cur)
			}
			return out, nil
		case ",":
			out = append(out, cur)
			cur = nil
		default:
			// nft also accepts "a,b" without spaces.
			for j, part := range strings.Split(t, ",") {
				if j > 0 {
					out = append(out, cur)
					cur = nil
				}
				if part != "" {
					cur = append(cur, part)
				}
			}
		}
	}
}

// numgenVmap is `numgen random mod N vmap { 0 : goto X , ... }`: N paths
// of 1/N each, each taking its element's verdict.
func (ps *parser) numgenVmap() (item, error) {
	n, err := ps.numgen()
	if err != nil {
		return nil, err
	}
	if err := ps.expect("vmap"); err != nil {
		return nil, err
	}
	entries, err := ps.braces()
	if err != nil {
		return nil, err
	}
	verdicts := make([]item, n)
	for _, e := range entries {
		if len(e) < 3 || e[1] != ":" {
			return nil, fmt.Errorf("bad vmap element %q", strings.Join(e, " "))
		}
		i, err := strconv.Atoi(e[0])
		if err != nil || i < 0 || i >= n {
			return nil, fmt.Errorf("vmap key %q out of numgen's range 0..%d", e[0], n-1)
		}
		if verdicts[i], err = verdictOf(strings.Join(e[2:], " ")); err != nil {
			return nil, err
		}
	}
	return func(tr *tracer, p path) ([]path, bool, error) {
		var out []path
		for _, v := range verdicts {
			w := new(big.Rat).Mul(p.w, big.NewRat(1, int64(n)))
			if v == nil {
				// No element for this number: the packet falls through
				// the rule (nft's vmap miss).
				out = append(out, p.with(w))
				continue
			}
			outs, _, err := v(tr, p.with(w))
			if err != nil {
				return nil, false, err
			}
			out = append(out, outs...)
		}
		return out, true, nil
	}, nil
}

func (ps *parser) numgen() (int, error) {
	if err := ps.expect("numgen", "random", "mod"); err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(ps.next())
	if err != nil || n < 1 {
		return 0, fmt.Errorf("numgen random mod needs a positive number")
	}
	return n, nil
}

// dnat is `dnat to IP:PORT` or `dnat ip addr . port to numgen random mod N
// map { i : IP . PORT , ... }`. It ends the rule: NAT accepts.
func (ps *parser) dnat() (item, error) {
	ps.next()
	if ps.peek(0) == "to" {
		ps.next()
		to := ps.next()
		host, port, err := net.SplitHostPort(to)
		pn, perr := strconv.Atoi(port)
		ip := net.ParseIP(host)
		if err != nil || perr != nil || ip == nil {
			return nil, fmt.Errorf("dnat to %q: want ip:port", to)
		}
		return func(_ *tracer, p path) ([]path, bool, error) {
			p.dst, p.dport, p.dnat, p.verdict = ip, pn, to, route.Accept
			return []path{p}, true, nil
		}, nil
	}
	if fam := ps.next(); fam != "ip" && fam != "ip6" {
		return nil, fmt.Errorf("dnat %s is not modelled", fam)
	}
	if err := ps.expect("addr", ".", "port", "to"); err != nil {
		return nil, err
	}
	n, err := ps.numgen()
	if err != nil {
		return nil, err
	}
	if err := ps.expect("map"); err != nil {
		return nil, err
	}
	entries, err := ps.braces()
	if err != nil {
		return nil, err
	}
	type dest struct {
		ip   net.IP
		port int
	}
	dests := make([]*dest, n)
	for _, e := range entries {
		if len(e) != 5 || e[1] != ":" || e[3] != "." {
			return nil, fmt.Errorf("bad dnat map element %q (want `i : IP . PORT`)", strings.Join(e, " "))
		}
		i, err := strconv.Atoi(e[0])
		ip := net.ParseIP(e[2])
		port, perr := strconv.Atoi(e[4])
		if err != nil || i < 0 || i >= n || ip == nil || perr != nil {
			return nil, fmt.Errorf("bad dnat map element %q", strings.Join(e, " "))
		}
		dests[i] = &dest{ip, port}
	}
	return func(_ *tracer, p path) ([]path, bool, error) {
		var out []path
		for _, d := range dests {
			q := p.with(new(big.Rat).Mul(p.w, big.NewRat(1, int64(n))))
			if d == nil {
				// A number with no element: the map lookup fails and the
				// rule does not apply (kube-proxy leaves no gaps).
				out = append(out, q)
				continue
			}
			q.dst, q.dport, q.dnat, q.verdict = d.ip, d.port, net.JoinHostPort(d.ip.String(), strconv.Itoa(d.port)), route.Accept
			out = append(out, q)
		}
		return out, true, nil
	}, nil
}

// update is `update @set { ip saddr }`: the path adds the client to a
// dynamic set.
func (ps *parser) update() (item, error) {
	ps.next()
	name := strings.TrimPrefix(ps.next(), "@")
	if name == "" {
		return nil, fmt.Errorf("update needs @set")
	}
	entries, err := ps.braces()
	if err != nil {
		return nil, err
	}
	if len(entries) != 1 || len(entries[0]) != 2 || entries[0][1] != "saddr" {
		return nil, fmt.Errorf("update @%s: only { ip saddr } is modelled", name)
	}
	return func(tr *tracer, p path) ([]path, bool, error) {
		if tr.t.Sets[name] == nil {
			return nil, false, fmt.Errorf("update of set %s, which does not exist", name)
		}
		u := Affinity{}
		for k := range p.updated {
			u[k] = true
		}
		u[name] = true
		p.updated = u
		return []path{p}, true, nil
	}, nil
}

// match is a selector (or a concatenation of them) and a relation.
func (ps *parser) match() (item, error) {
	sels := []*selector{}
	for {
		s, err := ps.selector()
		if err != nil {
			return nil, err
		}
		sels = append(sels, s)
		if ps.peek(0) != "." {
			break
		}
		ps.next()
	}
	key := func(tr *tracer, p path) []string {
		out := make([]string, len(sels))
		for i, s := range sels {
			out[i] = s.get(tr, p)
		}
		return out
	}
	switch w := ps.peek(0); {
	case w == "vmap":
		ps.next()
		name := ps.next()
		if !strings.HasPrefix(name, "@") {
			return nil, fmt.Errorf("vmap: only named maps are modelled after a selector")
		}
		name = name[1:]
		return func(tr *tracer, p path) ([]path, bool, error) {
			m := tr.t.Maps[name]
			if m == nil {
				return nil, false, fmt.Errorf("no map %s", name)
			}
			e := m.FindElement(key(tr, p)...)
			if e == nil {
				return nil, false, nil
			}
			v, err := verdictOf(strings.Join(e.Value, " "))
			if err != nil {
				return nil, false, err
			}
			return v(tr, p)
		}, nil
	case strings.HasPrefix(w, "@"):
		ps.next()
		name := w[1:]
		return func(tr *tracer, p path) ([]path, bool, error) {
			if strings.HasPrefix(name, PrefixAffinity) {
				if tr.t.Sets[name] == nil {
					return nil, false, fmt.Errorf("no set %s", name)
				}
				return []path{p}, tr.aff[name], nil
			}
			k := key(tr, p)
			if s := tr.t.Sets[name]; s != nil {
				return []path{p}, s.FindElement(k...) != nil, nil
			}
			if m := tr.t.Maps[name]; m != nil {
				return []path{p}, m.FindElement(k...) != nil, nil
			}
			return nil, false, fmt.Errorf("no set %s", name)
		}, nil
	}
	if len(sels) != 1 {
		return nil, fmt.Errorf("a concatenation needs a set or a map")
	}
	s := sels[0]
	if s.kind == "mark" && ps.peek(0) == "and" {
		ps.next()
		mask, err := strconv.ParseUint(ps.next(), 0, 32)
		if err != nil {
			return nil, fmt.Errorf("mark and: bad mask")
		}
		neg := false
		if ps.peek(0) == "!=" {
			ps.next()
			neg = true
		} else if ps.peek(0) == "==" {
			ps.next()
		}
		val, err := strconv.ParseUint(ps.next(), 0, 32)
		if err != nil {
			return nil, fmt.Errorf("mark and: bad value")
		}
		return func(_ *tracer, p path) ([]path, bool, error) {
			return []path{p}, (uint64(p.mark)&mask == val) != neg, nil
		}, nil
	}
	neg := false
	if ps.peek(0) == "!=" {
		ps.next()
		neg = true
	} else if ps.peek(0) == "==" {
		ps.next()
	}
	var values []string
	if ps.peek(0) == "{" {
		entries, err := ps.braces()
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if len(e) != 1 {
				return nil, fmt.Errorf("bad set element %q", strings.Join(e, " "))
			}
			values = append(values, e[0])
		}
	} else {
		v := ps.next()
		if v == "" {
			return nil, fmt.Errorf("%s needs a value", s.text)
		}
		values = []string{v}
	}
	test, err := valueTest(s, values)
	if err != nil {
		return nil, err
	}
	return func(tr *tracer, p path) ([]path, bool, error) {
		return []path{p}, test(s.get(tr, p)) != neg, nil
	}, nil
}

// valueTest builds the equality (or prefix) test of a selector against
// literal values.
func valueTest(s *selector, values []string) (func(string) bool, error) {
	switch s.kind {
	case "addr":
		var nets []*net.IPNet
		for _, v := range values {
			if !strings.Contains(v, "/") {
				ip := net.ParseIP(v)
				if ip == nil {
					return nil, fmt.Errorf("%s: bad address %q", s.text, v)
				}
				bits := 128
				if ip.To4() != nil {
					ip, bits = ip.To4(), 32
				}
				nets = append(nets, &net.IPNet{IP: ip, Mask: net.CIDRMask(bits, bits)})
				continue
			}
			_, n, err := net.ParseCIDR(v)
			if err != nil {
				return nil, fmt.Errorf("%s: bad prefix %q", s.text, v)
			}
			nets = append(nets, n)
		}
		return func(got string) bool {
			ip := net.ParseIP(got)
			for _, n := range nets {
				if ip != nil && n.Contains(ip) {
					return true
				}
			}
			return false
		}, nil
	case "mark", "port":
		var nums []uint64
		for _, v := range values {
			n, err := strconv.ParseUint(v, 0, 32)
			if err != nil {
				return nil, fmt.Errorf("%s: bad number %q", s.text, v)
			}
			nums = append(nums, n)
		}
		return func(got string) bool {
			g, _ := strconv.ParseUint(got, 10, 32)
			for _, n := range nums {
				if g == n {
					return true
				}
			}
			return false
		}, nil
	default:
		return func(got string) bool {
			for _, v := range values {
				for _, part := range strings.Split(v, ",") {
					if part == got {
						return true
					}
				}
			}
			return false
		}, nil
	}
}
