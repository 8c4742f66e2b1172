package netns

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// CompareSaves reports how the rules of two iptables-save texts differ,
// or nil when they hold the same rules: the same chains, policies, and
// in every chain the same rules in the same order.
//
// Rules are compared by meaning, not by text, because the kernel prints
// back something else than kube-proxy wrote (observed with iptables 1.8.9,
// both backends): addresses gain "/32"; the basic matches (-s, -d, -p)
// move in front of the modules; a probability is stored as a 31-bit
// fraction, so 0.3333333333 comes back as 0.33333333349; `MARK
// --or-mark X` and `--xor-mark X` come back as `--set-xmark X/X` and
// `X/0x0`; marks lose their zero padding; `recent` gains its defaults
// (--mask 255.255.255.255 --rsource) and REJECT its icmp-port-unreachable;
// a module's options may come in another order. So every rule is reduced
// to its basic matches, its modules with their options, and its target with
// its options, each in a fixed order and with those defaults dropped.
// Matches are compared as a set: none of kube-proxy's depends on another's
// position in the rule.
func CompareSaves(want, got string) error {
	w, err := parseSave(want)
	if err != nil {
		return fmt.Errorf("reading the expected rules: %w", err)
	}
	g, err := parseSave(got)
	if err != nil {
		return fmt.Errorf("reading the kernel's rules: %w", err)
	}
	var diffs []string
	for _, tn := range unionKeys(w, g) {
		wt, gt := w[tn], g[tn]
		if wt == nil {
			wt = &savedTable{chains: map[string]*savedChain{}}
		}
		if gt == nil {
			gt = &savedTable{chains: map[string]*savedChain{}}
		}
		for _, cn := range unionKeys(wt.chains, gt.chains) {
			wc, gc := wt.chains[cn], gt.chains[cn]
			switch {
			case wc == nil && gc.empty():
			case gc == nil && wc.empty():
			case wc == nil:
				diffs = append(diffs, fmt.Sprintf("%s: the kernel has chain %s, which was not written", tn, cn))
			case gc == nil:
				diffs = append(diffs, fmt.Sprintf("%s: chain %s is missing from the kernel", tn, cn))
			default:
				if wc.policy != gc.policy {
					diffs = append(diffs, fmt.Sprintf("%s %s: policy %s, kernel %s", tn, cn, wc.policy, gc.policy))
				}
				for i := 0; i < max(len(wc.rules), len(gc.rules)); i++ {
					var wr, gr savedRule
					if i < len(wc.rules) {
						wr = wc.rules[i]
					}
					if i < len(gc.rules) {
						gr = gc.rules[i]
					}
					if wr.canon != gr.canon {
						diffs = append(diffs, fmt.Sprintf("%s %s rule %d:\n  written: %s\n  kernel:  %s", tn, cn, i+1, orNone(wr.text), orNone(gr.text)))
						break // the rest of the chain is shifted: one line says it
					}
				}
			}
		}
	}
	if len(diffs) == 0 {
		return nil
	}
	const most = 8
	if len(diffs) > most {
		diffs = append(diffs[:most], fmt.Sprintf("... and %d more", len(diffs)-most))
	}
	return fmt.Errorf("the kernel holds other rules than were written:\n%s", strings.Join(diffs, "\n"))
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

type savedRule struct{ text, canon string }

type savedChain struct {
	policy string // "-" for a user chain
	rules  []savedRule
}

// empty is a built-in chain as a fresh table has it, which the kernel may
// not print at all (nf_tables creates tables lazily).
func (c *savedChain) empty() bool {
	return c == nil || (len(c.rules) == 0 && (c.policy == "ACCEPT" || c.policy == ""))
}

type savedTable struct{ chains map[string]*savedChain }

func parseSave(text string) (map[string]*savedTable, error) {
	out := map[string]*savedTable{}
	var t *savedTable
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		at := func(err error) error { return fmt.Errorf("line %d %q: %w", i+1, line, err) }
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "*"):
			t = &savedTable{chains: map[string]*savedChain{}}
			out[line[1:]] = t
		case t == nil:
			return nil, at(fmt.Errorf("outside a table"))
		case line == "COMMIT":
			t = nil
		case strings.HasPrefix(line, ":"):
			f := strings.Fields(line[1:])
			if len(f) < 2 {
				return nil, at(fmt.Errorf("bad chain line"))
			}
			t.chains[f[0]] = &savedChain{policy: f[1]}
		case strings.HasPrefix(line, "-A "):
			name, rest, _ := strings.Cut(line[3:], " ")
			c := t.chains[name]
			if c == nil {
				return nil, at(fmt.Errorf("rule for undeclared chain %s", name))
			}
			canon, err := canonicalRule(rest)
			if err != nil {
				return nil, at(err)
			}
			c.rules = append(c.rules, savedRule{text: strings.TrimSpace(rest), canon: canon})
		default:
			return nil, at(fmt.Errorf("not iptables-save text"))
		}
	}
	return out, nil
}

