package costprofile

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/proxysim/proxysim/sim"
)

// Profile is a machine's measured cost of syncs: for each dataplane, curves
// that turn a sync's work (sim.SyncWork) into seconds of kernel time (the
// restore, the nft transaction, the listings) and of the proxy's own
// compute. It is a data file (JSON) that `proxysim calibrate` writes; see
// docs/cost-profiles.md.
type Profile struct {
	// Name is what `syncCost: {profile: NAME}` calls it.
	Name    string  `json:"name"`
	Machine Machine `json:"machine"`
	// Modes holds one entry per dataplane measured, by Dataplane name.
	Modes []ModeProfile `json:"modes"`
}

// Machine is what a profile was measured on: a profile says nothing about
// another CPU, kernel or tool version.
type Machine struct {
	Host     string `json:"host,omitempty"`
	CPU      string `json:"cpu"`
	Cores    int    `json:"cores"`
	Kernel   string `json:"kernel"`
	IPTables string `json:"iptables,omitempty"`
	NFT      string `json:"nft,omitempty"`
	Go       string `json:"go"`
	Date     string `json:"date"`
	// Load is the host's load average when the measuring started: a busy
	// host makes every point slower.
	Load string `json:"load,omitempty"`
	// Emulated says the kernel side was not a kernel (an emulator's
	// timing); such a profile predicts nothing about a real node.
	Emulated bool   `json:"emulated,omitempty"`
	Notes    string `json:"notes,omitempty"`
}

// The dataplanes a profile can hold: iptables through each of its two
// backends, and nftables.
const (
	IPTablesNFT    = "iptables-nft"
	IPTablesLegacy = "iptables-legacy"
	NFTables       = "nftables"
	IPVS           = "ipvs"
)

// Dataplanes are the dataplane names a ModeProfile may carry.
var Dataplanes = []string{IPTablesNFT, IPTablesLegacy, NFTables, IPVS}

// ModeProfile is one dataplane's curves.
type ModeProfile struct {
	Dataplane string `json:"dataplane"`
	// Kernel is the kernel side: a term per sync kind for the writes (kinds
	// FullNew, FullRestart, Partial) and one for the listing (Listing).
	Kernel []Term `json:"kernel"`
	// Compute is the proxy's own CPU to compute a sync (kinds Full and
	// Partial); empty when not measured, then it counts as nothing.
	Compute []Term `json:"compute,omitempty"`
	// ComputeSource says whose code the compute part timed.
	ComputeSource string `json:"computeSource,omitempty"`
	// HeldOut is, per measured sync kind, the median relative error of
	// this profile's curves fitted on half the cluster sizes in predicting
	// the other half (see calibrate).
	HeldOut map[string]float64 `json:"heldOut,omitempty"`
}

// Kind is a sync kind, as a profile's terms are keyed.
type Kind string

const (
	// FullNew is a full sync into an empty table: a new node.
	FullNew Kind = "full-new"
	// FullRestart is a full sync over a table already there: a restart.
	FullRestart Kind = "full-restart"
	// Partial is a partial sync (after a Service or an endpoint changed).
	Partial Kind = "partial"
	// Listing is one listing call of the sync (iptables-save -t nat, nft
	// list table, nft list set), whatever the sync's kind, over its share
	// of what the sync's listings returned.
	Listing Kind = "listing"
	// Full is any full sync, for the compute part.
	Full Kind = "full"
)

// Term is one curve of a profile: the seconds a sync kind takes, as a
// function of one measure of its work.
type Term struct {
	Kind    Kind    `json:"kind"`
	Measure Measure `json:"measure"`
	// Plus weighs other measures into the size, in Measure's units: a
	// proxy's compute walks every Service port and every endpoint, at a
	// different cost each, so its size is servicePorts plus a fitted
	// fraction of endpoints.
	Plus  []Addend `json:"plus,omitempty"`
	Curve Curve    `json:"curve"`
	// Points are the measured sizes (in Measure's unit, with Plus) and
	// timings the curve was fitted on.
	Points []Point `json:"points,omitempty"`
}

