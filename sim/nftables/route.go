package nftables

import (
	"fmt"
	"maps"
	"math/big"
	"net"
	"slices"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/knftables"

	"github.com/proxysim/proxysim/sim/route"
)

// A tracer over a kube-proxy table, with exact shares.
//
// It runs the packet through the table's base chains as netfilter would:
// from another host, the prerouting hook, then input (to a local address
// after DNAT) or forward, then postrouting; from one of the node's own
// addresses, output then postrouting. Within a hook, base chains run in
// priority order (knftables.ParsePriority). `numgen random mod N` splits
// the paths reaching it into N of 1/N each, exactly; `vmap` and `map`
// look elements up in the table's maps; `fib ... type local` tests the
// node's addresses (and loopback); marks are kept per path. The packet
// opens a new connection: `ct state new` holds, `ct status dnat` holds once
// translated. An affinity set (`ip saddr @affinity-...`) holds the client
// only if Affinity says so; `update @set { ip saddr }` is recorded on the
// path, so that a second connection can be traced after the first.
//
// Only the expression shapes kube-proxy writes are understood; anything
// else is an error naming the chain and the rule, never a guess.

// Affinity is the state of dynamic affinity sets: the sets a client is in.
type Affinity map[string]bool

// Outcome is one way a packet can go: where it ends ("ip:port" after DNAT,
// or route.Accept, route.Drop, route.Reject), with what share, and the
// affinity sets the path added the client to.
type Outcome struct {
	Where   string
	Share   *big.Rat
	Updated Affinity
	// Masquerade: a postrouting rule masqueraded the connection.
	Masquerade bool
}

// Route traces the first packet of a new connection through t and returns
// each outcome's exact share. local are the node's addresses.
func Route(t *knftables.FakeTable, local []net.IP, pkt route.Packet) (route.Shares, error) {
	outs, err := Trace(t, local, pkt, nil)
	if err != nil {
		return nil, err
	}
	sh := route.Shares{}
	for _, o := range outs {
		sh.Add(o.Where, o.Share)
	}
	return sh, nil
}

// RouteMasquerade is Route that also returns, for each outcome, the part
// of its share that a `masquerade` statement rewrote the source of (the
// nat-postrouting chain's, for marked packets).
func RouteMasquerade(t *knftables.FakeTable, local []net.IP, pkt route.Packet) (route.Shares, route.Shares, error) {
	outs, err := Trace(t, local, pkt, nil)
	if err != nil {
		return nil, nil, err
	}
	sh, masq := route.Shares{}, route.Shares{}
	for _, o := range outs {
		sh.Add(o.Where, o.Share)
		if o.Masquerade {
			masq.Add(o.Where, o.Share)
		}
	}
	return sh, masq, nil
}

// RouteAgain traces two connections of the same client, the second gap
// after the first, and returns the share of each pair of outcomes, keyed
// "first -> second". An affinity set entry added by the first lasts for
// the set's timeout (refreshed by every update), so with ClientIP affinity
// and a gap under the timeout every pair is "X -> X".
func RouteAgain(t *knftables.FakeTable, local []net.IP, pkt route.Packet, gap time.Duration) (route.Shares, error) {
	first, err := Trace(t, local, pkt, nil)
	if err != nil {
		return nil, err
	}
	sh := route.Shares{}
	for _, f := range first {
		aff := Affinity{}
		for s := range f.Updated {
			if set := t.Sets[s]; set != nil && !expired(set, gap) {
				aff[s] = true
			}
		}
		second, err := Trace(t, local, pkt, aff)
		if err != nil {
			return nil, err
		}
		for _, o := range second {
			sh.Add(f.Where+" -> "+o.Where, new(big.Rat).Mul(f.Share, o.Share))
		}
	}
	return sh, nil
}

// expired says whether an entry of a dynamic set has timed out gap after
// it was last updated (an entry of a set without timeout never does).
func expired(set *knftables.FakeSet, gap time.Duration) bool {
	return set.Timeout != nil && gap >= *set.Timeout
}

