package iptables

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// applyFull is Apply as it was before the jump counts: every chain of the
// ruleset copied, and every jump of the table checked at each COMMIT. It
// is the oracle the counted check is held to.
func applyFull(rs Ruleset, payload string) (Ruleset, error) {
	out := rs.Clone()
	var table Table
	var tname string
	for i, line := range strings.Split(payload, "\n") {
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

// saveEvery is the whole ruleset as text, mangle included.
func saveEvery(rs Ruleset) string {
	var b strings.Builder
	for _, t := range AllTables {
		b.WriteString(rs.Save(t))
	}
	return b.String()
}

// checkRefs holds every chain's count to a recount of the table's jumps.
func checkRefs(t *testing.T, rs Ruleset) {
	t.Helper()
	for tn, tab := range rs {
		want := map[string]int{}
		for _, c := range tab {
			for _, r := range c.Rules {
				if jumpsToChain(r) {
					want[r.Target]++
				}
			}
		}
		for name, c := range tab {
			if c.refs != want[name] {
				t.Fatalf("table %s chain %s: %d jumps counted, %d in the table", tn, name, c.refs, want[name])
			}
		}
	}
}

// randomPayload writes a restore payload over a few user chains of filter
// and nat: mostly what kube-proxy writes (chains declared, rules jumping
// between them, stale chains flushed and deleted), with some of what a
// restore refuses (jumps to chains that are not there, deletions of
// chains still jumped to, jumps to built-in chains, bad lines).
func randomPayload(r *rand.Rand) string {
	users := []string{"KUBE-A", "KUBE-B", "KUBE-C", "KUBE-D", "KUBE-E", "KUBE-F"}
	pick := func(s []string) string { return s[r.IntN(len(s))] }
	var b strings.Builder
	for range 1 + r.IntN(2) {
		table := "nat"
		switch r.IntN(20) {
		case 0:
			table = "raw"
		case 1, 2, 3, 4, 5, 6:
			table = "filter"
		}
		builtins := BuiltinChains["nat"]
		if table == "filter" {
			builtins = BuiltinChains["filter"]
		}
		fmt.Fprintf(&b, "*%s\n", table)
		declared := []string{}
		for range r.IntN(4) {
			c := pick(users)
			declared = append(declared, c)
			fmt.Fprintf(&b, ":%s - [0:0]\n", c)
		}
		if r.IntN(6) == 0 {
			fmt.Fprintf(&b, ":%s %s [0:0]\n", pick(builtins), pick([]string{"ACCEPT", "DROP"}))
		}
		for range r.IntN(6) {
			from := pick(append(builtins, users...))
			if len(declared) > 0 && r.IntN(3) > 0 {
				from = pick(declared)
			}
			var target string
			switch k := r.IntN(30); {
			case k < 20:
				target = "-j " + pick(users)
			case k < 22:
				target = "-j " + pick(builtins)
			case k < 24:
				target = "-j RETURN"
			case k < 25:
				target = "-j REJECT"
			case k < 26:
				target = "-j DNAT --to-destination 10.1.0.1:80"
			case k < 27:
				target = "-j " + pick([]string{"KUBE-GONE", "ACCEPT"})
			default:
				target = ""
			}
			fmt.Fprintf(&b, "-A %s -s 10.0.0.%d/32 %s\n", from, r.IntN(4), target)
		}
		for range r.IntN(3) {
			c := pick(users)
			if r.IntN(4) > 0 {
				fmt.Fprintf(&b, ":%s - [0:0]\n", c)
			}
			fmt.Fprintf(&b, "-X %s\n", c)
			if r.IntN(5) == 0 {
				fmt.Fprintf(&b, ":%s - [0:0]\n", c)
			}
		}
		switch r.IntN(40) {
		case 0:
			b.WriteString("-Z KUBE-A\n")
		case 1:
			b.WriteString(":INPUT - [0:0]\n")
		case 2:
			continue // no COMMIT
		case 3:
			b.WriteString("-X INPUT\n")
		}
		b.WriteString("COMMIT\n")
	}
	return b.String()
}

// TestApplyCountsJumpsAsTheFullCheck runs the counted jump check and the
// full one side by side over random rulesets and payloads: every payload
// must give the same ruleset or the same error, the input ruleset must be
// left as it was, and the counts must match a recount of the table. Half
// the runs parse through a RuleCache, which must change nothing.
func TestApplyCountsJumpsAsTheFullCheck(t *testing.T) {
	errs := map[string]int{}
	applied := 0
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 25))
		inc, full := NewRuleset(), NewRuleset()
		// Odd seeds parse through a cache, small enough to turn over.
		var cache *RuleCache
		if seed%2 == 1 {
			cache = &RuleCache{}
		}
		for step := range 60 {
			if r.IntN(40) == 0 {
				table := pick2(r, "filter", "nat")
				var err error
				if inc, err = inc.Flush(table); err != nil {
					t.Fatal(err)
				}
				if full, err = full.Flush(table); err != nil {
					t.Fatal(err)
				}
				continue
			}
			payload := randomPayload(r)
			before := saveEvery(inc)
			gotRS, gotErr := ApplyCached(inc, payload, cache)
			wantRS, wantErr := applyFull(full, payload)
			if after := saveEvery(inc); after != before {
				t.Fatalf("seed %d step %d: Apply changed its input:\n%s\nto\n%s", seed, step, before, after)
			}
			if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
				t.Fatalf("seed %d step %d: payload\n%s\non\n%s\ncounted check: %v\nfull check: %v", seed, step, payload, before, gotErr, wantErr)
			}
			if gotErr != nil {
				msg := gotErr.Error()
				msg = msg[strings.LastIndex(msg, ": ")+2:]
				for _, kind := range []string{"which does not exist", "jumps to built-in chain", "is not empty", "no COMMIT", "to delete"} {
					if strings.Contains(msg, kind) {
						errs[kind]++
					}
				}
				continue
			}
			if g, w := saveEvery(gotRS), saveEvery(wantRS); g != w {
				t.Fatalf("seed %d step %d: payload\n%s\ncounted check gives\n%s\nfull check gives\n%s", seed, step, payload, g, w)
			}
			checkRefs(t, gotRS)
			inc, full = gotRS, wantRS
			applied++
		}
	}
	// The random payloads must reach every kind of outcome, or the test
	// proves little.
	t.Logf("%d payloads applied; errors: %v", applied, errs)
	if applied < 2000 {
		t.Errorf("only %d payloads applied", applied)
	}
	for _, kind := range []string{"which does not exist", "jumps to built-in chain", "is not empty", "no COMMIT", "to delete"} {
		if errs[kind] < 50 {
			t.Errorf("only %d errors %q", errs[kind], kind)
		}
	}
}

