package iptables

import (
	"fmt"
	"strings"
	"time"

	"github.com/proxysim/proxysim/sim"
	"github.com/proxysim/proxysim/sim/proxy"
)

// A light node's iptables work (sim.LightWorker): what Proxier.Sync would
// report for each of the node's syncs, without its tables. A sync's
// payload is the filter table and kube-proxy's fixed nat chains whole,
// every Service's KUBE-SERVICES and KUBE-NODEPORTS rules, and the own
// chains of the Services it rewrites (all on a full sync, the changed ones
// on a partial one), plus the stale chains it deletes; its iptables-save
// reads the nat table the node's earlier restores left. Each Service's part
// is rendered by the proxier's own code (renderServicePort) for the node,
// once per state and zone for the nodes that hold none of its endpoints;
// the node keeps the sums over Services as of its last sync, the size of
// its nat table and the stale chains still in it (large-cluster mode
// deletes them at most once per SyncPeriod).

// LightConfig is what the light nodes' work needs beyond the proxier's
// Config: what the node's dataplane holds before its first sync.
type LightConfig struct {
	Config
	// Canary says the proxier's canary monitor runs (it creates its chain
	// in the nat table before the first sync).
	Canary bool
	// IgnoreNodeHints is the node's endpoint conversion option.
	IgnoreNodeHints bool
}

// LightShared is what every light node of one configuration shares: the
// fixed parts of a payload and of the nat table.
type LightShared struct {
	cfg Config
	// fixed is the payload of a full sync of no Service: the fixed chains
	// and rules.
	fixed rendered
	// ensured and empty are the nat table's iptables-save (lines, bytes)
	// once the full sync's jumps are ensured, and after a restore of no
	// Service.
	ensured, empty  lineBytes
	canary          bool
	ignoreNodeHints bool
}

type lineBytes struct{ lines, bytes int }

// NewLightShared works out the fixed parts for cfg.
func NewLightShared(cfg LightConfig) (*LightShared, error) {
	sh := &LightShared{cfg: cfg.Config, canary: cfg.Canary, ignoreNodeHints: cfg.IgnoreNodeHints}
	st := &proxy.SyncState{Services: proxy.ServiceMap{}, Endpoints: proxy.EndpointsMap{}}
	sh.fixed = render(cfg.Config, st, plan{full: true, cleanup: true})
	rs := NewRuleset()
	if cfg.Canary {
		rs["nat"][ChainCanary] = &Chain{Name: ChainCanary, Policy: "-"}
	}
	for _, j := range jumps {
		if j.table != "nat" {
			continue
		}
		if rs["nat"][j.to] == nil {
			rs["nat"][j.to] = &Chain{Name: j.to, Policy: "-"}
		}
		next, err := Apply(rs, "*nat\n-A "+j.from+" "+j.rule()+"\nCOMMIT\n")
		if err != nil {
			return nil, fmt.Errorf("iptables: light work: %w", err)
		}
		c := next["nat"][j.from]
		last := len(c.Rules) - 1
		c.Rules = append([]*Rule{c.Rules[last]}, c.Rules[:last]...)
		rs = next
	}
	sh.ensured = sizeOf(rs.Save("nat"))
	after, err := Apply(rs, sh.fixed.payload)
	if err != nil {
		return nil, fmt.Errorf("iptables: light work: %w", err)
	}
	sh.empty = sizeOf(after.Save("nat"))
	return sh, nil
}

func sizeOf(text string) lineBytes { return lineBytes{strings.Count(text, "\n"), len(text)} }

// Worker is a light node's sim.LightWorker.
func (sh *LightShared) Worker(node, zone string) sim.LightWorker {
	return &lightNode{sh: sh, node: node, zone: zone, needFull: true}
}

// svcRules is what one Service writes on one node: its filter rules and
// its KUBE-SERVICES / KUBE-NODEPORTS rules (every sync), and its own nat
// chains (when rewritten).
type svcRules struct {
	filter, top lineBytes
	chains      []chainSize
	// loose are rules in chains the Service does not declare (none in
	// what kube-proxy writes), counted but not followed.
	loose lineBytes
}

// chainSize is one nat chain: its rules and their bytes (its `-A` lines).
type chainSize struct {
	name  string
	rules int
	bytes int
}

func chainLineBytes(name string) int { return len(name) + len(": - [0:0]\n") }

func (r *svcRules) chainTotals() (chains, rules, bytes int) {
	for _, c := range r.chains {
		chains++
		rules += c.rules
		bytes += chainLineBytes(c.name) + c.bytes
	}
	return chains, rules + r.loose.lines, bytes + r.loose.bytes
}

type memoKey struct {
	sh    *LightShared
	zone  string
	large bool
}

