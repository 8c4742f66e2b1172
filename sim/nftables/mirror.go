package nftables

import (
	"context"
	"fmt"

	"sigs.k8s.io/knftables"
)

// Mirror is a knftables.Interface that programs a real table and keeps a
// knftables.Fake in step with it: every transaction runs on the real one
// first and, only if it succeeded, on the fake. Reads come from the real
// one, so the proxier sees what the kernel holds. The fake is what the
// tracer and the goldens read: `nft list table` prints rules in the
// kernel's own normalised words, and knftables lists no rule text. Whether
// the kernel's table means what the fake's does is the kernel's side to
// check (netns.NFTables.Verify lists both through the kernel).
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
