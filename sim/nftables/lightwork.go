package nftables

import (
	"fmt"
	"time"

	"sigs.k8s.io/knftables"

	"github.com/proxysim/proxysim/sim"
	"github.com/proxysim/proxysim/sim/proxy"
)

// A light node's nftables work (sim.LightWorker): what Proxier.Sync would
// report for each of the node's syncs, without its table. A sync's fixed
// part (the setup of a full sync, with the base chains reset by a
// proxier's first one; the listings; the table's fixed objects) is
// measured once on a real proxier over an empty IndexedFake. Each
// Service's part is rendered by the proxier's own code (syncServicePort)
// for the node, once per state and zone for the nodes that hold none of
// its endpoints: the chains, rules and affinity sets a rewrite writes, the
// chains and sets it keeps alive, and its elements. The node keeps the
// table as numbers: its Services' chains, affinity sets and elements, the
// hairpin elements of its own endpoints (several Services may share one),
// and the stale chains waiting, flushed, for their deletion.
//
// The element diff of a sync is worked out over the Services touched since
// the node's last sync, key by key; it is exact as long as no two Service
// ports hold one frontend (sim.LightSync.SharedFrontend), else the worker
// refuses.

// LightConfig is what the light nodes' work needs beyond the proxier's
// Config.
type LightConfig struct {
	Config
	// IgnoreNodeHints is the node's endpoint conversion option.
	IgnoreNodeHints bool
}

// LightShared is what every light node of one configuration shares: the
// fixed parts of a sync's work and of the table.
type LightShared struct {
	cfg             Config
	ignoreNodeHints bool
	// firstFull, full and partial are the work of a sync of no Service: a
	// proxier's first (full, base chains reset) on a table that does not
	// exist yet, a later full one and a partial one.
	firstFull, full, partial sim.NFTablesWork
	// objects are the table's objects after a sync of no Service.
	objects int
	scratch *knftables.Fake
}

type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time                  { return c.t }
func (c fixedClock) Since(t time.Time) time.Duration { return c.t.Sub(t) }

// NewLightShared measures the fixed parts for cfg.
func NewLightShared(cfg LightConfig) (*LightShared, error) {
	sh := &LightShared{cfg: cfg.Config, ignoreNodeHints: cfg.IgnoreNodeHints,
		scratch: knftables.NewFake(cfg.Family(), Table)}
	p := New(cfg.Config, NewIndexedFake(cfg.Family(), Table), fixedClock{time.Unix(0, 0)}, nil)
	empty := func() *proxy.SyncState {
		return &proxy.SyncState{Services: proxy.ServiceMap{}, Endpoints: proxy.EndpointsMap{}}
	}
	take := func(wantFull bool) (sim.NFTablesWork, error) {
		if err := p.Sync(empty()); err != nil {
			return sim.NFTablesWork{}, fmt.Errorf("nftables: light work: a sync of no Service: %w", err)
		}
		w, _ := p.TakeSyncWork()
		if w.Full != wantFull {
			return sim.NFTablesWork{}, fmt.Errorf("nftables: light work: a sync of no Service was full=%v, want %v", w.Full, wantFull)
		}
		return *w.NFTables, nil
	}
	var err error
	if sh.firstFull, err = take(true); err != nil {
		return nil, err
	}
	p.ForceFullSync()
	if sh.full, err = take(true); err != nil {
		return nil, err
	}
	if sh.partial, err = take(false); err != nil {
		return nil, err
	}
	sh.objects = sh.partial.ObjectsListed
	return sh, nil
}

// Worker is a light node's sim.LightWorker.
func (sh *LightShared) Worker(node, zone string) sim.LightWorker {
	return &lightNode{sh: sh, node: node, zone: zone, needFull: true, hairpin: map[string]int{}}
}

// elemKey is an element of one of the proxier's sets and maps: the index
// of its container (Proxier.containers) and its key.
type elemKey struct {
	in  int
	key string
}

type element struct {
	elemKey
	value string
}

// svcObjects is what one Service's state makes on one node.
type svcObjects struct {
	// chains and affinity are its chains and affinity sets, which a sync
	// keeps alive whether it rewrites the Service or not.
	chains, affinity []string
	// rewrite is what a sync rewriting it queues, elements aside.
	rewrite sim.NFTOps
	// rewritten is the chains it adds and flushes (ChainsRewritten).
	rewritten int
	// elements are its elements but the hairpin ones; hairpin the keys of
	// its hairpin elements (its endpoints on the node).
	elements []element
	hairpin  []string
}

var noObjects = &svcObjects{}

type memoKey struct {
	sh   *LightShared
	zone string
}

