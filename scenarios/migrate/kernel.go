package migrate

import (
	"fmt"
	"sort"
	"strings"

	"github.com/proxysim/proxysim/scenarios"
)

// kernelModes are the modes a host's kernel check replays (--dataplane
// netns); the IPVS side's packet path is modelled on the fake only, and
// needs the VM.
var kernelModes = map[string]bool{"iptables": true, "nftables": true}

// maxKernelChecks is how many connections of one difference are measured.
const maxKernelChecks = 2

// CheckKernel confirms the differences on a real kernel: for each one
// between two modes the kernel dataplane replays, a few of its connections
// are written as `route` expectations holding each mode's predicted shares
// into that node's scenario, which is replayed on the kernel; the mode's
// kernel check sends real connections and compares where they went with
// the shares (chi-square for spreads). A connection that crosses two nodes
// is not measured (the kernel dataplane is one node). Masquerade is not
// measured: the check sees which endpoint answered, not the source it saw.
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
	if !kernelModes[r.From] || !kernelModes[r.To] {
		r.KernelNote = fmt.Sprintf("not checked on a kernel: the %s side needs --dataplane vm", ipvsSide(r.From, r.To))
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
		for _, node := range sortedKeys(routes[i]) {
			rs := routes[i][node]
			var steps strings.Builder
			for k, rt := range rs {
				steps.WriteString(routeStep(k, rt.p, rt.want))
			}
			s, err := load(in, r.cluster.node(node), sd.Mode, i == 1, primaryDefault, setsFor(i, o.Set), steps.String(), nil)
			if err != nil {
				return err
			}
			opts := o.Replay
			opts.Dataplane = f
			opts.TraceKeep = 64
			res, err := scenarios.Replay(s, opts)
			if err != nil {
				return fmt.Errorf("the kernel check of node %s in mode %s: %w", node, sd.Mode, err)
			}
			failed := map[int]string{}
			for _, f := range res.Failures {
				failed[stepOf(f)] = f.Got
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
	r.KernelNote = "each difference's connections measured on the kernel in both modes (masquerade not measured)"
	return nil
}

func ipvsSide(from, to string) string {
	if from == "ipvs" {
		return "ipvs (before)"
	}
	return "ipvs (after)"
}

// routeStep is the k-th route expectation, a millisecond after the last.
func routeStep(k int, p probe, want Outcome) string {
	var shares []string
	for _, key := range want.Shares.Keys() {
		shares = append(shares, fmt.Sprintf("%q: %q", key, want.Shares[key].RatString()))
	}
	return fmt.Sprintf("  - at: %dms\n    expect:\n      route: {from: %s, to: %q, protocol: %s, shares: {%s}}\n",
		1001+k, p.From, p.To, strings.ToUpper(p.Protocol), strings.Join(shares, ", "))
}

// stepOf is the route step a failure belongs to: its timeline index less
// the first (the settling step).
func stepOf(f scenarios.Failure) int {
	var i int
	if _, err := fmt.Sscanf(f.Pos.Path, "timeline[%d]", &i); err != nil {
		return -1
	}
	return i - 1
}