// rulesOf renders a Service's state for the node (nil state: nothing).
func (n *lightNode) rulesOf(s *sim.ServiceState, large bool) *svcRules {
	if s.Gone() {
		return &svcRules{}
	}
	if !n.special(s) {
		memo, _ := s.Memo.(map[memoKey]*svcRules)
		k := memoKey{n.sh, n.zone, large}
		if r := memo[k]; r != nil {
			return r
		}
		r := n.sh.renderService(s, "", n.zone, large, false)
		if memo == nil {
			memo = map[memoKey]*svcRules{}
			s.Memo = memo
		}
		memo[k] = r
		return r
	}
	return n.sh.renderService(s, n.node, n.zone, large, n.sh.ignoreNodeHints)
}

// special says whether the node sees the Service otherwise than a node of
// its zone that holds none of its endpoints: it holds one, or a hint names
// it (or it ignores node hints the Service's endpoints carry).
func (n *lightNode) special(s *sim.ServiceState) bool {
	for _, p := range s.Ports {
		for _, e := range p.Endpoints {
			if e.NodeName == n.node || (len(e.NodeHints) > 0 && (n.sh.ignoreNodeHints || contains(e.NodeHints, n.node))) {
				return true
			}
		}
	}
	return false
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// renderService renders one Service's ports as node (empty: none of its
// endpoints local) in zone.
func (sh *LightShared) renderService(s *sim.ServiceState, node, zone string, large, noNodeHints bool) *svcRules {
	st := s.SyncStateOf(node, zone, noNodeHints)
	nm := newNames()
	nm.gen++
	p := &payload{large: large, names: nm}
	p.skipChains.discard, p.skipRules.discard = true, true
	pl := plan{full: true, large: large, names: nm}
	for _, port := range s.Ports {
		renderServicePort(p, sh.cfg, st, pl, port.Name, port.Port)
	}
	r := &svcRules{filter: lineBytes{p.filterRules.n, len(p.filterRules.b)}}
	at := map[string]int{}
	for _, l := range strings.SplitAfter(string(p.natChains.b), "\n") {
		if l == "" {
			continue
		}
		name, _, _ := strings.Cut(l[1:], " ")
		at[name] = len(r.chains)
		r.chains = append(r.chains, chainSize{name: name})
	}
	for _, l := range strings.SplitAfter(string(p.natRules.b), "\n") {
		if l == "" {
			continue
		}
		chain, _, _ := strings.Cut(strings.TrimPrefix(l, "-A "), " ")
		switch i, ok := at[chain]; {
		case chain == ChainServices || chain == ChainNodePorts:
			r.top.lines++
			r.top.bytes += len(l)
		case ok:
			r.chains[i].rules++
			r.chains[i].bytes += len(l)
		default:
			r.loose.lines++
			r.loose.bytes += len(l)
		}
	}
	return r
}

// lightNode is one light node's proxier and nat table, as numbers.
type lightNode struct {
	sh         *LightShared
	node, zone string

	// The proxier's (Proxier's fields of the same names).
	needFull    bool
	lastFull    time.Time
	large       bool
	cleaned     bool
	lastCleanup time.Time
	restored    bool // a restore went through: the fixed chains are there
	// The large-cluster mode each sync wrote in (it drops the comments of
	// the chains' rules): the syncs that changed it, and the last full
	// sync's. A Service's chains, unchanged since, hold the comments of the
	// sync that wrote them (writtenLarge).
	flips               []flip
	lastLarge           bool
	fullHeard           int
	fullLarge, everFull bool

	// Sums over the Services at the last sync's position: filter rules,
	// KUBE-SERVICES / KUBE-NODEPORTS rules, and their own chains as the
	// table holds them.
	filter, top             lineBytes
	chains, chainRules      int
	chainBytes              int
	stale                   map[string]chainSize // service chains in the table no Service has now
	staleLines, staleBytesN int
}

// flip is a sync that wrote in another large-cluster mode than the sync
// before it (prev: that sync's stream position; heard: its own).
type flip struct {
	prev, heard int
	large       bool
}

// writtenLarge is the large-cluster mode in which the sync that last wrote
// a Service's chains wrote them, for its state from stream position at
// on, unchanged since: the last full sync if it came after, else the
// first sync that applied the state.
func (n *lightNode) writtenLarge(at int) bool {
	if n.everFull && n.fullHeard >= at {
		return n.fullLarge
	}
	for _, f := range n.flips {
		if f.heard >= at {
			if f.prev < at {
				return f.large
			}
			return !f.large
		}
	}
	return n.lastLarge
}

func (n *lightNode) Restart() {
	n.needFull, n.lastFull, n.large, n.cleaned, n.lastCleanup = true, time.Time{}, false, false, time.Time{}
}

// Sync is Proxier.Sync's and sync's bookkeeping, on numbers.
func (n *lightNode) Sync(s *sim.LightSync) (sim.SyncWork, error) {
	now := s.Now
	full := n.needFull || (now.Sub(n.lastFull) >= FullSyncPeriod && !n.large)
	work := &sim.IPTablesWork{}
	if full {
		work.EnsureChains, work.EnsureRules = len(jumps), len(jumps)
	}
	large := s.LargeEndpoints > LargeClusterEndpoints
	n.large = large
	cleanup := false
	if !large || !n.cleaned || now.Sub(n.lastCleanup) > n.sh.cfg.SyncPeriod {
		var t lineBytes
		if !n.restored {
			t = n.sh.ensured
		} else {
			t = n.sh.empty
			t.lines += n.top.lines + n.chains + n.chainRules + n.staleLines
			t.bytes += n.top.bytes + n.chainBytes + n.staleBytesN
		}
		work.Saves++
		work.SavedLines, work.SavedBytes = t.lines, t.bytes
		cleanup = true
		n.lastCleanup, n.cleaned = now, true
	}

	// What changed since the last sync: the filter and top rules of every
	// Service touched, the chains of the changed ones, and the chains that
	// went away.
	changed := map[string]bool{}
	for _, name := range s.Changed {
		changed[name.String()] = true
	}
	var gone []chainSize
	var wChains, wRules, wBytes int
	for _, name := range s.Touched {
		was := s.At(name, s.Applied)
		oldLarge := large
		if was != nil {
			oldLarge = n.writtenLarge(was.At)
		}
		old, cur := n.rulesOf(was, oldLarge), n.rulesOf(s.At(name, s.Heard), large)
		n.filter.lines += cur.filter.lines - old.filter.lines
		n.filter.bytes += cur.filter.bytes - old.filter.bytes
		n.top.lines += cur.top.lines - old.top.lines
		n.top.bytes += cur.top.bytes - old.top.bytes
		if !changed[name.String()] {
			continue
		}
		oc, or, ob := old.chainTotals()
		cc, cr, cb := cur.chainTotals()
		n.chains += cc - oc
		n.chainRules += cr - or
		n.chainBytes += cb - ob
		if !full {
			wChains, wRules, wBytes = wChains+cc, wRules+cr, wBytes+cb
		}
		keep := map[string]bool{}
		for _, c := range cur.chains {
			keep[c.name] = true
			if _, ok := n.stale[c.name]; ok {
				n.dropStale(c.name)
			}
		}
		for _, c := range old.chains {
			if !keep[c.name] {
				gone = append(gone, c)
			}
		}
	}
	if s.Applied < 0 || full {
		// A full sync writes every Service's chains, in this sync's mode.
		n.filter, n.top, n.chains, n.chainRules, n.chainBytes = lineBytes{}, lineBytes{}, 0, 0, 0
		s.Each(func(st *sim.ServiceState) {
			r := n.rulesOf(st, large)
			n.filter.lines += r.filter.lines
			n.filter.bytes += r.filter.bytes
			n.top.lines += r.top.lines
			n.top.bytes += r.top.bytes
			c, ru, b := r.chainTotals()
			n.chains, n.chainRules, n.chainBytes = n.chains+c, n.chainRules+ru, n.chainBytes+b
			for _, ch := range r.chains {
				if _, ok := n.stale[ch.name]; ok {
					n.dropStale(ch.name)
				}
			}
		})
		wChains, wRules, wBytes = n.chains, n.chainRules, n.chainBytes
		n.everFull, n.fullHeard, n.fullLarge = true, s.Heard, large
	}
	if s.Applied < 0 || large != n.lastLarge {
		n.flips = append(n.flips, flip{prev: s.Applied, heard: s.Heard, large: large})
	}
	n.lastLarge = large
	for _, c := range gone {
		n.addStale(c)
	}
	deleted, deletedBytes := 0, 0
	if cleanup {
		for name := range n.stale {
			deleted++
			deletedBytes += chainLineBytes(name) + len("-X \n") + len(name)
		}
		n.stale, n.staleLines, n.staleBytesN = nil, 0, 0
	}

	fx := n.sh.fixed
	work.Filter = sim.RestoreSection{
		Lines: fx.filter.Lines + n.filter.lines, Bytes: fx.filter.Bytes + n.filter.bytes,
		Chains: fx.filter.Chains, Rules: fx.filter.Rules + n.filter.lines,
	}
	work.NAT = sim.RestoreSection{
		Lines:  fx.nat.Lines + n.top.lines + wChains + wRules + 2*deleted,
		Bytes:  fx.nat.Bytes + n.top.bytes + wBytes + deletedBytes,
		Chains: fx.nat.Chains + wChains + deleted, Rules: fx.nat.Rules + n.top.lines + wRules,
		DeletedChains: deleted,
	}
	work.TableRules = work.Filter.Rules + fx.nat.Rules + n.top.lines + n.chainRules
	work.Restores = 1
	n.restored = true
	if full {
		n.lastFull = now
	}
	n.needFull = false
	return sim.SyncWork{Full: full, IPTables: work}, nil
}

func (n *lightNode) addStale(c chainSize) {
	if n.stale == nil {
		n.stale = map[string]chainSize{}
	}
	if _, ok := n.stale[c.name]; ok {
		return
	}
	n.stale[c.name] = c
	n.staleLines += 1 + c.rules
	n.staleBytesN += chainLineBytes(c.name) + c.bytes
}

func (n *lightNode) dropStale(name string) {
	c := n.stale[name]
	delete(n.stale, name)
	n.staleLines -= 1 + c.rules
	n.staleBytesN -= chainLineBytes(c.name) + c.bytes
}
