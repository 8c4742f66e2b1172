package nftables

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"sigs.k8s.io/knftables"
)

// Mirror is a knftables.Interface that programs a real table and keeps a
// knftables.Fake in step with it: every transaction runs on the real one
// first and, only if it succeeded, on the fake. Reads come from the real
// one, so the proxier sees what the kernel holds. The fake is what the
// tracer and the goldens read: `nft list table` prints rules in the
// kernel's own normalised words, and knftables lists no rule text.
type Mirror struct {
	Real   knftables.Interface
	Shadow *knftables.Fake
}

var _ knftables.Interface = (*Mirror)(nil)

func (m *Mirror) NewTransaction() *knftables.Transaction { return m.Real.NewTransaction() }

func (m *Mirror) Run(ctx context.Context, tx *knftables.Transaction) error {
	if err := m.Real.Run(ctx, tx); err != nil {
		return err
	}
	if err := m.Shadow.Run(ctx, tx); err != nil {
		return fmt.Errorf("the kernel took a transaction that knftables.Fake refuses: %w", err)
	}
	return nil
}

func (m *Mirror) Check(ctx context.Context, tx *knftables.Transaction) error {
	return m.Real.Check(ctx, tx)
}

func (m *Mirror) List(ctx context.Context, t string) ([]string, error) { return m.Real.List(ctx, t) }

func (m *Mirror) ListAll(ctx context.Context) (map[string][]string, error) {
	return m.Real.ListAll(ctx)
}

func (m *Mirror) ListRules(ctx context.Context, chain string) ([]*knftables.Rule, error) {
	return m.Real.ListRules(ctx, chain)
}

func (m *Mirror) ListElements(ctx context.Context, t, name string) ([]*knftables.Element, error) {
	return m.Real.ListElements(ctx, t, name)
}

func (m *Mirror) ListCounters(ctx context.Context) ([]*knftables.Counter, error) {
	return m.Real.ListCounters(ctx)
}

// Compare reports how the real table differs from the shadow: the names
// of its chains, sets and maps, the number of rules in each chain, and the
// elements of every set and map but the affinity- sets (the kernel fills
// those from traffic). nil when they agree.
func (m *Mirror) Compare(ctx context.Context) error {
	var diffs []string
	realAll, err := m.Real.ListAll(ctx)
	if err != nil && !knftables.IsNotFound(err) {
		return err
	}
	shadowAll, _ := m.Shadow.ListAll(ctx)
	for _, typ := range []string{"chain", "set", "map"} {
		a, b := sortedCopy(realAll[typ]), sortedCopy(shadowAll[typ])
		if strings.Join(a, "\n") != strings.Join(b, "\n") {
			diffs = append(diffs, fmt.Sprintf("%ss: kernel %v, fake %v", typ, a, b))
		}
	}
	for _, c := range shadowAll["chain"] {
		kr, err := m.Real.ListRules(ctx, c)
		if err != nil {
			diffs = append(diffs, fmt.Sprintf("chain %s: %v", c, err))
			continue
		}
		sr, _ := m.Shadow.ListRules(ctx, c)
		if len(kr) != len(sr) {
			diffs = append(diffs, fmt.Sprintf("chain %s: kernel has %d rules, fake %d", c, len(kr), len(sr)))
		}
	}
	for _, typ := range []string{"set", "map"} {
		for _, name := range shadowAll[typ] {
			if strings.HasPrefix(name, PrefixAffinity) {
				continue
			}
			ke, err := m.Real.ListElements(ctx, typ, name)
			if err != nil {
				diffs = append(diffs, fmt.Sprintf("%s %s: %v", typ, name, err))
				continue
			}
			se, _ := m.Shadow.ListElements(ctx, typ, name)
			if a, b := elementText(ke), elementText(se); a != b {
				diffs = append(diffs, fmt.Sprintf("%s %s: kernel {%s}, fake {%s}", typ, name, a, b))
			}
		}
	}
	if len(diffs) > 0 {
		return fmt.Errorf("the kernel's table differs from the fake's:\n  %s", strings.Join(diffs, "\n  "))
	}
	return nil
}

func sortedCopy(l []string) []string {
	out := append([]string(nil), l...)
	sort.Strings(out)
	return out
}

func elementText(es []*knftables.Element) string {
	var out []string
	for _, e := range es {
		s := join(e.Key)
		if len(e.Value) > 0 {
			s += " : " + join(e.Value)
		}
		out = append(out, s)
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}
