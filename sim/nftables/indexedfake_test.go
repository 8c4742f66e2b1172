package nftables

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/knftables"

	"github.com/proxysim/proxysim/sim"
	"github.com/proxysim/proxysim/sim/proxy"
)

// handles lists every handle a Fake gave: the table's, each chain's and
// its rules', each set's and map's (Dump leaves them out).
func handles(f *knftables.Fake) string {
	t := f.Table
	if t == nil {
		return "no table"
	}
	h := func(p *int) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprint(*p)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "table %s\n", h(t.Handle))
	for _, n := range slices.Sorted(maps.Keys(t.Chains)) {
		fmt.Fprintf(&b, "chain %s %s:", n, h(t.Chains[n].Handle))
		for _, r := range t.Chains[n].Rules {
			fmt.Fprintf(&b, " %s", h(r.Handle))
		}
		b.WriteString("\n")
	}
	for _, n := range slices.Sorted(maps.Keys(t.Sets)) {
		fmt.Fprintf(&b, "set %s %s\n", n, h(t.Sets[n].Handle))
	}
	for _, n := range slices.Sorted(maps.Keys(t.Maps)) {
		fmt.Fprintf(&b, "map %s %s\n", n, h(t.Maps[n].Handle))
	}
	return b.String()
}

// randomOp is one operation over a small table, so that operations meet:
// two chains, two sets, two maps, a few keys; now and then one the Fake
// refuses (a missing element, set or chain, a rule handle that is not
// there, an invalid object) or one that makes IndexedFake run the
// transaction as it is (a table flushed or deleted, a set flushed after
// its elements).
func randomOp(r *rand.Rand) (string, knftables.Object) {
	chains := []string{"c1", "c2", "c3"}
	sets := []string{"s1", "s2"}
	maps := []string{"m1", "m2"}
	keys := []string{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5"}
	pick := func(l []string) string { return l[r.IntN(len(l))] }
	verbs := []string{"add", "add", "add", "delete"}
	switch n := r.IntN(100); {
	case n < 2:
		return pick([]string{"add", "flush", "delete"}), &knftables.Table{}
	case n < 12:
		return pick([]string{"add", "add", "flush", "delete"}), &knftables.Chain{Name: pick(chains)}
	case n < 20:
		rule := &knftables.Rule{Chain: pick(chains), Rule: "ip daddr @" + pick(sets) + " drop"}
		if r.IntN(4) == 0 {
			rule.Rule = "jump " + pick(chains)
		}
		if r.IntN(5) == 0 {
			return "delete", &knftables.Rule{Chain: rule.Chain, Handle: knftables.PtrTo(r.IntN(40))}
		}
		return "add", rule
	case n < 26:
		return pick([]string{"add", "add", "flush", "delete"}), &knftables.Set{Name: pick(sets), Type: "ipv4_addr"}
	case n < 32:
		return pick([]string{"add", "add", "flush", "delete"}), &knftables.Map{Name: pick(maps), Type: "ipv4_addr : verdict"}
	case n < 66:
		return pick(verbs), &knftables.Element{Set: pick(sets), Key: []string{pick(keys)}, Comment: knftables.PtrTo(fmt.Sprint(r.IntN(3)))}
	case n < 99:
		v := pick([]string{"goto ", "jump "}) + pick(chains)
		if r.IntN(5) == 0 {
			v = "drop"
		}
		return pick(verbs), &knftables.Element{Map: pick(maps), Key: []string{pick(keys)}, Value: []string{v}}
	default:
		return "add", &knftables.Element{Key: []string{pick(keys)}} // neither set nor map: refused when queued
	}
}

// tidyOps are operations like a proxier's: the containers and chains
// added first, a container perhaps flushed before its elements, elements
// added (new or replacing) and deleted once present, and rules.
func tidyOps(r *rand.Rand, n int) ([]string, []knftables.Object) {
	verbs := []string{"add", "add", "add", "add", "add"}
	objs := []knftables.Object{&knftables.Chain{Name: "c1"}, &knftables.Chain{Name: "c2"},
		&knftables.Set{Name: "s1", Type: "ipv4_addr"}, &knftables.Set{Name: "s2", Type: "ipv4_addr"},
		&knftables.Map{Name: "m1", Type: "ipv4_addr : verdict"}}
	if r.IntN(3) == 0 {
		verbs, objs = append(verbs, "flush"), append(objs, &knftables.Set{Name: "s2"})
	}
	present := map[string][]string{}
	for range n {
		k := fmt.Sprintf("10.0.%d.%d", r.IntN(2), r.IntN(8))
		switch c := r.IntN(10); {
		case c == 0:
			verbs, objs = append(verbs, "add"), append(objs, &knftables.Rule{Chain: "c1", Rule: "ip daddr @s1 jump c2"})
		case c < 4 && len(present["s"]) > 0:
			i := r.IntN(len(present["s"]))
			set, key, _ := strings.Cut(present["s"][i], " ")
			present["s"] = slices.Delete(present["s"], i, i+1)
			verbs, objs = append(verbs, "delete"), append(objs, &knftables.Element{Set: set, Key: []string{key}})
		case c < 7:
			set := []string{"s1", "s2"}[r.IntN(2)]
			if !slices.Contains(present["s"], set+" "+k) {
				present["s"] = append(present["s"], set+" "+k)
			}
			verbs, objs = append(verbs, "add"), append(objs, &knftables.Element{Set: set, Key: []string{k}, Comment: knftables.PtrTo(fmt.Sprint(r.IntN(2)))})
		default:
			verbs, objs = append(verbs, "add"), append(objs, &knftables.Element{Map: "m1", Key: []string{k}, Value: []string{"goto c" + fmt.Sprint(1+r.IntN(2))}})
		}
	}
	return verbs, objs
}

func queue(tx *txn, verb string, obj knftables.Object) {
	switch verb {
	case "add":
		tx.Add(obj)
	case "flush":
		tx.Flush(obj)
	case "delete":
		tx.Delete(obj)
	}
}

// IndexedFake ends every transaction where knftables.Fake does: the same
// error, the same dump (elements in the same order) and the same handles,
// over random transactions that add, replace and delete elements among
// sets, maps and chains coming and going.
func TestIndexedFakeIsTheFake(t *testing.T) {
	ctx := context.Background()
	fast, slow, ran := 0, 0, 0
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 7))
		plain := knftables.NewFake(knftables.IPv4Family, Table)
		indexed := NewIndexedFake(knftables.IPv4Family, Table)
		for step := range 12 {
			n := 1 + r.IntN(30)
			var verbs []string
			var objs []knftables.Object
			if step == 0 || r.IntN(6) == 0 {
				verbs, objs = append(verbs, "add"), append(objs, &knftables.Table{})
			}
			if r.IntN(2) == 0 {
				vs, os := tidyOps(r, n)
				verbs, objs = append(verbs, vs...), append(objs, os...)
			}
			for range n / 8 {
				v, o := randomOp(r)
				verbs, objs = append(verbs, v), append(objs, o)
			}
			a := &txn{Transaction: plain.NewTransaction(), work: &sim.NFTablesWork{}}
			b := &txn{Transaction: indexed.NewTransaction(), work: &sim.NFTablesWork{}}
			for i := range verbs {
				queue(a, verbs[i], objs[i])
				queue(b, verbs[i], objs[i])
			}
			errA := plain.Run(ctx, a.Transaction)
			indexable := !b.dropped && indexed.indexable(b.ops)
			var errB error
			if !b.dropped && len(b.ops) == b.NumOperations() {
				errB = indexed.runOps(ctx, b.Transaction, b.ops)
			} else {
				errB = indexed.Run(ctx, b.Transaction)
			}
			if indexable {
				fast++
			} else {
				slow++
			}
			ran++
			if fmt.Sprint(errA) != fmt.Sprint(errB) {
				t.Fatalf("seed %d step %d: the Fake says %v, IndexedFake %v\n%s", seed, step, errA, errB, a.String())
			}
			if da, db := plain.Dump(), indexed.Dump(); da != db {
				t.Fatalf("seed %d step %d (error %v): dumps differ\nFake:\n%s\nIndexedFake:\n%s\ntransaction:\n%s", seed, step, errA, da, db, a.String())
			}
			if ha, hb := handles(plain), handles(indexed.Fake); ha != hb {
				t.Fatalf("seed %d step %d: handles differ\nFake:\n%s\nIndexedFake:\n%s", seed, step, ha, hb)
			}
			if errB == nil && indexed.LastTransaction != b.Transaction {
				t.Fatalf("seed %d step %d: LastTransaction is not the transaction run", seed, step)
			}
		}
	}
	// Both ways were taken, many times: the comparison covers the index.
	if fast < 800 || slow < 800 {
		t.Fatalf("of %d transactions, %d changed elements through the index and %d on the Fake as it is", ran, fast, slow)
	}
}

