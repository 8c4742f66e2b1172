package iptables_test

import (
	"strings"
	"testing"
	"time"

	discovery "k8s.io/api/discovery/v1"

	"github.com/proxysim/proxysim/fakes"
	"github.com/proxysim/proxysim/sim"
	"github.com/proxysim/proxysim/sim/iptables"
	"github.com/proxysim/proxysim/sim/runner"
)

// workWorld is 3 ClusterIP services of 2 endpoints each, programmed by the
// iptables proxier into the fake, every change synced at once.
func workWorld(t *testing.T, dp iptables.Dataplane) (*sim.World, []*discovery.EndpointSlice) {
	t.Helper()
	w := sim.New(t, sim.Config{
		Runner:     runner.Config{Generation: runner.Cooldown, MaxInterval: time.Hour},
		NewBackend: iptables.Backend(iptables.Config{}, dp),
		TraceWork:  true,
	})
	svcs, slices := fakes.Cluster(3, 2)
	fakes.Start(t, w, svcs, slices)
	return w, slices
}

// notReady makes one endpoint of a slice not ready.
func notReady(t *testing.T, w *sim.World, s *discovery.EndpointSlice, i int) {
	t.Helper()
	c := s.DeepCopy()
	ready := false
	c.Endpoints[i].Conditions.Ready = &ready
	if err := w.Update(c); err != nil {
		t.Fatal(err)
	}
}

// worked lists the syncs that reached the backend.
func worked(w *sim.World) []sim.SyncRecord {
	var out []sim.SyncRecord
	for _, r := range w.Syncs() {
		if r.Work.IPTables != nil {
			out = append(out, r)
		}
	}
	return out
}

// kubeRules counts the rules of KUBE-* chains in iptables-save text.
func kubeRules(save string) int {
	n := 0
	for _, l := range strings.Split(save, "\n") {
		if strings.HasPrefix(l, "-A KUBE-") {
			n++
		}
	}
	return n
}

// A full sync of 3 services x 2 endpoints and a partial sync after one
// endpoint went unready write exactly what kube-proxy's syncProxyRules
// writes for them, counted by hand:
//
// full sync, filter: 6 chains (SERVICES, EXTERNAL-SERVICES, FORWARD,
// NODEPORTS, PROXY-FIREWALL, and KUBE-FIREWALL for localhost node ports);
// 4 rules (the localnet guard, FORWARD's INVALID drop, mark accept,
// conntrack accept); 2 + 6 + 4 = 12 lines.
// nat: 4 fixed chains (SERVICES, NODEPORTS, POSTROUTING, MARK-MASQ) + per
// service one SVC and two SEP chains = 13; rules: POSTROUTING 3, MARK-MASQ
// 1, per service a SERVICES jump, 2 SVC rules, 2 per SEP (7), then the
// node-ports jump: 4 + 21 + 1 = 26; 2 + 13 + 26 = 41 lines. It ensures the
// 14 jumps (a chain and a rule each) and reads nat back once.
//
// partial sync: filter the same 12 lines; nat: the 4 fixed chains, the
// changed service's SVC and remaining SEP (2), and the stale SEP flushed
// before its -X (1) = 7 chains; rules: 4 fixed, 3 SERVICES jumps, the
// node-ports jump, the SVC's one rule and its SEP's 2 = 11, plus 1 -X;
// 2 + 7 + 12 = 21 lines. No ensure calls; one save.
func TestIPTablesSyncWorkByHand(t *testing.T) {
	dp := fakes.NewIPTables()
	w, slices := workWorld(t, dp)
	syncs := worked(w)
	if len(syncs) != 1 {
		t.Fatalf("%d syncs reached the backend after start, want 1", len(syncs))
	}
	full := syncs[0].Work
	if !full.Full || full.Mode() != "iptables" || full.ServicePorts != 3 || full.Endpoints != 6 {
		t.Errorf("first sync: %v, want a full iptables sync of 3 service ports and 6 endpoints", full)
	}
	f := full.IPTables
	check := func(what string, got, want sim.RestoreSection) {
		t.Helper()
		got.Bytes, want.Bytes = 0, 0 // bytes are held to the fake below
		if got != want {
			t.Errorf("%s: %+v, want %+v", what, got, want)
		}
	}
	check("full filter", f.Filter, sim.RestoreSection{Lines: 12, Chains: 6, Rules: 4})
	check("full nat", f.NAT, sim.RestoreSection{Lines: 41, Chains: 13, Rules: 26})
	if f.Restores != 1 || f.EnsureChains != 14 || f.EnsureRules != 14 || f.Saves != 1 {
		t.Errorf("full sync calls: %+v, want 1 restore, 14 chains and 14 rules ensured, 1 save", f)
	}
	afterFull := dp.Calls()

	w.Advance(time.Second)
	notReady(t, w, slices[1], 0)
	syncs = worked(w)
	if len(syncs) != 2 {
		t.Fatalf("%d syncs reached the backend, want 2", len(syncs))
	}
	part := syncs[1].Work
	// The proxy's size counts endpoints ready or not, as CostModel does.
	if part.Full || part.Endpoints != 6 {
		t.Errorf("second sync: %v, want a partial sync over 6 endpoints", part)
	}
	p := part.IPTables
	check("partial filter", p.Filter, sim.RestoreSection{Lines: 12, Chains: 6, Rules: 4})
	check("partial nat", p.NAT, sim.RestoreSection{Lines: 21, Chains: 7, Rules: 11, DeletedChains: 1})
	if p.Restores != 1 || p.EnsureChains != 0 || p.EnsureRules != 0 || p.Saves != 1 {
		t.Errorf("partial sync calls: %+v, want 1 restore and 1 save only", p)
	}
	// Its bytes and its read-back are what the fake saw in that sync.
	now := dp.Calls()
	for table, got := range map[string]sim.RestoreSection{"filter": p.Filter, "nat": p.NAT} {
		want := now.Sections[table]
		before := afterFull.Sections[table]
		want.Lines -= before.Lines
		want.Bytes -= before.Bytes
		want.Chains -= before.Chains
		want.Rules -= before.Rules
		want.DeletedChains -= before.DeletedChains
		if got != want {
			t.Errorf("partial %s: reported %+v, the fake read %+v", table, got, want)
		}
	}
	if got, want := p.SavedBytes, now.SavedBytes-afterFull.SavedBytes; got != want || got == 0 {
		t.Errorf("partial sync read %d bytes back, the fake returned %d", got, want)
	}
	// The table's size is the rules kube-proxy's chains hold in the fake
	// after each sync (the jumps from built-in chains are not its own).
	for _, c := range []struct {
		what string
		w    *sim.IPTablesWork
		want int
	}{{"full", f, 30}, {"partial", p, 27}} {
		if c.w.TableRules != c.want {
			t.Errorf("%s sync: table of %d rules, want 4 filter + %d nat", c.what, c.w.TableRules, c.want-4)
		}
	}
	if got := kubeRules(dp.SaveAll()); got != p.TableRules {
		t.Errorf("the fake holds %d rules in kube-proxy's chains, the partial sync reported %d", got, p.TableRules)
	}
	ev := w.Trace.Events()
	n := 0
	for _, e := range ev {
		if e.Kind == "run.work" {
			n++
		}
	}
	if n != len(w.Syncs()) {
		t.Errorf("%d run.work events for %d syncs", n, len(w.Syncs()))
	}
}

