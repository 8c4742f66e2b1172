package fakes

import (
	"context"
	"strings"

	"sigs.k8s.io/knftables"

	"github.com/proxysim/proxysim/sim"
)

// NFTables is knftables' own fake (Fake, which holds the table) with
// counters of what reached it: each transaction's operations, read from
// the nft commands the transaction renders, and each listing with what it
// returned. It counts by its own reading, not the proxier's bookkeeping,
// so that tests can hold a sync's reported work to it.
type NFTables struct {
	*knftables.Fake
	calls NFTablesCalls
}

var _ knftables.Interface = (*NFTables)(nil)

// NFTablesCalls is what reached an NFTables: every call, failed ones
// included.
type NFTablesCalls struct {
	Transactions int
	Ops          sim.NFTOps
	// ListAll calls and the names they returned; ListElements calls and
	// the elements they returned.
	Listings, ObjectsListed         int
	ElementListings, ElementsListed int
}

// NewNFTables is an empty nftables for one family's table.
func NewNFTables(family knftables.Family, table string) *NFTables {
	return &NFTables{Fake: knftables.NewFake(family, table)}
}

// Calls returns what reached the fake so far.
func (f *NFTables) Calls() NFTablesCalls { return f.calls }

var (
	nftVerbs   = map[string]sim.NFTVerb{}
	nftObjects = map[string]sim.NFTObject{}
)

func init() {
	for v := sim.NFTVerb(0); v < sim.NFTVerbs; v++ {
		nftVerbs[v.String()] = v
	}
	for o := sim.NFTObject(0); o < sim.NFTObjects; o++ {
		nftObjects[o.String()] = o
	}
}

func (f *NFTables) Run(ctx context.Context, tx *knftables.Transaction) error {
	f.calls.Transactions++
	// One nft command a line: "add rule ip kube-proxy services ...".
	for _, l := range strings.Split(tx.String(), "\n") {
		verb, rest, _ := strings.Cut(l, " ")
		typ, _, _ := strings.Cut(rest, " ")
		v, okv := nftVerbs[verb]
		o, oko := nftObjects[typ]
		if okv && oko {
			f.calls.Ops[v][o]++
		}
	}
	return f.Fake.Run(ctx, tx)
}

func (f *NFTables) ListAll(ctx context.Context) (map[string][]string, error) {
	all, err := f.Fake.ListAll(ctx)
	f.calls.Listings++
	for _, names := range all {
		f.calls.ObjectsListed += len(names)
	}
	return all, err
}

func (f *NFTables) ListElements(ctx context.Context, objectType, name string) ([]*knftables.Element, error) {
	got, err := f.Fake.ListElements(ctx, objectType, name)
	f.calls.ElementListings++
	f.calls.ElementsListed += len(got)
	return got, err
}
