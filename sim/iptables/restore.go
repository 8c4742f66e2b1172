package iptables

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// RestoreError is a restore that failed, with the payload line it failed
// at (1-based; 0 when the failure is about the payload as a whole).
type RestoreError struct {
	Line int
	Msg  string
}

func (e *RestoreError) Error() string {
	if e.Line == 0 {
		return "iptables-restore: " + e.Msg
	}
	return fmt.Sprintf("iptables-restore: line %d: %s", e.Line, e.Msg)
}

var chainLine = regexp.MustCompile(`^:([A-Za-z0-9_.-]{1,28}) (\S+) \[\d+:\d+\]$`)

// Apply applies an `iptables-restore --noflush` payload to a copy of rs
// and returns the copy; on any error rs is untouched and the copy is
// dropped. Semantics, as iptables-restore has them:
//   - a chain line `:NAME POLICY [p:b]` creates a user chain, or flushes
//     one that exists (with --noflush, chains not named are kept); for a
//     built-in chain it sets the policy;
//   - `-A CHAIN rule` appends to a chain that exists by then;
//   - `-X CHAIN` deletes an empty user chain;
//   - after the last COMMIT, every jump must name a chain of its table and
//     no deleted chain may still be jumped to.
//
// The whole payload is one transaction, as with iptables-nft (the Debian
// default): legacy iptables-restore commits table by table instead, which
// only differs when a later table fails; kube-proxy's payloads fail whole
// either way in what this package models.
//
// The copy shares every chain the payload does not touch with rs (chains
// are never changed once a ruleset holds them), and the jumps are checked
// from the counts of rules jumping to each chain, kept up to date by the
// rules the payload adds and flushes: a partial sync costs what it writes,
// not the size of the table. The counts are right for every ruleset made
// by NewRuleset, Apply, ParseSave, Flush and Clone (a chain made elsewhere
// must have no rule jumping to it).
func Apply(rs Ruleset, payload string) (Ruleset, error) { return ApplyCached(rs, payload, nil) }

// RuleCache remembers parsed rules by their text, for a dataplane that
// restores much the same rules over and over (a rule is never changed once
// parsed, so one can sit in any number of chains and rulesets). It keeps
// what the last restores used: about twice the largest payload's rules.
type RuleCache struct {
	cur, old map[string]*Rule
	largest  int
}

// parse is ParseRule through the cache.
// builtinPolicy are a built-in chain's policies as constants.
var builtinPolicy = map[string]string{"ACCEPT": "ACCEPT", "DROP": "DROP"}

func (c *RuleCache) parse(text string) (*Rule, error) {
	if c == nil {
		return ParseRule(text)
	}
	if r := c.cur[text]; r != nil {
		return r, nil
	}
	r := c.old[text]
	if r == nil {
		// A copy: the payload's text would otherwise stay alive for as
		// long as any rule parsed from it is cached.
		text = strings.Clone(text)
		var err error
		if r, err = ParseRule(text); err != nil {
			return nil, err
		}
	}
	if c.cur == nil {
		c.cur = map[string]*Rule{}
	}
	c.cur[text] = r
	return r, nil
}

// restored starts a new generation once the cache holds much more than a
// payload uses.
func (c *RuleCache) restored(rules int) {
	if c == nil {
		return
	}
	c.largest = max(c.largest, rules)
	if len(c.cur) > 2*c.largest+1024 {
		c.old, c.cur = c.cur, nil
	}
}