// Over many syncs, full and partial, failed ones included, the work the
// proxier reports adds up to what reached the fake.
func TestIPTablesSyncWorkMatchesTheFake(t *testing.T) {
	raw := fakes.NewIPTables()
	faults := iptables.WithFaults(raw)
	w, slices := workWorld(t, faults)
	for i := 0; i < 12; i++ {
		w.Advance(time.Second)
		if i%5 == 2 {
			faults.FailNext(1) // a failed restore never reaches the fake
		}
		s := slices[i%3].DeepCopy()
		ready := i%2 == 1
		s.Endpoints[i%2].Conditions.Ready = &ready
		if err := w.Update(s); err != nil {
			t.Fatal(err)
		}
	}
	w.Advance(40 * time.Second) // the retries of failed syncs
	var sum sim.IPTablesWork
	failed := 0
	fulls := 0
	sections := map[string]sim.RestoreSection{}
	for _, r := range worked(w) {
		x := r.Work.IPTables
		if r.Err != "" {
			failed++
		} else {
			sum.Restores += x.Restores
			add(sections, "filter", x.Filter)
			add(sections, "nat", x.NAT)
		}
		if r.Work.Full {
			fulls++
		}
		sum.Saves += x.Saves
		sum.SavedBytes += x.SavedBytes
		sum.SavedLines += x.SavedLines
		sum.EnsureChains += x.EnsureChains
		sum.EnsureRules += x.EnsureRules
	}
	got := raw.Calls()
	if failed == 0 || fulls < 2 {
		t.Fatalf("%d failed and %d full syncs: the test must cover both", failed, fulls)
	}
	if sum.Restores != got.Restores || sum.Saves != got.Saves || sum.SavedBytes != got.SavedBytes || sum.SavedLines != got.SavedLines ||
		sum.EnsureChains != got.EnsureChains || sum.EnsureRules != got.EnsureRules {
		t.Errorf("reported %+v, the fake counted %+v", sum, got)
	}
	for table, s := range sections {
		if got.Sections[table] != s {
			t.Errorf("%s: reported %+v, the fake read %+v", table, s, got.Sections[table])
		}
	}
}

func add(m map[string]sim.RestoreSection, table string, s sim.RestoreSection) {
	t := m[table]
	t.Lines += s.Lines
	t.Bytes += s.Bytes
	t.Chains += s.Chains
	t.Rules += s.Rules
	t.DeletedChains += s.DeletedChains
	m[table] = t
}
