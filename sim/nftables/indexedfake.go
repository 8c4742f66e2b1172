package nftables

import (
	"context"
	"strings"

	"sigs.k8s.io/knftables"
)

// IndexedFake is a knftables.Fake that takes the proxier's set and map
// elements through an index. knftables.Fake looks each element up by a
// linear scan of its set (findElement), so a sync that adds n elements to
// a set costs n²/2 comparisons: most of a large cluster's first sync. Run
// with the operations the proxier queued (txn keeps them; knftables keeps
// a transaction's to itself), IndexedFake runs everything but the elements
// on the Fake, in order, then applies the elements with an index, when
// that comes to the same table: each element's set or map exists at its
// place in the transaction, nothing later flushes or deletes it, a map
// element's chain exists there, and a deleted element is present. Any
// other transaction (one that would fail on an element, or one whose
// operations are not known) runs on the Fake as it is, so errors are the
// Fake's own. Rule, chain, set and map handles are numbered as the Fake
// numbers them (each element added counts), the elements keep the Fake's
// order, and Fake.LastTransaction is the transaction run.
type IndexedFake struct {
	*knftables.Fake
}

var _ knftables.Interface = (*IndexedFake)(nil)

// NewIndexedFake is a knftables.NewFake(family, table) that takes elements
// through an index.
func NewIndexedFake(family knftables.Family, table string) *IndexedFake {
	return &IndexedFake{Fake: knftables.NewFake(family, table)}
}

// op is one operation a txn queued: its verb and object.
type op struct {
	verb string // "add", "flush" or "delete"
	obj  knftables.Object
}

// opsRunner runs a transaction given the operations queued in it, in
// order (IndexedFake, and Faults in front of one).
type opsRunner interface {
	runOps(ctx context.Context, tx *knftables.Transaction, ops []op) error
}

// run runs tx on p.nft, with its operations when p.nft can use them.
func (p *Proxier) run(ctx context.Context, tx *txn) error {
	if r, ok := p.nft.(opsRunner); ok && !tx.dropped && len(tx.ops) == tx.NumOperations() {
		return r.runOps(ctx, tx.Transaction, tx.ops)
	}
	return p.nft.Run(ctx, tx.Transaction)
}

// elementKey is an element's key as one string, for the index.
func elementKey(key []string) string { return strings.Join(key, "\x00") }

// container is what the plan knows of one set or map.
type container struct {
	exists bool
	// fresh: created or flushed earlier in the transaction (no elements
	// from before it).
	fresh bool
	// touched: an element operation reached it; a later flush or delete
	// of it would be lost by applying the elements last.
	touched bool
	// keys are the elements present at this point, once touched.
	keys map[string]bool
}

// plan follows a transaction through the table's objects (which exist, not
// what they hold) and its elements' keys, to tell whether applying the
// elements after everything else gives what the Fake gives in order.
type plan struct {
	t          *knftables.FakeTable // the table before the transaction
	tableFresh bool                 // created in the transaction
	hasTable   bool
	chains     map[string]bool // existence, where the transaction changed it
	sets, maps map[string]*container
	elements   int
}

func (pl *plan) chainExists(name string) bool {
	if e, ok := pl.chains[name]; ok {
		return e
	}
	return !pl.tableFresh && pl.t != nil && pl.t.Chains[name] != nil
}

func (pl *plan) container(isSet bool, name string) *container {
	m := pl.maps
	if isSet {
		m = pl.sets
	}
	c := m[name]
	if c == nil {
		c = &container{}
		if !pl.tableFresh && pl.t != nil {
			if isSet {
				c.exists = pl.t.Sets[name] != nil
			} else {
				c.exists = pl.t.Maps[name] != nil
			}
		}
		m[name] = c
	}
	return c
}

// keysOf starts the element keys of a container at its first element
// operation.
func (pl *plan) keysOf(isSet bool, name string, c *container) map[string]bool {
	if c.keys != nil {
		return c.keys
	}
	c.keys = map[string]bool{}
	if c.fresh || pl.tableFresh || pl.t == nil {
		return c.keys
	}
	var elems []*knftables.Element
	if isSet {
		elems = pl.t.Sets[name].Elements
	} else {
		elems = pl.t.Maps[name].Elements
	}
	for _, e := range elems {
		c.keys[elementKey(e.Key)] = true
	}
	return c.keys
}

