package fakes

import (
	"strings"

	"github.com/proxysim/proxysim/sim/iptables"
)

// IPTables is an in-memory iptables with the filter, nat and mangle
// tables (mangle holds only kube-proxy's canary chain), for sim/iptables. Restore has iptables-restore --noflush semantics (see
// iptables.Apply): a payload applies whole or not at all. Save renders
// iptables-save text in a fixed order, for goldens.
type IPTables struct {
	rs       iptables.Ruleset
	restores int
}

var _ iptables.Dataplane = (*IPTables)(nil)

// NewIPTables is a fresh iptables: empty built-in chains, policy ACCEPT.
func NewIPTables() *IPTables { return &IPTables{rs: iptables.NewRuleset()} }

func (f *IPTables) Restore(payload string) error {
	next, err := iptables.Apply(f.rs, payload)
	if err != nil {
		return err
	}
	f.rs = next
	f.restores++
	return nil
}

func (f *IPTables) Save(table string) (string, error) {
	if f.rs[table] == nil {
		return "", &iptables.RestoreError{Msg: "iptables-save: table " + table + " is not modelled"}
	}
	return f.rs.Save(table), nil
}

// SaveAll is iptables-save of every table.
func (f *IPTables) SaveAll() string { return f.rs.SaveAll() }

// Ruleset is the current rules, for the tracer; the caller must not
// modify it.
func (f *IPTables) Ruleset() iptables.Ruleset { return f.rs }

// Restores counts the restores that succeeded.
func (f *IPTables) Restores() int { return f.restores }

func (f *IPTables) EnsureChain(table, chain string) error {
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
