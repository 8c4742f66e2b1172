package iptables

import (
	"fmt"
	"regexp"
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
func Apply(rs Ruleset, payload string) (Ruleset, error) {
	out := rs.Clone()
	var table Table
	var tname string
	lines := strings.Split(payload, "\n")
	for i, line := range lines {
		n := i + 1
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
		case table == nil:
			return nil, fail("%q outside a table", line)
		case line == "COMMIT":
			if err := checkJumps(tname, table); err != nil {
				return nil, fail("%v", err)
			}
			table, tname = nil, ""
		case strings.HasPrefix(line, ":"):
			m := chainLine.FindStringSubmatch(line)
			if m == nil {
				return nil, fail("bad chain line %q", line)
			}
			name, policy := m[1], m[2]
			if c := table[name]; c != nil && c.Builtin() {
				if policy != "ACCEPT" && policy != "DROP" {
					return nil, fail("bad policy %q for built-in chain %s", policy, name)
				}
				c.Policy = policy
				continue
			}
			if policy != "-" {
				return nil, fail("user chain %s cannot have policy %s", name, policy)
			}
			if _, std := standardTargets[name]; std {
				return nil, fail("chain name %s is a target", name)
			}
			table[name] = &Chain{Name: name, Policy: "-"}
		case strings.HasPrefix(line, "-A "):
			name, rest, _ := strings.Cut(line[3:], " ")
			c := table[name]
			if c == nil {
				return nil, fail("no chain %s in table %s", name, tname)
			}
			r, err := ParseRule(strings.TrimSpace(rest))
			if err != nil {
				return nil, fail("%v", err)
			}
			if tables, std := standardTargets[r.Target]; std && tables != nil && tables[0] != tname {
				return nil, fail("target %s is not valid in table %s", r.Target, tname)
			}
			c.Rules = append(c.Rules, r)
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

// checkJumps refuses a table in which a rule jumps to a chain that does
// not exist (the kernel refuses it at commit), or a rule has no target
// and is not a plain counter (kube-proxy's FW chains end with one; it is
// allowed).
func checkJumps(tname string, t Table) error {
	for _, c := range t {
		for _, r := range c.Rules {
			if r.Target == "" {
				continue
			}
			if _, std := standardTargets[r.Target]; std {
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
