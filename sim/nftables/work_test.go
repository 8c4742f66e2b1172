package nftables_test

import (
	"testing"
	"time"

	discovery "k8s.io/api/discovery/v1"
	"sigs.k8s.io/knftables"

	"github.com/proxysim/proxysim/fakes"
	"github.com/proxysim/proxysim/sim"
	"github.com/proxysim/proxysim/sim/nftables"
	"github.com/proxysim/proxysim/sim/runner"
)

// workWorld is 3 ClusterIP services of 2 endpoints each (none on this
// node), programmed by the nftables proxier into the counting fake, every
// change synced at once.
func workWorld(t *testing.T, nft knftables.Interface) (*sim.World, []*discovery.EndpointSlice) {
	t.Helper()
	w := sim.New(t, sim.Config{
		Runner:     runner.Config{Generation: runner.Cooldown, MaxInterval: time.Hour},
		NewBackend: nftables.Backend(nftables.Config{}, nft, nil),
	})
	svcs, slices := fakes.Cluster(3, 2)
	fakes.Start(t, w, svcs, slices)
	return w, slices
}

func worked(w *sim.World) []sim.SyncRecord {
	var out []sim.SyncRecord
	for _, r := range w.Syncs() {
		if r.Work.NFTables != nil {
			out = append(out, r)
		}
	}
	return out
}

// ops builds an NFTOps from "verb object" counts.
func ops(counts map[[2]string]int) sim.NFTOps {
	var o sim.NFTOps
	for k, n := range counts {
		for v := sim.NFTVerb(0); v < sim.NFTVerbs; v++ {
			for t := sim.NFTObject(0); t < sim.NFTObjects; t++ {
				if v.String() == k[0] && t.String() == k[1] {
					o[v][t] = n
				}
			}
		}
	}
	return o
}

// The full sync of 3 services x 2 endpoints and the partial sync after one
// endpoint went unready hold exactly the operations of kube-proxy's
// syncProxyRules and setupNFTables, counted by hand:
//
// full sync (the proxier's first): add table 1; the 8 base chains added
// and deleted once (the priority reset), then added and flushed; the 6
// chains jumped to (nodeport-endpoints-check, service-endpoints-check,
// firewall-check, services, masquerading, cluster-ips-check) and
// reject-chain added and flushed; rules: 11 jumps, 2 masquerading, the
// cluster-ips reject, reject-chain's reject, the two endpoints-check
// vmaps, firewall-check's vmap, services' two vmaps = 20; sets hairpin,
// cluster-ips, nodeport-ips added, nodeport-ips deleted (no
// --nodeport-addresses); 5 maps. Per service: its service- chain added and
// flushed, its numgen DNAT rule, 2 elements (cluster-ips, service-ips).
// So add chain 8+8+6+1+3 = 26, delete chain 8, flush chain 8+6+1+3 = 18,
// add rule 23, add set 3, delete set 1, add map 5, add element 6: 91
// operations, 18 chains rewritten; 7 element listings (all empty), 1 table
// listing.
//
// partial sync: the changed service's chain added and flushed and its DNAT
// rule rewritten (3 operations; its elements are unchanged), after one
// table listing of 18 chains, 2 sets and 5 maps.
func TestNFTablesSyncWorkByHand(t *testing.T) {
	nft := fakes.NewNFTables(knftables.IPv4Family, nftables.Table)
	w, slices := workWorld(t, nft)
	syncs := worked(w)
	if len(syncs) != 1 {
		t.Fatalf("%d syncs reached the backend after start, want 1", len(syncs))
	}
	full := syncs[0].Work
	if !full.Full || full.Mode() != "nftables" {
		t.Errorf("first sync: %v, want a full nftables sync", full)
	}
	want := sim.NFTablesWork{
		Transactions: 1,
		Ops: ops(map[[2]string]int{
			{"add", "table"}: 1, {"add", "chain"}: 26, {"delete", "chain"}: 8, {"flush", "chain"}: 18,
			{"add", "rule"}: 23, {"add", "set"}: 3, {"delete", "set"}: 1, {"add", "map"}: 5, {"add", "element"}: 6,
		}),
		ChainsRewritten: 18,
		Listings:        1,
		ElementListings: 7,
	}
	if *full.NFTables != want {
		t.Errorf("full sync:\n got %v\nwant %v", full.NFTables, &want)
	}
	if full.NFTables.Ops.Total() != 91 || full.NFTables.ElementsAdded() != 6 {
		t.Errorf("full sync: %d operations, %d elements added; want 91 and 6", full.NFTables.Ops.Total(), full.NFTables.ElementsAdded())
	}

	w.Advance(time.Second)
	c := slices[1].DeepCopy()
	ready := false
	c.Endpoints[0].Conditions.Ready = &ready
	if err := w.Update(c); err != nil {
		t.Fatal(err)
	}
	syncs = worked(w)
	part := syncs[len(syncs)-1].Work
	want = sim.NFTablesWork{
		Transactions:    1,
		Ops:             ops(map[[2]string]int{{"add", "chain"}: 1, {"flush", "chain"}: 1, {"add", "rule"}: 1}),
		ChainsRewritten: 1,
		Listings:        1,
		ObjectsListed:   18 + 2 + 5,
	}
	if len(syncs) != 2 || part.Full || *part.NFTables != want {
		t.Errorf("%d syncs; second:\n got %v\nwant %v", len(syncs), part, &want)
	}
}