// step follows one operation; false when the transaction must run on the
// Fake as it is.
func (pl *plan) step(o op) bool {
	switch obj := o.obj.(type) {
	case *knftables.Table:
		if obj.Family != "" || obj.Name != "" || o.verb != "add" {
			return false
		}
		if !pl.hasTable {
			pl.hasTable, pl.tableFresh = true, true
		}
	case *knftables.Chain:
		if obj.Family != "" || obj.Table != "" || !pl.hasTable {
			return false
		}
		switch o.verb {
		case "add":
			pl.chains[obj.Name] = true
		case "delete":
			pl.chains[obj.Name] = false
		}
	case *knftables.Rule:
		if obj.Family != "" || obj.Table != "" || !pl.hasTable {
			return false
		}
	case *knftables.Set, *knftables.Map:
		isSet := false
		var name string
		if s, ok := obj.(*knftables.Set); ok {
			if s.Family != "" || s.Table != "" {
				return false
			}
			isSet, name = true, s.Name
		} else {
			m := obj.(*knftables.Map)
			if m.Family != "" || m.Table != "" {
				return false
			}
			name = m.Name
		}
		if !pl.hasTable {
			return false
		}
		c := pl.container(isSet, name)
		switch o.verb {
		case "add":
			if !c.exists {
				if c.touched {
					return false
				}
				c.exists, c.fresh = true, true
			}
		case "flush":
			if c.touched || !c.exists {
				return false
			}
			c.fresh = true
		case "delete":
			if c.touched || !c.exists {
				return false
			}
			c.exists = false
		default:
			return false
		}
	case *knftables.Element:
		if obj.Family != "" || obj.Table != "" || !pl.hasTable {
			return false
		}
		isSet, name := obj.Set != "", obj.Set
		if !isSet {
			name = obj.Map
			// The Fake checks a map element's verdict chain, for adds and
			// deletes alike (checkElementRefs).
			if len(obj.Value) == 1 {
				if w := strings.Split(obj.Value[0], " "); len(w) == 2 && (w[0] == "goto" || w[0] == "jump") && !pl.chainExists(w[1]) {
					return false
				}
			}
		}
		c := pl.container(isSet, name)
		if !c.exists {
			return false
		}
		c.touched = true
		keys := pl.keysOf(isSet, name, c)
		k := elementKey(obj.Key)
		switch o.verb {
		case "add":
			keys[k] = true
		case "delete":
			if !keys[k] {
				return false
			}
			delete(keys, k)
		default:
			return false
		}
		pl.elements++
	default:
		return false
	}
	return true
}

// indexable says whether ops, run on the table as it is, may apply their
// elements last, through the index (and have elements to apply).
func (f *IndexedFake) indexable(ops []op) bool {
	f.RLock()
	t := f.Table
	f.RUnlock()
	pl := &plan{t: t, hasTable: t != nil, chains: map[string]bool{}, sets: map[string]*container{}, maps: map[string]*container{}}
	for _, o := range ops {
		if !pl.step(o) {
			return false
		}
	}
	return pl.elements > 0
}

// runOps runs tx, whose operations are ops.
func (f *IndexedFake) runOps(ctx context.Context, tx *knftables.Transaction, ops []op) error {
	if !f.indexable(ops) {
		return f.Fake.Run(ctx, tx)
	}
	// Everything but the elements, in order; an element added holds its
	// place with an `add table` (the table exists there), which changes
	// nothing but counts a handle, as the element's add does.
	rest := f.Fake.NewTransaction()
	table := &knftables.Table{}
	var elems []*knftables.Element
	var deletes []bool
	for _, o := range ops {
		if e, ok := o.obj.(*knftables.Element); ok {
			elems = append(elems, e)
			deletes = append(deletes, o.verb == "delete")
			if o.verb == "add" {
				rest.Add(table)
			}
			continue
		}
		switch o.verb {
		case "add":
			rest.Add(o.obj)
		case "flush":
			rest.Flush(o.obj)
		case "delete":
			rest.Delete(o.obj)
		}
	}
	if err := f.Fake.Run(ctx, rest); err != nil {
		return err
	}
	f.Lock()
	defer f.Unlock()
	f.LastTransaction = tx
	// The Fake's run copied every set's and map's element list: the new
	// table's lists are its own to change.
	applyElements(f.Table, elems, deletes)
	return nil
}

// applyElements adds and deletes elements in order, as the Fake does one
// at a time (an add of a present key replaces it in place, a new one goes
// last, a delete closes the gap), through an index of each list.
func applyElements(t *knftables.FakeTable, elems []*knftables.Element, deletes []bool) {
	type list struct {
		elems *[]*knftables.Element
		at    map[string]int
		gaps  bool
	}
	lists := map[string]*list{}
	for i, e := range elems {
		id := "map " + e.Map
		if e.Set != "" {
			id = "set " + e.Set
		}
		l := lists[id]
		if l == nil {
			l = &list{}
			if e.Set != "" {
				l.elems = &t.Sets[e.Set].Elements
			} else {
				l.elems = &t.Maps[e.Map].Elements
			}
			l.at = make(map[string]int, len(*l.elems))
			for j, x := range *l.elems {
				k := elementKey(x.Key)
				if _, dup := l.at[k]; !dup {
					l.at[k] = j
				}
			}
			lists[id] = l
		}
		k := elementKey(e.Key)
		j, ok := l.at[k]
		switch {
		case deletes[i]:
			(*l.elems)[j] = nil
			delete(l.at, k)
			l.gaps = true
		case ok:
			cp := *e
			(*l.elems)[j] = &cp
		default:
			cp := *e
			l.at[k] = len(*l.elems)
			*l.elems = append(*l.elems, &cp)
		}
	}
	for _, l := range lists {
		if l.gaps {
			*l.elems = deleteNils(*l.elems)
		}
	}
}

func deleteNils(es []*knftables.Element) []*knftables.Element {
	out := es[:0]
	for _, e := range es {
		if e != nil {
			out = append(out, e)
		}
	}
	clear(es[len(out):])
	return out
}