// ApplyCached is Apply, parsing rules through cache (nil: none).
func ApplyCached(rs Ruleset, payload string, cache *RuleCache) (Ruleset, error) {
	rules := 0
	defer func() { cache.restored(rules) }()
	out := make(Ruleset, len(rs))
	for tn, t := range rs {
		out[tn] = t
	}
	var copied map[string]bool // tables whose map is out's own
	owned := map[*Chain]bool{} // chains made by this Apply, free to change
	var table Table
	var tname string
	// refs is the change, since the table's last commit, in the rules
	// jumping to each name; a deleted chain's count moves here.
	refs := map[string]int{}
	own := func(c *Chain) *Chain {
		if owned[c] {
			return c
		}
		cp := *c
		cp.Rules = c.Rules[:len(c.Rules):len(c.Rules)]
		table[c.Name] = &cp
		owned[&cp] = true
		return &cp
	}
	for n := 1; payload != ""; n++ {
		var line string
		line, payload, _ = strings.Cut(payload, "\n")
		fail := func(format string, a ...any) error {
			return &RestoreError{Line: n, Msg: fmt.Sprintf(format, a...)}
		}
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "*"):
			if table != nil {
				return nil, fail("table %s opened before COMMIT of %s", line[1:], tname)
			}
			tname = line[1:]
			table = out[tname]
			if table == nil {
				return nil, fail("table %q is not modelled", tname)
			}
			if !copied[tname] {
				if copied == nil {
					copied = map[string]bool{}
				}
				table = maps.Clone(table)
				out[tname], copied[tname] = table, true
			}
			clear(refs)
		case table == nil:
			return nil, fail("%q outside a table", line)
		case line == "COMMIT":
			if !commitJumps(table, refs, own) {
				// Some jump is wrong: the full check names the first.
				if err := checkJumps(tname, table); err != nil {
					return nil, fail("%v", err)
				}
			}
			table, tname = nil, ""
		case strings.HasPrefix(line, ":"):
			m := chainLine.FindStringSubmatch(line)
			if m == nil {
				return nil, fail("bad chain line %q", line)
			}
			name, policy := m[1], m[2]
			c := table[name]
			if c != nil && c.Builtin() {
				if policy != "ACCEPT" && policy != "DROP" {
					return nil, fail("bad policy %q for built-in chain %s", policy, name)
				}
				own(c).Policy = builtinPolicy[policy] // not the payload's text: it would pin the payload
				continue
			}
			if policy != "-" {
				return nil, fail("user chain %s cannot have policy %s", name, policy)
			}
			if _, std := standardTargets[name]; std {
				return nil, fail("chain name %s is a target", name)
			}
			// The chain's name, not the payload's text: a name kept would
			// pin its payload for as long as the chain lives (an hour of a
			// large cluster's partial syncs pinned hundreds of them).
			if c != nil {
				name = c.Name
			} else {
				name = strings.Clone(name)
			}
			nc := &Chain{Name: name, Policy: "-"}
			if c != nil {
				for _, r := range c.Rules {
					if jumpsToChain(r) {
						refs[r.Target]--
					}
				}
				nc.refs = c.refs
			}
			table[name], owned[nc] = nc, true
		case strings.HasPrefix(line, "-A "):
			name, rest, _ := strings.Cut(line[3:], " ")
			c := table[name]
			if c == nil {
				return nil, fail("no chain %s in table %s", name, tname)
			}
			rules++
			r, err := cache.parse(strings.TrimSpace(rest))
			if err != nil {
				return nil, fail("%v", err)
			}
			if tables, std := standardTargets[r.Target]; std && tables != nil && tables[0] != tname {
				return nil, fail("target %s is not valid in table %s", r.Target, tname)
			}
			c = own(c)
			c.Rules = append(c.Rules, r)
			if jumpsToChain(r) {
				refs[r.Target]++
			}
		case strings.HasPrefix(line, "-X "):
			name := strings.TrimSpace(line[3:])
			c := table[name]
			switch {
			case c == nil:
				return nil, fail("no chain %s to delete", name)
			case c.Builtin():
				return nil, fail("cannot delete built-in chain %s", name)
			case len(c.Rules) > 0:
				return nil, fail("chain %s is not empty", name)
			}
			if c.refs != 0 {
				refs[name] += c.refs
			}
			delete(table, name)
		default:
			return nil, fail("unknown command %q", line)
		}
	}
	if table != nil {
		return nil, &RestoreError{Msg: fmt.Sprintf("table %s has no COMMIT", tname)}
	}
	return out, nil
}

// jumpsToChain reports whether r's target is a chain (rather than a
// standard target, or none).
func jumpsToChain(r *Rule) bool {
	if r.Target == "" {
		return false
	}
	_, std := standardTargets[r.Target]
	return !std
}

// commitJumps folds a section's changes in the rules jumping to each name
// (changed) into the table's chains and reports whether every jump is
// still right: nothing jumps to a name that is no chain, or to a built-in
// chain. The table was right before the section, so only the names whose
// count changed can be wrong.
func commitJumps(t Table, changed map[string]int, own func(*Chain) *Chain) bool {
	ok := true
	for name, d := range changed {
		c := t[name]
		if c == nil {
			ok = ok && d <= 0
			continue
		}
		if d == 0 {
			continue
		}
		total := c.refs + d
		if c.Builtin() && total > 0 {
			ok = false
		}
		own(c).refs = total
	}
	return ok
}

// checkJumps refuses a table in which a rule jumps to a chain that does
// not exist (the kernel refuses it at commit), or a rule has no target
// and is not a plain counter (kube-proxy's FW chains end with one; it is
// allowed). It names the first wrong jump, chains by name and rules in
// order, so that the same table always gives the same error.
func checkJumps(tname string, t Table) error {
	for _, name := range slices.Sorted(maps.Keys(t)) {
		c := t[name]
		for _, r := range c.Rules {
			if !jumpsToChain(r) {
				continue
			}
			target := t[r.Target]
			if target == nil {
				return fmt.Errorf("chain %s jumps to %s, which does not exist in table %s", c.Name, r.Target, tname)
			}
			if target.Builtin() {
				return fmt.Errorf("chain %s jumps to built-in chain %s", c.Name, r.Target)
			}
		}
	}
	return nil
}
