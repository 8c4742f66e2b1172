package nftables

import (
	"sigs.k8s.io/knftables"

	"github.com/proxysim/proxysim/sim"
)

// txn is a transaction that counts what it queues into the sync's work,
// by verb and object type, as the proxier builds it: the cheap way to know
// what a transaction holds (knftables keeps its operations to itself, and
// rendering it to count would cost as much as the sync).
type txn struct {
	*knftables.Transaction
	work *sim.NFTablesWork
	// ops are the operations queued, in order, for a dataplane that can
	// use them (IndexedFake); dropped: knftables refused one (the run then
	// fails with its error).
	ops     []op
	dropped bool
}

func (p *Proxier) newTxn() *txn {
	p.work.Transactions++
	return &txn{Transaction: p.nft.NewTransaction(), work: p.work}
}

// count queues an operation through do and counts it if knftables took it
// (it drops every operation after an invalid one, and the run then fails).
func (t *txn) count(v sim.NFTVerb, verb string, obj knftables.Object, do func(knftables.Object)) {
	n := t.NumOperations()
	do(obj)
	if t.NumOperations() > n {
		t.work.Ops[v][objectType(obj)]++
		t.ops = append(t.ops, op{verb, obj})
	} else {
		t.dropped = true
	}
}

func (t *txn) Add(obj knftables.Object)   { t.count(sim.NFTAdd, "add", obj, t.Transaction.Add) }
func (t *txn) Flush(obj knftables.Object) { t.count(sim.NFTFlush, "flush", obj, t.Transaction.Flush) }
func (t *txn) Delete(obj knftables.Object) {
	t.count(sim.NFTDelete, "delete", obj, t.Transaction.Delete)
}

func objectType(obj knftables.Object) sim.NFTObject {
	switch obj.(type) {
	case *knftables.Table:
		return sim.NFTTable
	case *knftables.Chain:
		return sim.NFTChain
	case *knftables.Rule:
		return sim.NFTRule
	case *knftables.Set:
		return sim.NFTSet
	case *knftables.Map:
		return sim.NFTMap
	default:
		return sim.NFTElement
	}
}

// TakeSyncWork returns what the last sync wrote and read (sim.WorkReporter),
// once.
func (p *Proxier) TakeSyncWork() (sim.SyncWork, bool) {
	if p.work == nil {
		return sim.SyncWork{}, false
	}
	w := sim.SyncWork{Full: p.workFull, NFTables: p.work}
	p.work = nil
	return w, true
}

var _ sim.WorkReporter = (*Proxier)(nil)