// objectsOf renders a Service's state for the node (nil state: nothing).
func (n *lightNode) objectsOf(s *sim.ServiceState) *svcObjects {
	if s.Gone() {
		return noObjects
	}
	if !n.special(s) {
		memo, _ := s.Memo.(map[memoKey]*svcObjects)
		k := memoKey{n.sh, n.zone}
		if o := memo[k]; o != nil {
			return o
		}
		o := n.sh.render(s, "", n.zone, false)
		if memo == nil {
			memo = map[memoKey]*svcObjects{}
			s.Memo = memo
		}
		memo[k] = o
		return o
	}
	return n.sh.render(s, n.node, n.zone, n.sh.ignoreNodeHints)
}

// special says whether the node sees the Service otherwise than a node of
// its zone that holds none of its endpoints: it holds one, or a hint names
// it (or it ignores node hints the Service's endpoints carry).
func (n *lightNode) special(s *sim.ServiceState) bool {
	for _, p := range s.Ports {
		for _, e := range p.Endpoints {
			if e.NodeName == n.node {
				return true
			}
			if len(e.NodeHints) > 0 {
				if n.sh.ignoreNodeHints {
					return true
				}
				for _, h := range e.NodeHints {
					if h == n.node {
						return true
					}
				}
			}
		}
	}
	return false
}

// render runs the proxier's per service-port code for every port of a
// Service's state as node (empty: none of its endpoints local) in zone,
// into a transaction never run.
func (sh *LightShared) render(s *sim.ServiceState, node, zone string, noNodeHints bool) *svcObjects {
	st := s.SyncStateOf(node, zone, noNodeHints)
	p := New(sh.cfg, sh.scratch, fixedClock{}, nil)
	p.work = &sim.NFTablesWork{}
	tx := p.newTxn()
	active, affinity := map[string]bool{}, map[string]bool{}
	for _, port := range s.Ports {
		p.syncServicePort(tx, st, port.Name, port.Port, false, active, affinity)
	}
	o := &svcObjects{chains: sortedKeys(active), affinity: sortedKeys(affinity), rewrite: p.work.Ops, rewritten: p.work.ChainsRewritten}
	for v := range o.rewrite {
		o.rewrite[v][sim.NFTElement] = 0
	}
	for i, c := range p.containers {
		for _, k := range sortedKeys(haveKeys(c)) {
			if c == p.hairpin {
				o.hairpin = append(o.hairpin, k)
				continue
			}
			o.elements = append(o.elements, element{elemKey{i, k}, c.have[k]})
		}
	}
	return o
}

func haveKeys(c *elements) map[string]bool {
	out := make(map[string]bool, len(c.have))
	for k := range c.have {
		out[k] = true
	}
	return out
}

// staleChain is a service chain flushed and waiting for its deletion:
// since when, and whether the node's current proxier knows it (a new one
// finds it in its first listing and flushes it again).
type staleChain struct {
	at    time.Time
	known bool
}

// lightNode is one light node's proxier and table, as numbers.
type lightNode struct {
	sh         *LightShared
	node, zone string

	// The proxier's (Proxier's needFullSync, lastFullSync,
	// baseChainsReset).
	needFull  bool
	lastFull  time.Time
	baseReset bool
	// made says a transaction went through: the table exists.
	made bool

	// The table: its Services' chains and affinity sets, its elements but
	// the hairpin ones, the hairpin keys and how many Services hold each,
	// and the stale chains.
	chains, affinity, elements int
	hairpin                    map[string]int
	stale                      map[string]staleChain
}

func (n *lightNode) Restart() {
	n.needFull, n.lastFull, n.baseReset = true, time.Time{}, false
	for name, c := range n.stale {
		c.known = false
		n.stale[name] = c
	}
}

func addOps(to *sim.NFTOps, o *sim.NFTOps) {
	for v := range o {
		for t := range o[v] {
			to[v][t] += o[v][t]
		}
	}
}