// A proxier over an IndexedFake writes, sync after sync (full and partial,
// services and endpoints changing, a transaction failing), the table it
// writes over knftables.Fake, and counts the same work.
func TestProxierOnIndexedFake(t *testing.T) {
	st := bigState(60)
	plain := knftables.NewFake(knftables.IPv4Family, Table)
	indexed := NewIndexedFake(knftables.IPv4Family, Table)
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	pa := New(testConfig, WithFaults(plain), clk, nil)
	fb := WithFaults(indexed)
	pb := New(testConfig, fb, clk, nil)
	gone := slices.SortedFunc(maps.Keys(st.Services), func(a, b proxy.ServicePortName) int { return strings.Compare(a.String(), b.String()) })[7]
	goneSvc := st.Services[gone]
	for i := range 8 {
		// Churn: endpoints come and go, a service goes and comes back.
		for spn, eps := range st.Endpoints {
			if len(eps) > 0 && (int(spn.Name[len(spn.Name)-1])+i)%3 == 0 {
				eps[i%len(eps)].Ready = !eps[i%len(eps)].Ready
			}
		}
		switch i {
		case 3:
			delete(st.Services, gone)
		case 4:
			st.Services[gone] = goneSvc
		}
		if i == 5 {
			fb.FailNext(1)
			pa.nft.(*Faults).FailNext(1)
		}
		clk.Step(time.Hour)
		errA, errB := pa.Sync(st), pb.Sync(st)
		if fmt.Sprint(errA) != fmt.Sprint(errB) {
			t.Fatalf("sync %d: %v over the Fake, %v over IndexedFake", i, errA, errB)
		}
		if da, db := plain.Dump(), indexed.Dump(); da != db {
			t.Fatalf("sync %d: the tables differ", i)
		}
		if ha, hb := handles(plain), handles(indexed.Fake); ha != hb {
			t.Fatalf("sync %d: handles differ", i)
		}
		wa, _ := pa.TakeSyncWork()
		wb, _ := pb.TakeSyncWork()
		if fmt.Sprint(*wa.NFTables) != fmt.Sprint(*wb.NFTables) {
			t.Fatalf("sync %d: work %+v over the Fake, %+v over IndexedFake", i, *wa.NFTables, *wb.NFTables)
		}
	}
	if n := len(indexed.Table.Maps[MapServiceIPs].Elements); n < 60 {
		t.Fatalf("%d service IPs", n)
	}
}
