package migrate

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/replay"
	"github.com/proxysim/proxysim/sim/route"
)

// HostKernelModes are the modes a host's kernel check replays (--dataplane
// netns), the default of Options.KernelModes: the host has no IPVS.
var HostKernelModes = []string{"iptables", "nftables"}

// VMKernelModes are the modes the VM's kernel check replays (--dataplane
// vm): its image holds the IPVS mode's whole packet path (IPVS, ipsets,
// iptables' legacy backend), not the iptables and nftables modes' modules
// and tools.
var VMKernelModes = []string{"ipvs"}

// maxKernelChecks is how many connections of one difference are measured.
const maxKernelChecks = 2

// CheckKernel confirms the differences on a real kernel: for each one, in
// each mode the kernel dataplane replays (Options.KernelModes), a few of
// its connections are written as `route` expectations holding that mode's
// predicted shares into that node's scenario, which is replayed on the
// kernel; the mode's kernel check sends real connections and compares
// where they went with the shares (chi-square for spreads). A side whose
// mode the kernel does not replay is named as not checked. A connection
// that crosses two nodes is not measured (the kernel dataplane is one
// node). Masquerade is measured on the IPVS side only (its packet path's
// endpoints report the source they saw); the iptables and nftables checks
// see which endpoint answered, not the source.
//
// With crossed, each mode's kernel is asked for the other mode's outcome:
// the check's failing twin, where every measured connection must come out
// NOT as predicted (a test holds the check to that).
func (r *Report) CheckKernel(f scenarios.DataplaneFactory, crossed bool) error {
	in, primaryDefault, o := r.in, r.primaryDefault, r.opts
	r.KernelFailures, r.KernelChecked = 0, 0
	for si := range r.Services {
		for di := range r.Services[si].Differences {
			r.Services[si].Differences[di].Kernel = nil
		}
	}
	modes := o.KernelModes
	if modes == nil {
		modes = HostKernelModes
	}
	checked := [2]bool{slices.Contains(modes, r.From), slices.Contains(modes, r.To)}
	if !checked[0] && !checked[1] {
		r.KernelNote = "not checked on a kernel: " + r.uncheckedSides(checked, "%s side needs %s")
		return nil
	}
	type route1 struct {
		d    *Difference
		p    probe
		want Outcome
	}
	// routes[mode index][node] are the expectations to replay.
	routes := [2]map[string][]route1{{}, {}}
	for si := range r.Services {
		for di := range r.Services[si].Differences {
			d := &r.Services[si].Differences[di]
			n := 0
			for _, p := range d.probes {
				if p.Client == ClientPodElsewhere || n == maxKernelChecks {
					continue
				}
				n++
				before, after := d.before, d.after
				if crossed {
					before, after = after, before
				}
				routes[0][p.Via] = append(routes[0][p.Via], route1{d, p, before})
				routes[1][p.Via] = append(routes[1][p.Via], route1{d, p, after})
			}
			if n == 0 {
				d.Kernel = append(d.Kernel, "not measured: its connections cross two nodes, the kernel dataplane is one")
			}
		}
	}
	for i, sd := range r.sides {
		if !checked[i] {
			continue
		}
		for _, node := range sortedKeys(routes[i]) {
			rs := routes[i][node]
			var steps strings.Builder
			for k, rt := range rs {
				steps.WriteString(routeStep(k, rt.p, rt.want, sd.Mode == "ipvs"))
			}
			s, err := load(in, r.cluster.node(node), sd.Mode, i == 1, primaryDefault, setsFor(i, o.Set), steps.String(), nil)
			if err != nil {
				return err
			}
			opts := o.Replay
			opts.Dataplane = f
			opts.TraceKeep = 64
			res, err := replay.Replay(s, opts)
			if err != nil {
				return fmt.Errorf("the kernel check of node %s in mode %s: %w", node, sd.Mode, err)
			}
			failed := map[int]string{}
			for _, f := range res.Failures {
				got := f.Got
				if strings.HasSuffix(f.What, ".masqueraded") {
					got = "masqueraded " + got
				}
				if prev, ok := failed[stepOf(f)]; ok {
					got = prev + "; " + got
				}
				failed[stepOf(f)] = got
			}
			for k, rt := range rs {
				r.KernelChecked++
				verdict := "as predicted"
				if got, bad := failed[k]; bad {
					verdict = "NOT as predicted: " + got
					r.KernelFailures++
				}
				rt.d.Kernel = append(rt.d.Kernel, fmt.Sprintf("%s on %s: %s -> %s on node %s: %s", sd.Mode, res.Env, rt.p.From, rt.p.To, node, verdict))
			}
		}
	}
	for si := range r.Services {
		for di := range r.Services[si].Differences {
			sort.Strings(r.Services[si].Differences[di].Kernel)
		}
	}
	if checked[0] && checked[1] {
		r.KernelNote = "each difference's connections measured on the kernel in both modes" + masqNote(r.From, r.To)
	} else {
		i := 0
		if checked[1] {
			i = 1
		}
		r.KernelNote = fmt.Sprintf("each difference's connections measured on the kernel on the %s side only%s; %s",
			sideName(r.sides[i].Mode, i), masqNote(r.sides[i].Mode), r.uncheckedSides(checked, "%s side is not checked on a kernel: it needs %s"))
	}
	return nil
}

