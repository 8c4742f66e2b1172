package costprofile

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/proxysim/proxysim/sim"
)

func handProfile(t *testing.T) *Profile {
	t.Helper()
	data, err := os.ReadFile("../../scenarios/testdata/features/profiles/hand.json")
	if err != nil {
		t.Fatal(err)
	}
	p, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func iptWork(full bool, saved, natLines int) sim.SyncWork {
	return sim.SyncWork{ServicePorts: 1, Endpoints: 3, Full: full, IPTables: &sim.IPTablesWork{
		Restores: 1, NAT: sim.RestoreSection{Lines: natLines}, Saves: 1, SavedLines: saved,
	}}
}

func TestKindOf(t *testing.T) {
	for _, c := range []struct {
		w    sim.SyncWork
		want Kind
	}{
		{iptWork(false, 100, 100), Partial},
		{iptWork(true, 10, 100), FullNew},
		{iptWork(true, 90, 100), FullRestart},
		{sim.SyncWork{Full: true, IPTables: &sim.IPTablesWork{NAT: sim.RestoreSection{Lines: 100}}}, FullRestart},
		{sim.SyncWork{Full: true, NFTables: &sim.NFTablesWork{ObjectsListed: 20, ChainsRewritten: 400}}, FullNew},
		{sim.SyncWork{Full: true, NFTables: &sim.NFTablesWork{ObjectsListed: 900, ChainsRewritten: 400}}, FullRestart},
	} {
		if got := KindOf(c.w); got != c.want {
			t.Errorf("KindOf(%v) = %s, want %s", c.w, got, c.want)
		}
	}
}

// The hand profile's partial nft sync: 200ms restore + 50ms listing + 10ms
// per service port or endpoint of compute; its full sync into an empty
// table 100ms + 50ms, no compute term for full syncs.
func TestSyncCostAddsTheTerms(t *testing.T) {
	p := handProfile(t)
	nft, err := p.Mode(IPTablesNFT)
	if err != nil {
		t.Fatal(err)
	}
	if got := nft.SyncCost(iptWork(false, 50, 50)); got != 290*time.Millisecond {
		t.Errorf("partial: %v, want 290ms", got)
	}
	if got := nft.SyncCost(iptWork(true, 5, 50)); got != 150*time.Millisecond {
		t.Errorf("full into an empty table: %v, want 150ms", got)
	}
	// No restart term: the new node's stands in.
	if got := nft.SyncCost(iptWork(true, 50, 50)); got != 150*time.Millisecond {
		t.Errorf("restart: %v, want 150ms", got)
	}
	// Another mode's work costs nothing here.
	if got := nft.SyncCost(sim.SyncWork{NFTables: &sim.NFTablesWork{}}); got != 0 {
		t.Errorf("nftables work on the iptables part: %v", got)
	}
	if _, err := p.Mode(NFTables); err == nil || !strings.Contains(err.Error(), "has no nftables part") {
		t.Errorf("missing part: %v", err)
	}
}

func TestParseNamesTheField(t *testing.T) {
	good, err := os.ReadFile("../../scenarios/testdata/features/profiles/hand.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ from, to, want string }{
		{`"measure": "size"`, `"measure": "sizes"`, `modes[0].compute[0].measure: unknown "sizes"`},
		{`"kind": "listing"`, `"kind": "partial"`, `modes[0].kernel[2].kind: partial twice`},
		{`"dataplane": "iptables-legacy"`, `"dataplane": "ebpf"`, `modes[1].dataplane: unknown "ebpf"`},
		{`"params": [0.7, 0]`, `"params": [0.7]`, `modes[1].kernel[0].curve: form linear takes 2 params`},
		{`"computeSource"`, `"computeSauce"`, `unknown field "computeSauce"`},
	} {
		bad := strings.Replace(string(good), c.from, c.to, 1)
		if bad == string(good) {
			t.Fatalf("%q not in the hand profile", c.from)
		}
		_, err := Parse([]byte(bad))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s -> %s: %v, want %q", c.from, c.to, err, c.want)
		}
	}
}

// A term's Plus weighs other measures into its size, and a profile
// refuses an addend it cannot read or a weight below 0.
func TestTermPlusWeighsAddends(t *testing.T) {
	tm := &Term{Kind: Full, Measure: "servicePorts", Plus: []Addend{{Measure: "endpoints", Weight: 0.25}},
		Curve: Curve{Form: Linear, Params: []float64{0.5, 2}}}
	w := sim.SyncWork{Full: true, ServicePorts: 10, Endpoints: 40}
	if got := tm.Size(w); got != 20 {
		t.Errorf("size %v, want 10 + 0.25·40 = 20", got)
	}
	if got := tm.at(w); got != 40.5 {
		t.Errorf("at %v, want 0.5 + 2·20 = 40.5", got)
	}
	m := &ModeProfile{Dataplane: NFTables, Compute: []Term{*tm}}
	if got := m.ComputeSeconds(w); got != 40.5 {
		t.Errorf("compute %v, want 40.5", got)
	}
	for _, c := range []struct {
		a    Addend
		want string
	}{
		{Addend{Measure: "pods", Weight: 1}, `compute[0].plus[0].measure: unknown "pods"`},
		{Addend{Measure: "endpoints", Weight: -1}, `compute[0].plus[0].weight: -1 is not a finite weight`},
	} {
		bad := *tm
		bad.Plus = []Addend{c.a}
		p := &Profile{Name: "x", Modes: []ModeProfile{{Dataplane: NFTables, Compute: []Term{bad}}}}
		if err := p.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.a, err, c.want)
		}
	}
}

