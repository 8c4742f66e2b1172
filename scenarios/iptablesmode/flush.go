package iptablesmode

import (
	"fmt"
	"slices"
	"strings"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/replay"
	"github.com/proxysim/proxysim/sim/iptables"
)

// Flush empties iptables tables from outside kube-proxy, as an operator's
// `iptables -t TABLE -F; iptables -t TABLE -X` or a firewall reload
// (firewalld, a distribution's iptables service) does:
// `iptablesFlush: {tables: [nat]}`, or `iptablesFlush: {}` for mangle, nat
// and filter, the three tables kube-proxy keeps its canary in. Every rule
// and user chain of each table goes, kube-proxy's canary included; the
// built-in chains keep their policies. kube-proxy's canary monitor
// (iptables.Monitor) notices at its next look, if the mangle canary is
// gone, and forces a full sync.
type Flush struct {
	Tables []string `yaml:"tables"`
	Src    scenarios.Src
}

type flushStep struct {
	Flush *Flush `yaml:"iptablesFlush"`
}

func (s *flushStep) Validate(v *scenarios.Validator) {
	f := s.Flush
	if f == nil {
		return
	}
	seen := map[string]bool{}
	for i, t := range f.Tables {
		at := f.Src.At("tables")
		pos := scenarios.Pos{Line: at.Line, Column: at.Column, Path: fmt.Sprintf("%s[%d]", at.Path, i)}
		switch {
		case !slices.Contains(iptables.CanaryTables, t):
			v.Errorf(pos, "unknown table %q (known: %s)", t, strings.Join(iptables.CanaryTables, ", "))
		case seen[t]:
			v.Errorf(pos, "table %s is flushed twice", t)
		}
		seen[t] = true
	}
}

// tables are the tables to flush, in the order given (all three when none
// are named).
func (f *Flush) tables() []string {
	if len(f.Tables) == 0 {
		return iptables.CanaryTables
	}
	return f.Tables
}

func (s *flushStep) Do(r *replay.Run) error {
	f := s.Flush
	if f == nil {
		return nil
	}
	d := dataplaneOf(r)
	var cmds []string
	for _, t := range f.tables() {
		cmds = append(cmds, "iptables -t "+t+" -F", "iptables -t "+t+" -X")
	}
	r.Step("iptablesFlush", "", strings.Join(cmds, "; ")+" (operator)")
	for _, t := range f.tables() {
		if err := d.flush(t); err != nil {
			return fmt.Errorf("iptablesFlush: %s: %w", t, err)
		}
	}
	d.forgetUnreferencedLists()
	return nil
}

// flush empties one table of the dataplane: the fake, or the kernel and
// its in-memory copy.
func (d *Dataplane) flush(table string) error {
	if s, ok := d.faults.Dataplane.(*inStep); ok {
		return s.flush(table)
	}
	return d.raw.Flush(table)
}

// forgetUnreferencedLists drops the `recent` lists no rule names any more:
// the kernel frees an xt_recent list with the last rule that uses it, so
// the affinity a flush took away does not come back with the rules.
func (d *Dataplane) forgetUnreferencedLists() {
	used := map[string]bool{}
	rs := d.raw.Ruleset()
	for _, t := range iptables.AllTables {
		for _, c := range rs[t] {
			for _, rule := range c.Rules {
				if rule.RecentName != "" {
					used[rule.RecentName] = true
				}
			}
		}
	}
	for list := range d.recent {
		if !used[list] {
			delete(d.recent, list)
		}
	}
}