// sideName is a side as the report names it: the mode, before or after.
func sideName(mode string, i int) string {
	return mode + [2]string{" (before)", " (after)"}[i]
}

// masqNote says whether masquerade was measured in the modes checked.
func masqNote(modes ...string) string {
	for _, m := range modes {
		if m != "ipvs" {
			if slices.Contains(modes, "ipvs") {
				return " (masquerade measured on the ipvs side only)"
			}
			return " (masquerade not measured)"
		}
	}
	return " (masquerade measured too)"
}

// uncheckedSides names the sides the kernel did not replay and the
// dataplane that replays each, in format (side, dataplane).
func (r *Report) uncheckedSides(checked [2]bool, format string) string {
	var out []string
	for i, sd := range r.sides {
		if checked[i] {
			continue
		}
		need := "--dataplane netns"
		if sd.Mode == "ipvs" {
			need = "--dataplane vm"
		}
		out = append(out, "the "+fmt.Sprintf(format, sideName(sd.Mode, i), need))
	}
	return strings.Join(out, "; ")
}

// routeStep is the k-th route expectation, a millisecond after the last;
// with masq, it holds the predicted masquerade too (the IPVS mode's
// expectation takes it, and its kernel measures it).
func routeStep(k int, p probe, want Outcome, masq bool) string {
	list := func(sh route.Shares) string {
		var out []string
		for _, key := range sh.Keys() {
			if sh[key].Sign() > 0 {
				out = append(out, fmt.Sprintf("%q: %q", key, sh[key].RatString()))
			}
		}
		return "{" + strings.Join(out, ", ") + "}"
	}
	m := ""
	if masq {
		m = ", masqueraded: " + list(want.Masq)
	}
	return fmt.Sprintf("  - at: %dms\n    expect:\n      route: {from: %s, to: %q, protocol: %s, shares: %s%s}\n",
		1001+k, p.From, p.To, strings.ToUpper(p.Protocol), list(want.Shares), m)
}

// stepOf is the route step a failure belongs to: its timeline index less
// the first (the settling step).
func stepOf(f replay.Failure) int {
	var i int
	if _, err := fmt.Sscanf(f.Pos.Path, "timeline[%d]", &i); err != nil {
		return -1
	}
	return i - 1
}

// KernelResult is a kernel check's outcome apart from its report: what a
// check run in another process (`proxysim migrate` inside the VM, over the
// same inputs) hands back to the report made on the host.
type KernelResult struct {
	Note     string `json:"note"`
	Checked  int    `json:"checked"`
	Failures int    `json:"failures"`
	// Differences are, in the report's order, each difference's key
	// (service, port, entry, client) and what the kernel measured.
	Differences []KernelDifference `json:"differences"`
}

// KernelDifference is one difference's kernel lines.
type KernelDifference struct {
	Key    string   `json:"key"`
	Kernel []string `json:"kernel,omitempty"`
}

func (d *Difference) key(service string) string {
	return strings.Join([]string{service, d.Port, d.Entry, d.Client}, " | ")
}

// KernelResult is the report's kernel check, to hand to another report.
func (r *Report) KernelResult() KernelResult {
	k := KernelResult{Note: r.KernelNote, Checked: r.KernelChecked, Failures: r.KernelFailures}
	for _, s := range r.Services {
		for _, d := range s.Differences {
			k.Differences = append(k.Differences, KernelDifference{d.key(s.Service), d.Kernel})
		}
	}
	return k
}

// SetKernelResult takes a kernel check made by another process over the
// same inputs, and sets the exit code again. Its differences must be the
// report's, one for one: anything else means the two comparisons
// disagree, and nothing is taken.
func (r *Report) SetKernelResult(k KernelResult) error {
	var ds []*Difference
	for si := range r.Services {
		for di := range r.Services[si].Differences {
			d := &r.Services[si].Differences[di]
			if i := len(ds); i >= len(k.Differences) || k.Differences[i].Key != d.key(r.Services[si].Service) {
				return fmt.Errorf("the kernel check's differences are not the report's: difference %d is %q here", i+1, d.key(r.Services[si].Service))
			}
			ds = append(ds, d)
		}
	}
	if len(ds) != len(k.Differences) {
		return fmt.Errorf("the kernel check has %d differences, the report %d", len(k.Differences), len(ds))
	}
	for i, d := range ds {
		d.Kernel = k.Differences[i].Kernel
	}
	r.KernelNote, r.KernelChecked, r.KernelFailures = k.Note, k.Checked, k.Failures
	r.finish()
	return nil
}