// Sync is Proxier.Sync's bookkeeping, on numbers.
func (n *lightNode) Sync(s *sim.LightSync) (sim.SyncWork, error) {
	if why := s.SharedFrontend(); why != "" {
		return sim.SyncWork{}, fmt.Errorf("nftables: a light node's work cannot tell Services apart when %s: materialise the pool", why)
	}
	now := s.Now
	full := n.needFull || now.Sub(n.lastFull) > FullSyncPeriod
	var w sim.NFTablesWork
	switch {
	case full && !n.baseReset:
		w = n.sh.firstFull
	case full:
		w = n.sh.full
	default:
		w = n.sh.partial
	}

	// The stale chains flushed long enough ago go first, in a transaction
	// of their own.
	cutoff := now.Add(-StaleChainDelay)
	for name, c := range n.stale {
		if c.known && c.at.Before(cutoff) {
			w.Ops[sim.NFTDelete][sim.NFTChain]++
			w.StaleChainsDeleted++
			delete(n.stale, name)
		}
	}
	if w.StaleChainsDeleted > 0 {
		w.Transactions++
	}
	w.ObjectsListed, w.ElementsListed = 0, 0
	if n.made {
		w.ObjectsListed = n.sh.objects + n.chains + n.affinity + len(n.stale)
		if full {
			w.ElementsListed = n.elements + len(n.hairpin)
		}
	}

	// Every Service touched since the last sync: its elements, its chains
	// and sets; a new node's table is empty.
	type pair struct {
		name     string
		old, cur *svcObjects
	}
	var pairs []pair
	if s.Applied < 0 {
		s.Each(func(st *sim.ServiceState) {
			pairs = append(pairs, pair{st.Name.String(), noObjects, n.objectsOf(st)})
		})
	} else {
		for _, name := range s.Touched {
			pairs = append(pairs, pair{name.String(), n.objectsOf(s.At(name, s.Applied)), n.objectsOf(s.At(name, s.Heard))})
		}
	}
	changed := map[string]bool{}
	for _, name := range s.Changed {
		changed[name.String()] = true
	}
	oldE, newE := map[elemKey]string{}, map[elemKey]string{}
	hairpin := map[string]int{}
	revived := map[string]bool{}
	var gone []string
	for _, p := range pairs {
		for _, side := range []struct {
			objs *svcObjects
			into map[elemKey]string
			d    int
		}{{p.old, oldE, -1}, {p.cur, newE, 1}} {
			for _, e := range side.objs.elements {
				if _, dup := side.into[e.elemKey]; dup {
					return sim.SyncWork{}, fmt.Errorf("nftables: a light node's work: two Services hold element %q: materialise the pool", e.key)
				}
				side.into[e.elemKey] = e.value
			}
			for _, h := range side.objs.hairpin {
				hairpin[h] += side.d
			}
		}
		rewritten := full || s.Applied < 0 || changed[p.name]
		if !rewritten && (!sameStrings(p.old.chains, p.cur.chains) || !sameStrings(p.old.affinity, p.cur.affinity)) {
			return sim.SyncWork{}, fmt.Errorf("nftables: a light node's work: Service %s's chains changed but the sync does not rewrite it", p.name)
		}
		if rewritten && !full {
			addOps(&w.Ops, &p.cur.rewrite)
			w.ChainsRewritten += p.cur.rewritten
		}
		n.chains += len(p.cur.chains) - len(p.old.chains)
		n.affinity += len(p.cur.affinity) - len(p.old.affinity)
		for _, c := range p.cur.chains {
			revived[c] = true
		}
		gone = append(gone, missing(p.old.chains, p.cur.chains)...)
		w.Ops[sim.NFTDelete][sim.NFTSet] += len(missing(p.old.affinity, p.cur.affinity))
	}
	if full {
		s.Each(func(st *sim.ServiceState) {
			o := n.objectsOf(st)
			addOps(&w.Ops, &o.rewrite)
			w.ChainsRewritten += o.rewritten
		})
	}

	// The element diff, key by key.
	for k, ov := range oldE {
		nv, ok := newE[k]
		switch {
		case !ok:
			w.Ops[sim.NFTDelete][sim.NFTElement]++
		case nv != ov:
			w.Ops[sim.NFTDelete][sim.NFTElement]++
			w.Ops[sim.NFTAdd][sim.NFTElement]++
		}
	}
	for k := range newE {
		if _, ok := oldE[k]; !ok {
			w.Ops[sim.NFTAdd][sim.NFTElement]++
		}
	}
	n.elements += len(newE) - len(oldE)
	for h, d := range hairpin {
		if d == 0 {
			continue
		}
		before := n.hairpin[h]
		after := before + d
		switch {
		case before == 0 && after > 0:
			w.Ops[sim.NFTAdd][sim.NFTElement]++
		case before > 0 && after == 0:
			w.Ops[sim.NFTDelete][sim.NFTElement]++
		case after < 0:
			return sim.SyncWork{}, fmt.Errorf("nftables: a light node's work: hairpin element %q held by %d Services", h, after)
		}
		if after == 0 {
			delete(n.hairpin, h)
		} else {
			n.hairpin[h] = after
		}
	}

	// The table's service chains no Service uses now are flushed; those
	// used again stop being stale.
	flushed := 0
	for name := range n.stale {
		if revived[name] {
			delete(n.stale, name)
			continue
		}
		flushed++
		n.stale[name] = staleChain{at: now, known: true}
	}
	for _, name := range gone {
		if _, ok := n.stale[name]; ok || revived[name] {
			continue
		}
		if n.stale == nil {
			n.stale = map[string]staleChain{}
		}
		flushed++
		n.stale[name] = staleChain{at: now, known: true}
	}
	w.Ops[sim.NFTFlush][sim.NFTChain] += flushed
	w.StaleChainsFlushed = flushed

	n.made = true
	n.needFull = false
	if full {
		n.lastFull, n.baseReset = now, true
	}
	return sim.SyncWork{Full: full, NFTables: &w}, nil
}

func sameStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// missing lists the names of sorted list a that sorted list b lacks.
func missing(a, b []string) []string {
	var out []string
	j := 0
	for _, x := range a {
		for j < len(b) && b[j] < x {
			j++
		}
		if j >= len(b) || b[j] != x {
			out = append(out, x)
		}
	}
	return out
}