func pick2(r *rand.Rand, a, b string) string {
	if r.IntN(2) == 0 {
		return a
	}
	return b
}

// TestApplyRefusesDeletingAJumpedToChain is the case the counts exist
// for: a chain left alone by the payload still jumps to a chain the
// payload deletes.
func TestApplyRefusesDeletingAJumpedToChain(t *testing.T) {
	rs, err := Apply(NewRuleset(), "*nat\n:KUBE-SVC - [0:0]\n:KUBE-SEP - [0:0]\n-A KUBE-SVC -j KUBE-SEP\nCOMMIT\n")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Apply(rs, "*nat\n-X KUBE-SEP\nCOMMIT\n")
	if want := "iptables-restore: line 3: chain KUBE-SVC jumps to KUBE-SEP, which does not exist in table nat"; fmt.Sprint(err) != want {
		t.Fatalf("got %v, want %s", err, want)
	}
	// Flushing the chain that jumps makes the deletion fine, in either order.
	for _, p := range []string{"*nat\n:KUBE-SVC - [0:0]\n-X KUBE-SEP\nCOMMIT\n", "*nat\n-X KUBE-SEP\n:KUBE-SVC - [0:0]\nCOMMIT\n"} {
		next, err := Apply(rs, p)
		if err != nil {
			t.Fatalf("%q: %v", p, err)
		}
		if next["nat"]["KUBE-SEP"] != nil || rs["nat"]["KUBE-SEP"] == nil {
			t.Fatalf("%q: the chain is not deleted in the copy only", p)
		}
	}
}

// TestRuleCacheForgetsWhatRestoresStopUsing: a cache over restores of
// ever new rules stays near twice the largest payload, and rules it still
// holds are handed out again rather than parsed anew.
func TestRuleCacheForgetsWhatRestoresStopUsing(t *testing.T) {
	var cache RuleCache
	rs := NewRuleset()
	for i := range 3000 {
		var b strings.Builder
		b.WriteString("*filter\n:KUBE-A - [0:0]\n")
		for j := range 10 {
			fmt.Fprintf(&b, "-A KUBE-A -s 10.%d.%d.%d/32 -j ACCEPT\n", i/256, i%256, j)
		}
		b.WriteString("COMMIT\n")
		var err error
		if rs, err = ApplyCached(rs, b.String(), &cache); err != nil {
			t.Fatal(err)
		}
		if n := len(cache.cur) + len(cache.old); n > 2*(2*10+1024+1) {
			t.Fatalf("restore %d: the cache holds %d rules", i, n)
		}
	}
	again, err := ApplyCached(rs, "*filter\n-A KUBE-A -s 10.11.183.9/32 -j ACCEPT\nCOMMIT\n", &cache)
	if err != nil {
		t.Fatal(err)
	}
	a, b := rs["filter"]["KUBE-A"].Rules, again["filter"]["KUBE-A"].Rules
	if a[9].Text != "-s 10.11.183.9/32 -j ACCEPT" || b[10] != a[9] {
		t.Fatalf("the last restore's rule was parsed again: %q", b[10].Text)
	}
}