// Addend is a measure weighed into a term's size.
type Addend struct {
	Measure Measure `json:"measure"`
	Weight  float64 `json:"weight"`
}

// Size is a term's size of a sync's work: its measure, plus its addends.
func (t *Term) Size(w sim.SyncWork) float64 {
	x := Measures[t.Measure](w)
	for _, a := range t.Plus {
		x += a.Weight * Measures[a.Measure](w)
	}
	return x
}

// Measure names a size of a sync's work (see Measures).
type Measure string

// Measures are the sizes a term can follow, each read off a sync's work.
// A measure a dataplane's work does not have reads 0.
var Measures = map[Measure]func(sim.SyncWork) float64{
	// The proxy's size: service ports and endpoints.
	"servicePorts": func(w sim.SyncWork) float64 { return float64(w.ServicePorts) },
	"endpoints":    func(w sim.SyncWork) float64 { return float64(w.Endpoints) },
	"size":         func(w sim.SyncWork) float64 { return float64(w.ServicePorts + w.Endpoints) },
	// iptables: the restore payload, and what iptables-save returned.
	"restoreLines": func(w sim.SyncWork) float64 {
		if w.IPTables == nil {
			return 0
		}
		return float64(w.IPTables.Total().Lines)
	},
	"restoreRules": func(w sim.SyncWork) float64 {
		if w.IPTables == nil {
			return 0
		}
		return float64(w.IPTables.Total().Rules)
	},
	"tableRules": func(w sim.SyncWork) float64 {
		if w.IPTables == nil {
			return 0
		}
		return float64(w.IPTables.TableRules)
	},
	"savedLines": func(w sim.SyncWork) float64 {
		if w.IPTables == nil {
			return 0
		}
		return float64(w.IPTables.SavedLines)
	},
	// nftables: the transactions' operations, what the listings returned.
	"ops": func(w sim.SyncWork) float64 {
		if w.NFTables == nil {
			return 0
		}
		return float64(w.NFTables.Ops.Total())
	},
	"opsPlusTable": func(w sim.SyncWork) float64 {
		if w.NFTables == nil {
			return 0
		}
		return float64(w.NFTables.Ops.Total() + w.NFTables.ObjectsListed)
	},
	"objectsListed": func(w sim.SyncWork) float64 {
		if w.NFTables == nil {
			return 0
		}
		return float64(w.NFTables.ObjectsListed + w.NFTables.ElementsListed)
	},
	// IPVS: every netlink call.
	"netlinkCalls": func(w sim.SyncWork) float64 {
		if w.IPVS == nil {
			return 0
		}
		return float64(w.IPVS.NetlinkCalls())
	},
}

// MeasureNames lists Measures sorted, for messages.
func MeasureNames() []string {
	out := make([]string, 0, len(Measures))
	for m := range Measures {
		out = append(out, string(m))
	}
	slices.Sort(out)
	return out
}

// KindOf is the kernel kind of a sync from its work: full syncs are a new
// node's when what the sync read back before writing was less than half of
// what it wrote (an empty table holds only the base chains), a restart's
// otherwise; a full sync that read nothing back is taken for a restart.
func KindOf(w sim.SyncWork) Kind {
	if !w.Full {
		return Partial
	}
	switch {
	case w.IPTables != nil:
		if w.IPTables.Saves == 0 {
			return FullRestart
		}
		if 2*w.IPTables.SavedLines < w.IPTables.NAT.Lines {
			return FullNew
		}
	case w.NFTables != nil:
		if 2*w.NFTables.ObjectsListed < w.NFTables.ChainsRewritten {
			return FullNew
		}
	}
	return FullRestart
}