// Probe tells a real kernel how to run one trial of a route measurement so
// that it starts from what the tracer assumed, in real time that does not
// follow the virtual clock: Forget are the affinity sets emptied before
// each trial (the tracer's client has no history); with Again a trial is
// two connections of the client, keyed "FIRST -> SECOND" as RouteAgain
// keys them, and Expire are the affinity sets emptied between the two
// (their entries would have timed out over the gap).
type Probe struct {
	Forget []string
	Again  bool
	Expire []string
}

// ProbeFor is the probe for a route traced over t (with RouteAgain when
// again is set).
func ProbeFor(t *knftables.FakeTable, again *time.Duration) Probe {
	var p Probe
	if t == nil {
		return p
	}
	for _, name := range slices.Sorted(maps.Keys(t.Sets)) {
		if !strings.HasPrefix(name, PrefixAffinity) {
			continue
		}
		p.Forget = append(p.Forget, name)
		if again != nil && expired(t.Sets[name], *again) {
			p.Expire = append(p.Expire, name)
		}
	}
	p.Again = again != nil
	return p
}

// Trace is Route with the outcomes kept apart, given the client's affinity
// state.
func Trace(t *knftables.FakeTable, local []net.IP, pkt route.Packet, aff Affinity) ([]Outcome, error) {
	if t == nil {
		return nil, fmt.Errorf("tracer: no table")
	}
	tr := &tracer{t: t, local: local, pkt: pkt, aff: aff, rules: map[*knftables.Rule][]item{}}
	start := path{dst: pkt.Dst, dport: pkt.DPort, w: big.NewRat(1, 1)}
	fromNode := tr.isLocal(pkt.Src)
	first := knftables.PreroutingHook
	if fromNode {
		first = knftables.OutputHook
	}
	paths, err := tr.hook(first, []path{start})
	if err != nil {
		return nil, err
	}
	if !fromNode {
		var in, fwd []path
		for _, p := range paths {
			switch {
			case p.verdict == route.Drop || p.verdict == route.Reject:
				in = append(in, p) // already final; passes through untouched
			case tr.isLocal(p.dst):
				in = append(in, p)
			default:
				fwd = append(fwd, p)
			}
		}
		if in, err = tr.hook(knftables.InputHook, in); err != nil {
			return nil, err
		}
		if fwd, err = tr.hook(knftables.ForwardHook, fwd); err != nil {
			return nil, err
		}
		paths = append(in, fwd...)
	}
	if paths, err = tr.hook(knftables.PostroutingHook, paths); err != nil {
		return nil, err
	}
	var out []Outcome
	for _, p := range paths {
		if p.w.Sign() == 0 {
			continue
		}
		where := p.verdict
		if where == "" || where == route.Accept {
			where = route.Accept
			if p.dnat != "" {
				where = p.dnat
			}
		}
		out = append(out, Outcome{Where: where, Share: p.w, Updated: p.updated, Masquerade: p.masq})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Where < out[j].Where })
	return out, nil
}

// path is one way through the table with its weight. verdict is "" while
// it runs, route.Drop or route.Reject once stopped, route.Accept when a
// chain accepted it; a jump or goto is pending in next.
type path struct {
	dst     net.IP
	dport   int
	mark    uint32
	dnat    string // "ip:port" once translated
	masq    bool   // a masquerade statement took it
	updated Affinity
	w       *big.Rat
	verdict string
	next    string // "jump X", "goto X" or "return", for the chain runner
}

func (p path) with(w *big.Rat) path { p.w = w; return p }

type tracer struct {
	t     *knftables.FakeTable
	local []net.IP
	pkt   route.Packet
	aff   Affinity
	rules map[*knftables.Rule][]item
}

func (tr *tracer) isLocal(ip net.IP) bool {
	if ip.IsLoopback() {
		return true
	}
	for _, l := range tr.local {
		if l.Equal(ip) {
			return true
		}
	}
	return false
}

