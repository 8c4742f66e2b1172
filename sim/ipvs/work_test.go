package ipvs_test

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"github.com/proxysim/proxysim/fakes"
	"github.com/proxysim/proxysim/sim"
	"github.com/proxysim/proxysim/sim/ipvs"
	"github.com/proxysim/proxysim/sim/runner"
	"github.com/proxysim/proxysim/sim/vclock"
)

// workWorld is 3 ClusterIP services of 2 endpoints each, programmed by the
// IPVS proxier into the fake kernel through a counter of the calls that
// reach it, every change synced at once.
func workWorld(t *testing.T) (*sim.World, []*v1.Service, []*discovery.EndpointSlice, *fakes.IPVSCalls) {
	t.Helper()
	clk := vclock.New(vclock.Epoch)
	raw, _, _, _ := fakes.Dataplane("6.1.0", clk)
	dp, calls := fakes.CountIPVS(raw)
	w := sim.New(t, sim.Config{
		Clock:      clk,
		Runner:     runner.Config{Generation: runner.Cooldown, MaxInterval: time.Hour},
		NewBackend: ipvs.Backend(ipvs.Config{}, dp),
	})
	svcs, slices := fakes.Cluster(3, 2)
	fakes.Start(t, w, svcs, slices)
	return w, svcs, slices, calls
}

func worked(w *sim.World) []sim.SyncRecord {
	var out []sim.SyncRecord
	for _, r := range w.Syncs() {
		if r.Work.IPVS != nil {
			out = append(out, r)
		}
	}
	return out
}

// The full sync of 3 services x 2 endpoints and the partial sync after one
// endpoint went unready make exactly these netlink calls, counted by hand:
//
// full: kube-ipvs0 ensured (1), the virtual servers dumped (1, empty), per
// service its virtual server added and its real servers listed (empty) and
// added (2): 3 added, 3 listings, 6 added; kube-ipvs0's addresses listed
// (1, empty) and the 3 cluster IPs bound.
//
// partial: only the changed service: its real servers listed (2), the
// unready one handed to graceful termination, which lists them again (2)
// and, with no connection on it, deletes it at once.
func TestIPVSSyncWorkByHand(t *testing.T) {
	w, _, slices, _ := workWorld(t)
	syncs := worked(w)
	if len(syncs) != 1 {
		t.Fatalf("%d syncs reached the backend after start, want 1", len(syncs))
	}
	full := syncs[0].Work
	want := sim.IPVSWork{
		DeviceEnsures: 1, VirtualServerListings: 1,
		VirtualServersAdded: 3, RealServerListings: 3, RealServersAdded: 6,
		AddressListings: 1, AddressesBound: 3,
	}
	if !full.Full || full.Mode() != "ipvs" || *full.IPVS != want {
		t.Errorf("first sync:\n got %v\nwant a full sync of %v", full, &want)
	}
	if n := full.IPVS.NetlinkCalls(); n != 1+1+3+3+6+1+3 {
		t.Errorf("full sync: %d netlink calls, want 18", n)
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
	want = sim.IPVSWork{RealServerListings: 2, RealServersListed: 4, RealServersDeleted: 1}
	if len(syncs) != 2 || part.Full || *part.IPVS != want {
		t.Errorf("%d syncs; second:\n got %v\nwant a partial sync of %v", len(syncs), part, &want)
	}
	if part.IPVS.IPSets != nil || part.IPVS.IPTables != nil {
		t.Errorf("no ipsets and iptables on this dataplane, but reported: %v", part)
	}
}

// Over full syncs (the first, and one after a restart that finds
// everything in place), partial ones, a virtual server updated (session
// affinity) and one deleted with its address, the reported work adds up to
// the calls that reached the fake kernel.
func TestIPVSSyncWorkMatchesTheFake(t *testing.T) {
	w, svcs, slices, calls := workWorld(t)
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
	sticky := svcs[0].DeepCopy()
	sticky.Spec.SessionAffinity = v1.ServiceAffinityClientIP
	if err := w.Update(sticky); err != nil {
		t.Fatal(err)
	}
	w.Advance(time.Second)
	if err := w.Delete("Service", "default", "svc-00002"); err != nil {
		t.Fatal(err)
	}
	w.Advance(time.Second)
	if err := w.Restart(); err != nil {
		t.Fatal(err)
	}
	var sum sim.IPVSWork
	fulls := 0
	for _, r := range worked(w) {
		x := r.Work.IPVS
		if r.Work.Full {
			fulls++
		}
		sum.VirtualServersAdded += x.VirtualServersAdded
		sum.VirtualServersUpdated += x.VirtualServersUpdated
		sum.VirtualServersDeleted += x.VirtualServersDeleted
		sum.RealServersAdded += x.RealServersAdded
		sum.RealServersUpdated += x.RealServersUpdated
		sum.RealServersDeleted += x.RealServersDeleted
		sum.AddressesBound += x.AddressesBound
		sum.AddressesUnbound += x.AddressesUnbound
		sum.DeviceEnsures += x.DeviceEnsures
		sum.VirtualServerListings += x.VirtualServerListings
		sum.VirtualServersListed += x.VirtualServersListed
		sum.RealServerListings += x.RealServerListings
		sum.RealServersListed += x.RealServersListed
		sum.AddressListings += x.AddressListings
		sum.AddressesListed += x.AddressesListed
	}
	if fulls != 2 || sum.VirtualServersUpdated == 0 || sum.VirtualServersDeleted == 0 || sum.AddressesUnbound == 0 {
		t.Fatalf("%d full syncs, work %v: the test must cover 2 full syncs, an update, a delete and an unbind", fulls, &sum)
	}
	got := *calls // no IPVS timeouts configured: no startup call reached it
	want := fakes.IPVSCalls{
		VirtualServersAdded: sum.VirtualServersAdded, VirtualServersUpdated: sum.VirtualServersUpdated, VirtualServersDeleted: sum.VirtualServersDeleted,
		RealServersAdded: sum.RealServersAdded, RealServersUpdated: sum.RealServersUpdated, RealServersDeleted: sum.RealServersDeleted,
		AddressesBound: sum.AddressesBound, AddressesUnbound: sum.AddressesUnbound, DeviceEnsures: sum.DeviceEnsures,
		VirtualServerListings: sum.VirtualServerListings, VirtualServersListed: sum.VirtualServersListed,
		RealServerListings: sum.RealServerListings, RealServersListed: sum.RealServersListed,
		AddressListings: sum.AddressListings, AddressesListed: sum.AddressesListed,
	}
	if got != want {
		t.Errorf("reported\n %+v\nthe fake counted\n %+v", want, got)
	}
}