// Over full syncs (the first, one after a restart, which reads every set
// and map back), partial ones, and a deleted service whose chain is
// flushed, then deleted in a transaction of its own a sync later, the
// reported work adds up to what reached the fake.
func TestNFTablesSyncWorkMatchesTheFake(t *testing.T) {
	nft := fakes.NewNFTables(knftables.IPv4Family, nftables.Table)
	w, slices := workWorld(t, nft)
	for i := 0; i < 6; i++ {
		w.Advance(time.Second)
		s := slices[i%3].DeepCopy()
		ready := i%2 == 1
		s.Endpoints[i%2].Conditions.Ready = &ready
		if err := w.Update(s); err != nil {
			t.Fatal(err)
		}
	}
	w.Advance(time.Second)
	if err := w.Delete("Service", "default", "svc-00002"); err != nil {
		t.Fatal(err)
	}
	w.Advance(2 * time.Second)
	s := slices[0].DeepCopy()
	s.Endpoints = s.Endpoints[:1]
	if err := w.Update(s); err != nil {
		t.Fatal(err)
	}
	w.Advance(time.Second)
	if err := w.Restart(); err != nil {
		t.Fatal(err)
	}
	var sum sim.NFTablesWork
	var fulls, stale int
	for _, r := range worked(w) {
		x := r.Work.NFTables
		if r.Err != "" {
			t.Fatalf("sync %d failed: %s", r.N, r.Err)
		}
		if r.Work.Full {
			fulls++
		}
		if x.Ops[sim.NFTFlush][sim.NFTChain] != x.ChainsRewritten+x.StaleChainsFlushed {
			t.Errorf("sync %d: %d chains flushed, but %d rewritten and %d stale", r.N, x.Ops[sim.NFTFlush][sim.NFTChain], x.ChainsRewritten, x.StaleChainsFlushed)
		}
		stale += x.StaleChainsDeleted
		sum.Transactions += x.Transactions
		for v := range x.Ops {
			for o := range x.Ops[v] {
				sum.Ops[v][o] += x.Ops[v][o]
			}
		}
		sum.Listings += x.Listings
		sum.ObjectsListed += x.ObjectsListed
		sum.ElementListings += x.ElementListings
		sum.ElementsListed += x.ElementsListed
	}
	if fulls != 2 || stale != 1 || sum.ElementsListed == 0 || sum.Ops[sim.NFTDelete][sim.NFTElement] == 0 {
		t.Fatalf("%d full syncs, %d stale chains deleted, %d elements listed, %d deleted: the test must cover 2, 1, some and some",
			fulls, stale, sum.ElementsListed, sum.Ops[sim.NFTDelete][sim.NFTElement])
	}
	got := nft.Calls()
	if sum.Transactions != got.Transactions || sum.Ops != got.Ops || sum.Listings != got.Listings || sum.ObjectsListed != got.ObjectsListed ||
		sum.ElementListings != got.ElementListings || sum.ElementsListed != got.ElementsListed {
		t.Errorf("reported\n %+v\nthe fake counted\n %+v", sum, got)
	}
}
