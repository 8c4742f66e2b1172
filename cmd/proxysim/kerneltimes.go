package main

import (
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/proxysim/proxysim/netns"
	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/iptablesmode"
	"github.com/proxysim/proxysim/scenarios/nftablesmode"
	"github.com/proxysim/proxysim/scenarios/replay"
	"github.com/proxysim/proxysim/sim/costprofile"
)

// kernelTimes compares, sync by sync, the kernel time a replay on
// --dataplane netns measured with what a cost profile predicts from each
// sync's work, and keeps every relative error for the closing median.
type kernelTimes struct {
	profile *costprofile.Profile
	errs    []float64
}

// loadProfileArg is a profile by built-in name or JSON file.
func loadProfileArg(arg string) (*costprofile.Profile, error) {
	if p, err := costprofile.Named(arg); err == nil {
		return p, nil
	}
	return costprofile.Load(arg)
}

// report prints the replay's syncs; the kernel's segments are matched to
// the syncs that reported work, in order.
func (k *kernelTimes) report(w io.Writer, s *scenarios.Scenario, res *replay.Result, times []netns.KernelTime) {
	part := costprofile.NFTables
	switch s.Proxy.Mode {
	case iptablesmode.Name:
		part = "iptables-" + netnsIPTables
	case nftablesmode.Name:
	default:
		fmt.Fprintf(w, "  kernel times: mode %s is not timed\n", s.Proxy.Mode)
		return
	}
	mp, err := k.profile.Mode(part)
	if err != nil {
		fmt.Fprintf(w, "  kernel times: %v\n", err)
		return
	}
	i := 0
	for _, r := range res.Runs {
		if r.Work.Mode() == "" || i >= len(times) {
			continue
		}
		t := times[i]
		i++
		pred := mp.KernelSeconds(r.Work)
		m := t.Total().Seconds()
		e := math.NaN()
		if m > 0 {
			e = (pred - m) / m
			k.errs = append(k.errs, math.Abs(e))
		}
		fmt.Fprintf(w, "  kernel sync %d (%s): measured %s (write %s, list %s), %s predicts %s (%+.0f%%)\n", r.N, costprofile.KindOf(r.Work),
			secs(m), secs(t.Write.Seconds()), secs(t.List.Seconds()), part, secs(pred), 100*e)
	}
}

// summary prints the median relative error over every sync compared.
func (k *kernelTimes) summary(w io.Writer) {
	if len(k.errs) == 0 {
		return
	}
	s := slices.Clone(k.errs)
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	fmt.Fprintf(w, "kernel vs profile %s: median error %.0f%% over %d syncs\n", k.profile.Name, 100*med, len(s))
}

func secs(s float64) string { return fmt.Sprintf("%.1fms", s*1e3) }