// basicOptions are iptables' own matches, and the name iptables-save
// prints them with.
var basicOptions = map[string]string{
	"-s": "-s", "--source": "-s", "--src": "-s",
	"-d": "-d", "--destination": "-d", "--dst": "-d",
	"-p": "-p", "--protocol": "-p",
	"-i": "-i", "--in-interface": "-i",
	"-o": "-o", "--out-interface": "-o",
}

// option is one option with its values, "!" in front when negated.
type option struct {
	name   string
	not    bool
	values []string
}

func (o option) String() string {
	s := o.name
	if o.not {
		s = "! " + s
	}
	for _, v := range o.values {
		s += " " + strconv.Quote(v)
	}
	return s
}

// canonicalRule reduces a rule (the text after "-A CHAIN") to a string
// that two spellings of the same rule share (see CompareSaves).
func canonicalRule(rule string) (string, error) {
	words, err := splitRule(rule)
	if err != nil {
		return "", err
	}
	var basics []option
	modules := map[string][]option{} // module name -> options
	var moduleOrder []string
	var target string
	var targetOpts []option
	current := "" // the module options attach to; "" before any
	inTarget, not := false, false
	proto := ""
	for i := 0; i < len(words); i++ {
		w := words[i]
		switch {
		case w == "!":
			not = true
			continue
		case w == "-m" || w == "--match":
			if i+1 == len(words) {
				return "", fmt.Errorf("-m without a module")
			}
			i++
			current = words[i]
			if _, ok := modules[current]; !ok {
				modules[current] = nil
				moduleOrder = append(moduleOrder, current)
			}
		case w == "-j" || w == "--jump" || w == "-g" || w == "--goto":
			if i+1 == len(words) {
				return "", fmt.Errorf("%s without a target", w)
			}
			i++
			target, inTarget = w[:2]+" "+words[i], true
		case basicOptions[w] != "":
			if i+1 == len(words) {
				return "", fmt.Errorf("%s without a value", w)
			}
			i++
			o := option{name: basicOptions[w], not: not, values: []string{basicValue(basicOptions[w], words[i])}}
			if o.name == "-p" {
				proto = o.values[0]
			}
			basics = append(basics, o)
		case strings.HasPrefix(w, "--"):
			o := option{name: w, not: not}
			for i+1 < len(words) && words[i+1] != "!" && !strings.HasPrefix(words[i+1], "-") {
				i++
				o.values = append(o.values, words[i])
			}
			if w == "--comment" && len(o.values) == 0 && i+1 < len(words) {
				i++ // a comment may start with a dash
				o.values = append(o.values, words[i])
			}
			switch {
			case inTarget:
				targetOpts = append(targetOpts, o)
			case current == "" && proto != "":
				// `-p tcp --dport 80` loads the protocol's module
				// implicitly; iptables-save prints it as `-m tcp`.
				if _, ok := modules[proto]; !ok {
					moduleOrder = append(moduleOrder, proto)
				}
				modules[proto] = append(modules[proto], o)
			case current == "":
				return "", fmt.Errorf("option %s outside a module", w)
			default:
				modules[current] = append(modules[current], o)
			}
		default:
			return "", fmt.Errorf("unexpected word %q", w)
		}
		not = false
	}
	var parts []string
	sort.Slice(basics, func(i, j int) bool { return basics[i].String() < basics[j].String() })
	for _, o := range basics {
		parts = append(parts, o.String())
	}
	var mods []string
	for _, m := range moduleOrder {
		opts := normaliseModule(m, modules[m])
		s := "-m " + m
		for _, o := range opts {
			s += " " + o.String()
		}
		mods = append(mods, s)
	}
	sort.Strings(mods)
	parts = append(parts, mods...)
	if target != "" {
		s := target
		for _, o := range normaliseTarget(strings.TrimPrefix(strings.TrimPrefix(target, "-j "), "-g "), targetOpts) {
			s += " " + o.String()
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " "), nil
}

func basicValue(name, v string) string {
	switch name {
	case "-s", "-d":
		return strings.TrimSuffix(v, "/32")
	case "-p":
		return strings.ToLower(v)
	}
	return v
}

// ipProtoNumber is an IP protocol's number for its name (tcp, udp, sctp);
// anything else is left as it is.
func ipProtoNumber(p string) string {
	switch strings.ToLower(p) {
	case "tcp":
		return "6"
	case "udp":
		return "17"
	case "sctp":
		return "132"
	}
	return p
}

// normaliseModule drops a module's defaults, puts numbers in one form,
// and sorts its options.
func normaliseModule(name string, opts []option) []option {
	var out []option
	for _, o := range opts {
		switch {
		case name == "recent" && o.name == "--mask" && len(o.values) == 1 && o.values[0] == "255.255.255.255":
			continue
		case name == "recent" && o.name == "--rsource":
			continue
		case name == "statistic" && o.name == "--probability" && len(o.values) == 1:
			o.values = []string{probability31(o.values[0])}
		case name == "mark" && o.name == "--mark" && len(o.values) == 1:
			o.values = []string{markMask(o.values[0])}
		case name == "ipvs" && o.name == "--vproto" && len(o.values) == 1:
			// written by name (kube-proxy's KUBE-IPVS-OUT-FILTER), printed
			// back by number
			o.values = []string{ipProtoNumber(o.values[0])}
		case name == "ipvs" && o.name == "--vaddr" && len(o.values) == 1:
			o.values = []string{strings.TrimSuffix(o.values[0], "/32")}
		case name == "conntrack" && (o.name == "--ctstate" || o.name == "--ctstatus") && len(o.values) == 1:
			states := strings.Split(o.values[0], ",")
			sort.Strings(states)
			o.values = []string{strings.Join(states, ",")}
		}
		out = append(out, o)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

func normaliseTarget(target string, opts []option) []option {
	var out []option
	for _, o := range opts {
		switch {
		case target == "REJECT" && o.name == "--reject-with" && len(o.values) == 1 && o.values[0] == "icmp-port-unreachable":
			continue
		case target == "MARK" && o.name == "--or-mark" && len(o.values) == 1:
			v := number(o.values[0])
			o = option{name: "--set-xmark", values: []string{fmt.Sprintf("%#x/%#x", v, v)}}
		case target == "MARK" && o.name == "--xor-mark" && len(o.values) == 1:
			o = option{name: "--set-xmark", values: []string{fmt.Sprintf("%#x/0x0", number(o.values[0]))}}
		case target == "MARK" && o.name == "--set-xmark" && len(o.values) == 1:
			o.values = []string{markMask(o.values[0])}
		}
		out = append(out, o)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// probability31 is the probability as the kernel stores it: xt_statistic
// keeps it as a fraction of 2^31, which libxt_statistic rounds to nearest.
func probability31(s string) string {
	p, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return s
	}
	return strconv.FormatInt(int64(math.Round(p*(1<<31))), 10) + "/2^31"
}

// markMask prints value[/mask] as hex with the mask always present (an
// absent mask is all ones).
func markMask(s string) string {
	v, m, ok := strings.Cut(s, "/")
	mask := uint64(0xffffffff)
	if ok {
		mask = number(m)
	}
	return fmt.Sprintf("%#x/%#x", number(v), mask)
}

func number(s string) uint64 {
	v, err := strconv.ParseUint(s, 0, 32)
	if err != nil {
		return math.MaxUint64
	}
	return v
}

func unionKeys[V any](a, b map[string]V) []string {
	var out []string
	for k := range a {
		out = append(out, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}
