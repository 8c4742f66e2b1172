package transcript

// The comparison of iptables tables written by two implementations, shared
// by the e2e modules that compare proxysim with kube-proxy releases
// (e2e/upstream, e2e/upstream133). See docs/explanation/mode-iptables.md for why
// each normalisation is there.

import (
	"fmt"
	"sort"
	"strings"
)

// sharedChains are the chains every service port writes into, in the
// order kube-proxy meets the service ports (a Go map's order).
var sharedChains = map[string]bool{
	"KUBE-SERVICES": true, "KUBE-EXTERNAL-SERVICES": true, "KUBE-NODEPORTS": true, "KUBE-PROXY-FIREWALL": true,
}

// canaryChain is kube-proxy's canary (normalisation 4 below).
const canaryChain = "KUBE-PROXY-CANARY"

// CanonicalIPTables rewrites restore or save text so that what may legitimately
// differ does not:
//  1. chain lines are sorted, and compared by name only (upstream's fake
//     prints "-" as a built-in chain's policy, and counters are not
//     modelled);
//  2. rules are grouped by chain, keeping their order within the chain
//     (the order of lines of different chains in a payload has no effect),
//     and chains are listed by name, "-X" deletions last and sorted
//     (kube-proxy finds stale chains by a set difference);
//  3. in the chains shared by all service ports (sharedChains), each
//     service port's rules move as a block, blocks sorted by the service
//     port name in their comment, the rules of one block in their order
//     and the rule without a service (the node-ports jump) last: kube-proxy
//     ranges over a Go map, proxysim over sorted names.
//  4. the canary chain KUBE-PROXY-CANARY is dropped: kube-proxy's iptables
//     Monitor makes it (pkg/proxy/iptables/proxier.go NewProxier starts
//     it), but upstream's fake iptables runs Monitor as a no-op
//     (pkg/util/iptables/testing/fake.go FakeIPTables.Monitor), so its
//     side never holds it; proxysim's monitor is checked by its own tests
//     and on the kernel.
//
// Nothing else is touched: every rule's text must be identical.
func CanonicalIPTables(text string) (string, error) {
	type table struct {
		chains  []string
		rules   map[string][]string
		deletes []string
	}
	tables := map[string]*table{}
	var cur *table
	var order []string
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case l == "" || strings.HasPrefix(l, "#") || l == "COMMIT":
		case strings.HasPrefix(l, "*"):
			name := l[1:]
			if tables[name] == nil {
				tables[name] = &table{rules: map[string][]string{}}
				order = append(order, name)
			}
			cur = tables[name]
		case cur == nil:
			return "", fmt.Errorf("line outside a table: %q", l)
		case strings.HasPrefix(l, ":"):
			name, _, _ := strings.Cut(l[1:], " ")
			if name != canaryChain {
				cur.chains = append(cur.chains, name)
			}
		case strings.HasPrefix(l, "-A "):
			chain, _, _ := strings.Cut(l[3:], " ")
			cur.rules[chain] = append(cur.rules[chain], l)
		case strings.HasPrefix(l, "-X "):
			cur.deletes = append(cur.deletes, l)
		default:
			return "", fmt.Errorf("unexpected line %q", l)
		}
	}
	sort.Strings(order)
	var b strings.Builder
	for _, tn := range order {
		t := tables[tn]
		if len(t.chains) == 0 && len(t.rules) == 0 && len(t.deletes) == 0 {
			continue // upstream's fake has an empty mangle table
		}
		fmt.Fprintf(&b, "*%s\n", tn)
		sort.Strings(t.chains)
		for _, c := range t.chains {
			fmt.Fprintf(&b, ":%s\n", c)
		}
		names := make([]string, 0, len(t.rules))
		for c := range t.rules {
			names = append(names, c)
		}
		sort.Strings(names)
		for _, c := range names {
			rules := t.rules[c]
			if sharedChains[c] {
				rules = append([]string(nil), rules...)
				sort.SliceStable(rules, func(i, j int) bool { return servicePortOf(rules[i]) < servicePortOf(rules[j]) })
			}
			for _, r := range rules {
				b.WriteString(r + "\n")
			}
		}
		sort.Strings(t.deletes)
		for _, d := range t.deletes {
			b.WriteString(d + "\n")
		}
	}
	return b.String(), nil
}

// servicePortOf is the service port name a shared-chain rule is for: the
// first word of its comment; "\xff" (after every name) for a rule that is
// for no service.
func servicePortOf(rule string) string {
	_, c, ok := strings.Cut(rule, "--comment ")
	if !ok {
		return "\xff"
	}
	c = strings.TrimPrefix(c, `"`)
	word, _, _ := strings.Cut(c, " ")
	if !strings.Contains(word, "/") {
		return "\xff"
	}
	return strings.TrimSuffix(word, `"`)
}

// LineDiff shows the lines only one side has, in order.
func LineDiff(k, o string) string {
	kl, ol := strings.Split(k, "\n"), strings.Split(o, "\n")
	in := func(l []string) map[string]int {
		m := map[string]int{}
		for _, x := range l {
			m[x]++
		}
		return m
	}
	km, om := in(kl), in(ol)
	var b strings.Builder
	for _, x := range kl {
		if om[x] == 0 {
			b.WriteString("- kube-proxy: " + x + "\n")
		} else {
			om[x]--
		}
	}
	for _, x := range ol {
		if km[x] == 0 {
			b.WriteString("+ proxysim:   " + x + "\n")
		} else {
			km[x]--
		}
	}
	if b.Len() == 0 {
		return "(same lines, different order)\n--- kube-proxy\n" + k + "--- proxysim\n" + o
	}
	return b.String()
}