// Listings is how many listing calls the sync made: iptables-save runs;
// nft's whole-table listing and, on a full sync, each set's and map's.
func Listings(w sim.SyncWork) int {
	switch {
	case w.IPTables != nil:
		return w.IPTables.Saves
	case w.NFTables != nil:
		return w.NFTables.Listings + w.NFTables.ElementListings
	}
	return 0
}

// Mode is a profile's part for one dataplane, ready to evaluate.
func (p *Profile) Mode(dataplane string) (*ModeProfile, error) {
	for i := range p.Modes {
		if p.Modes[i].Dataplane == dataplane {
			return &p.Modes[i], nil
		}
	}
	var have []string
	for _, m := range p.Modes {
		have = append(have, m.Dataplane)
	}
	return nil, fmt.Errorf("profile %q has no %s part (it has %s)", p.Name, dataplane, strings.Join(have, ", "))
}

// term finds the term of a kind, nil when there is none.
func term(ts []Term, k Kind) *Term {
	for i := range ts {
		if ts[i].Kind == k {
			return &ts[i]
		}
	}
	return nil
}

// at evaluates a term on a sync's work, 0 for a missing term.
func (t *Term) at(w sim.SyncWork) float64 {
	if t == nil {
		return 0
	}
	return t.Curve.At(t.Size(w))
}

// KernelSeconds is the kernel side of a sync: the writes of its kind (a
// new node's or a restart's full sync falling back on the other when only
// one was measured) plus each listing.
func (m *ModeProfile) KernelSeconds(w sim.SyncWork) float64 {
	k := KindOf(w)
	t := term(m.Kernel, k)
	if t == nil && k == FullNew {
		t = term(m.Kernel, FullRestart)
	} else if t == nil && k == FullRestart {
		t = term(m.Kernel, FullNew)
	}
	return t.at(w) + m.listingSeconds(w)
}

// listingSeconds is the kernel time of a sync's listing calls.
func (m *ModeProfile) listingSeconds(w sim.SyncWork) float64 {
	n := Listings(w)
	l := term(m.Kernel, Listing)
	if n == 0 || l == nil {
		return 0
	}
	// The listing term is one call's: its measure shared out among the
	// calls (each call's start-up once, each object once).
	return float64(n) * l.Curve.At(Measures[l.Measure](w)/float64(n))
}

// ComputeSeconds is the proxy's own compute of a sync.
func (m *ModeProfile) ComputeSeconds(w sim.SyncWork) float64 {
	k := Partial
	if w.Full {
		k = Full
	}
	return term(m.Compute, k).at(w)
}

// SyncCost is the whole modelled time of a sync: kernel and compute,
// rounded to the nanosecond. Work another dataplane reported costs
// nothing here (the world reports only its own mode's work).
func (m *ModeProfile) SyncCost(w sim.SyncWork) time.Duration {
	if !m.reports(w) {
		return 0
	}
	return time.Duration(math.Round((m.KernelSeconds(w) + m.ComputeSeconds(w)) * 1e9))
}

// Parts is one sync's modelled time as a profile splits it: the kernel's
// writes (of the sync's Kind), its listings, and the proxy's compute.
type Parts struct {
	Kind                    Kind
	Write, Listing, Compute time.Duration
}

// Total is the sync's whole modelled time: SyncCost.
func (p Parts) Total() time.Duration { return p.Write + p.Listing + p.Compute }

// Parts splits SyncCost(w) into its parts; they add up to it exactly (the
// writes take the nanosecond of rounding). Work another dataplane reported
// has no parts.
func (m *ModeProfile) Parts(w sim.SyncWork) Parts {
	p := Parts{Kind: KindOf(w)}
	if !m.reports(w) {
		return p
	}
	p.Listing = time.Duration(math.Round(m.listingSeconds(w) * 1e9))
	p.Compute = time.Duration(math.Round(m.ComputeSeconds(w) * 1e9))
	p.Write = m.SyncCost(w) - p.Listing - p.Compute
	return p
}