// hook runs the paths still going through every base chain of a hook, in
// priority order; a path that one accepts goes on to the next.
func (tr *tracer) hook(h knftables.BaseChainHook, paths []path) ([]path, error) {
	type prio struct {
		name string
		p    int
	}
	var chains []prio
	for name, c := range tr.t.Chains {
		if c.Hook == nil || *c.Hook != h || c.Priority == nil {
			continue
		}
		p, err := knftables.ParsePriority(tr.t.Family, string(*c.Priority))
		if err != nil {
			return nil, fmt.Errorf("tracer: chain %s: %v", name, err)
		}
		chains = append(chains, prio{name, p})
	}
	sort.Slice(chains, func(i, j int) bool {
		if chains[i].p != chains[j].p {
			return chains[i].p < chains[j].p
		}
		return chains[i].name < chains[j].name
	})
	for _, c := range chains {
		var next []path
		for _, p := range paths {
			if p.verdict == route.Drop || p.verdict == route.Reject {
				next = append(next, p)
				continue
			}
			p.verdict = ""
			out, err := tr.chain(c.name, p, 0)
			if err != nil {
				return nil, err
			}
			next = append(next, out...)
		}
		paths = next
	}
	return paths, nil
}

// maxDepth bounds chain nesting: the kernel refuses loops, a table from a
// dump is not checked for them.
const maxDepth = 32

// chain runs a path through a chain. Paths come back with a final verdict,
// or with none when they fell off the chain's end or returned.
func (tr *tracer) chain(name string, p path, depth int) ([]path, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("tracer: chains nest deeper than %d at %s", maxDepth, name)
	}
	c := tr.t.Chains[name]
	if c == nil {
		return nil, fmt.Errorf("tracer: no chain %s", name)
	}
	live := []path{p}
	var done []path
	for _, r := range c.Rules {
		items, err := tr.compile(r)
		if err != nil {
			return nil, fmt.Errorf("tracer: chain %s: rule %q: %v", name, r.Rule, err)
		}
		var next []path
		for _, lp := range live {
			outs, err := tr.eval(items, lp)
			if err != nil {
				return nil, fmt.Errorf("tracer: chain %s: rule %q: %v", name, r.Rule, err)
			}
			for _, o := range outs {
				switch {
				case o.verdict != "":
					done = append(done, o)
				case o.next == "return":
					o.next = ""
					done = append(done, o)
				case o.next != "":
					verb, target, _ := strings.Cut(o.next, " ")
					o.next = ""
					sub, err := tr.chain(target, o, depth+1)
					if err != nil {
						return nil, err
					}
					for _, s := range sub {
						if s.verdict == "" && verb == "jump" {
							next = append(next, s)
						} else {
							done = append(done, s) // a goto returns to our caller
						}
					}
				default:
					next = append(next, o)
				}
			}
		}
		live = next
	}
	return append(done, live...), nil
}

// item is one expression of a rule. A match returns ok=false when it
// does not hold; a statement changes the path, splits it, or ends the
// rule with a verdict or a jump.
type item func(tr *tracer, p path) (out []path, ok bool, err error)

// eval runs a path through a rule's items: the path comes back unchanged,
// with no verdict, when a match fails (kube-proxy writes every match
// before the rule's first statement), and as the statements made it
// otherwise.
func (tr *tracer) eval(items []item, p path) ([]path, error) {
	cur := []path{p}
	var passed []path // paths a match stopped: the rule did nothing to them
	for _, it := range items {
		var next []path
		for _, c := range cur {
			if c.verdict != "" || c.next != "" {
				next = append(next, c)
				continue
			}
			outs, ok, err := it(tr, c)
			if err != nil {
				return nil, err
			}
			if !ok {
				passed = append(passed, p.with(c.w))
				continue
			}
			next = append(next, outs...)
		}
		cur = next
	}
	return append(cur, passed...), nil
}