func TestMarshalRoundTrips(t *testing.T) {
	p := handProfile(t)
	b, err := p.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	q, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := q.Marshal()
	if string(b) != string(b2) {
		t.Errorf("not stable:\n%s\n%s", b, b2)
	}
}

// The built-in default profile loads, says what it was measured on, and
// has the four kernel terms of each dataplane calibrate measures, each
// with its points.
func TestDefaultProfile(t *testing.T) {
	p, err := Named("default")
	if err != nil {
		t.Fatal(err)
	}
	m := p.Machine
	if m.CPU == "" || m.Cores == 0 || m.Kernel == "" || m.IPTables == "" || m.NFT == "" || m.Go == "" || m.Date == "" || m.Emulated {
		t.Errorf("machine: %+v", m)
	}
	for _, d := range []string{IPTablesNFT, IPTablesLegacy, NFTables} {
		mp, err := p.Mode(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []Kind{FullNew, FullRestart, Partial, Listing} {
			if tm := term(mp.Kernel, k); tm == nil || len(tm.Points) < 4 {
				t.Errorf("%s %s: no term or too few points", d, k)
			}
		}
		if len(mp.HeldOut) == 0 {
			t.Errorf("%s: no held-out errors", d)
		}
		// kube-proxy's own compute (make calibrate-compute), fitted
		// within the ±25 % the kernel part is held to.
		for _, k := range []Kind{Full, Partial} {
			tm := term(mp.Compute, k)
			if tm == nil || len(tm.Points) < 4 {
				t.Errorf("%s compute %s: no term or too few points", d, k)
				continue
			}
			if tm.Curve.HeldOutError > 0.25 {
				t.Errorf("%s compute %s: held-out error %.1f %% over 25 %%", d, k, 100*tm.Curve.HeldOutError)
			}
		}
		if !strings.Contains(mp.ComputeSource, "kube-proxy v1.36.3") {
			t.Errorf("%s: computeSource %q does not say whose code was timed", d, mp.ComputeSource)
		}
	}
	if _, err := Named("nosuch"); err == nil || !strings.Contains(err.Error(), "built in: default") {
		t.Errorf("unknown name: %v", err)
	}
}

// Parts splits the hand profile's partial sync into its three terms, and
// the default profile's parts add up to SyncCost to the nanosecond.
func TestPartsAddUpToSyncCost(t *testing.T) {
	nft, err := handProfile(t).Mode(IPTablesNFT)
	if err != nil {
		t.Fatal(err)
	}
	got := nft.Parts(iptWork(false, 50, 50))
	want := Parts{Kind: Partial, Write: 200 * time.Millisecond, Listing: 50 * time.Millisecond, Compute: 40 * time.Millisecond}
	if got != want {
		t.Errorf("partial: %+v, want %+v", got, want)
	}
	if got := nft.Parts(sim.SyncWork{NFTables: &sim.NFTablesWork{}}); got.Total() != 0 {
		t.Errorf("nftables work on the iptables part: %+v", got)
	}
	def, err := Named("default")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range def.Modes {
		for _, w := range []sim.SyncWork{iptWork(false, 1234, 777), iptWork(true, 3, 5001),
			{ServicePorts: 33, Endpoints: 101, NFTables: &sim.NFTablesWork{Listings: 1, ObjectsListed: 77, Ops: nftAdds(13)}},
			{ServicePorts: 33, Endpoints: 101, Full: true, IPVS: &sim.IPVSWork{}}} {
			p := m.Parts(w)
			if p.Total() != m.SyncCost(w) {
				t.Errorf("%s: parts %+v add up to %v, SyncCost %v", m.Dataplane, p, p.Total(), m.SyncCost(w))
			}
			if m.reports(w) && (p.Write < 0 || p.Listing < 0 || p.Compute < 0) {
				t.Errorf("%s: a negative part: %+v", m.Dataplane, p)
			}
		}
	}
}

func nftAdds(n int) sim.NFTOps {
	var o sim.NFTOps
	o[sim.NFTAdd][sim.NFTElement] = n
	return o
}