// SplitCost is Parts for the world's sync records (sim.CostSplitter).
func (m *ModeProfile) SplitCost(w sim.SyncWork) sim.CostSplit {
	p := m.Parts(w)
	return sim.CostSplit{By: m.String(), Kind: string(p.Kind), Write: p.Write, Listing: p.Listing, Compute: p.Compute}
}

func (m *ModeProfile) reports(w sim.SyncWork) bool {
	switch m.Dataplane {
	case IPTablesNFT, IPTablesLegacy:
		return w.IPTables != nil
	case NFTables:
		return w.NFTables != nil
	case IPVS:
		return w.IPVS != nil
	}
	return false
}

func (m *ModeProfile) String() string { return "cost profile part " + m.Dataplane }

var _ sim.CostSplitter = (*ModeProfile)(nil)

// Validate checks everything evaluation relies on, naming the field at
// fault: known dataplanes and kinds, each kind once, known measures,
// curves that evaluate.
func (p *Profile) Validate() error {
	var errs []error
	if strings.TrimSpace(p.Name) == "" {
		errs = append(errs, errors.New("name: missing"))
	}
	seen := map[string]bool{}
	for i, m := range p.Modes {
		at := fmt.Sprintf("modes[%d]", i)
		if !slices.Contains(Dataplanes, m.Dataplane) {
			errs = append(errs, fmt.Errorf("%s.dataplane: unknown %q (want one of %s)", at, m.Dataplane, strings.Join(Dataplanes, ", ")))
		}
		if seen[m.Dataplane] {
			errs = append(errs, fmt.Errorf("%s.dataplane: %s twice", at, m.Dataplane))
		}
		seen[m.Dataplane] = true
		errs = append(errs, checkTerms(at+".kernel", m.Kernel, []Kind{FullNew, FullRestart, Partial, Listing})...)
		errs = append(errs, checkTerms(at+".compute", m.Compute, []Kind{Full, Partial})...)
	}
	return errors.Join(errs...)
}

func checkTerms(at string, ts []Term, kinds []Kind) []error {
	var errs []error
	seen := map[Kind]bool{}
	for i, t := range ts {
		here := fmt.Sprintf("%s[%d]", at, i)
		if !slices.Contains(kinds, t.Kind) {
			errs = append(errs, fmt.Errorf("%s.kind: unknown %q (want one of %v)", here, t.Kind, kinds))
		}
		if seen[t.Kind] {
			errs = append(errs, fmt.Errorf("%s.kind: %s twice", here, t.Kind))
		}
		seen[t.Kind] = true
		if _, ok := Measures[t.Measure]; !ok {
			errs = append(errs, fmt.Errorf("%s.measure: unknown %q (want one of %s)", here, t.Measure, strings.Join(MeasureNames(), ", ")))
		}
		for j, a := range t.Plus {
			if _, ok := Measures[a.Measure]; !ok {
				errs = append(errs, fmt.Errorf("%s.plus[%d].measure: unknown %q (want one of %s)", here, j, a.Measure, strings.Join(MeasureNames(), ", ")))
			}
			if a.Weight < 0 || math.IsNaN(a.Weight) || math.IsInf(a.Weight, 0) {
				errs = append(errs, fmt.Errorf("%s.plus[%d].weight: %v is not a finite weight of 0 or more", here, j, a.Weight))
			}
		}
		if err := t.Curve.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("%s.curve: %w", here, err))
		}
	}
	return errs
}

// Parse reads a profile from JSON, refusing unknown fields, and validates
// it.
func Parse(data []byte) (*Profile, error) {
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	var p Profile
	if err := dec.Decode(&p); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &p, nil
}

// Load reads a profile file; errors name the file.
func Load(path string) (*Profile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	p, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// Marshal is the profile as its file holds it: indented JSON, sizes in
// order.
func (p *Profile) Marshal() ([]byte, error) {
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
