package fakes

import (
	"strings"

	"github.com/proxysim/proxysim/sim"
	"github.com/proxysim/proxysim/sim/iptables"
)

// IPTables is an in-memory iptables with the filter, nat and mangle
// tables (mangle holds only kube-proxy's canary chain), for sim/iptables. Restore has iptables-restore --noflush semantics (see
// iptables.Apply): a payload applies whole or not at all. Save renders
// iptables-save text in a fixed order, for goldens.
type IPTables struct {
	rs       iptables.Ruleset
	parsed   iptables.RuleCache
	restores int
	calls    IPTablesCalls
}

// IPTablesCalls is what reached the fake, counted by the fake: every call,
// failed ones included, and the payloads and listings by its own reading of
// their text (not the proxier's bookkeeping, which tests hold it to).
type IPTablesCalls struct {
	Restores int
	// Sections are the restore payloads' sections, by table, added up.
	Sections                  map[string]sim.RestoreSection
	Saves                     int
	SavedLines, SavedBytes    int
	EnsureChains, EnsureRules int
	ChainExists               int
}

// Calls returns what reached the fake so far.
func (f *IPTables) Calls() IPTablesCalls {
	c := f.calls
	c.Sections = map[string]sim.RestoreSection{}
	for t, s := range f.calls.Sections {
		c.Sections[t] = s
	}
	return c
}

// countRestore reads a payload line by line into the sections' counts.
func (f *IPTables) countRestore(payload string) {
	f.calls.Restores++
	if f.calls.Sections == nil {
		f.calls.Sections = map[string]sim.RestoreSection{}
	}
	table := ""
	for _, l := range strings.SplitAfter(payload, "\n") {
		if l == "" {
			continue
		}
		text := strings.TrimSuffix(l, "\n")
		if strings.HasPrefix(text, "*") {
			table = text[1:]
		}
		s := f.calls.Sections[table]
		s.Lines++
		s.Bytes += len(l)
		switch {
		case strings.HasPrefix(text, ":"):
			s.Chains++
		case strings.HasPrefix(text, "-A "):
			s.Rules++
		case strings.HasPrefix(text, "-X "):
			s.DeletedChains++
		}
		f.calls.Sections[table] = s
	}
}

var _ iptables.Dataplane = (*IPTables)(nil)

// NewIPTables is a fresh iptables: empty built-in chains, policy ACCEPT.
func NewIPTables() *IPTables { return &IPTables{rs: iptables.NewRuleset()} }

func (f *IPTables) Restore(payload string) error {
	f.countRestore(payload)
	next, err := iptables.ApplyCached(f.rs, payload, &f.parsed)
	if err != nil {
		return err
	}
	f.rs = next
	f.restores++
	return nil
}

func (f *IPTables) Save(table string) (string, error) {
	f.calls.Saves++
	if f.rs[table] == nil {
		return "", &iptables.RestoreError{Msg: "iptables-save: table " + table + " is not modelled"}
	}
	out := f.rs.Save(table)
	f.calls.SavedLines += strings.Count(out, "\n")
	f.calls.SavedBytes += len(out)
	return out, nil
}

// SaveAll is iptables-save of every table.
func (f *IPTables) SaveAll() string { return f.rs.SaveAll() }

// Ruleset is the current rules, for the tracer; the caller must not
// modify it.
func (f *IPTables) Ruleset() iptables.Ruleset { return f.rs }

// Restores counts the restores that succeeded.
func (f *IPTables) Restores() int { return f.restores }

func (f *IPTables) EnsureChain(table, chain string) error {
	f.calls.EnsureChains++
	t := f.rs[table]
	if t == nil {
		return &iptables.RestoreError{Msg: "table " + table + " is not modelled"}
	}
	if t[chain] == nil {
		next := f.rs.Clone()
		next[table][chain] = &iptables.Chain{Name: chain, Policy: "-"}
		f.rs = next
	}
	return nil
}

func (f *IPTables) EnsureRule(table, chain, rule string) error {
	f.calls.EnsureRules++
	t := f.rs[table]
	if t == nil || t[chain] == nil {
		return &iptables.RestoreError{Msg: "no chain " + chain + " in table " + table}
	}
	for _, r := range t[chain].Rules {
		if r.Text == strings.TrimSpace(rule) {
			return nil
		}
	}
	// Prepending through a one-line restore checks the rule exactly as
	// a restore would, jump target included.
	next, err := iptables.Apply(f.rs, "*"+table+"\n-A "+chain+" "+rule+"\nCOMMIT\n")
	if err != nil {
		return err
	}
	c := next[table][chain]
	last := len(c.Rules) - 1
	c.Rules = append([]*iptables.Rule{c.Rules[last]}, c.Rules[:last]...)
	f.rs = next
	return nil
}

func (f *IPTables) ChainExists(table, chain string) (bool, error) {
	f.calls.ChainExists++
	t := f.rs[table]
	if t == nil {
		return false, &iptables.RestoreError{Msg: "table " + table + " is not modelled"}
	}
	return t[chain] != nil, nil
}

// Flush is `iptables -t table -F` then `-X`, done from outside kube-proxy
// (an operator, a firewall reload): the table's rules and user chains are
// gone, its built-in chains' policies stay.
func (f *IPTables) Flush(table string) error {
	next, err := f.rs.Flush(table)
	if err != nil {
		return err
	}
	f.rs = next
	return nil
}
