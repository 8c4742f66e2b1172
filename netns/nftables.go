package netns

import (
	"context"
	"fmt"
	"strings"

	"sigs.k8s.io/knftables"
)

// NFTables is knftables' real interface (the `nft` binary) bound to one
// namespace: every call runs inside it, so that `nft` is executed there
// (a child process inherits its network namespace from the thread that
// starts it). It is what kube-proxy's nftables proxier programs, and what
// sim/nftables programs in production.
type NFTables struct {
	ns     *Namespace
	inner  knftables.Interface
	family knftables.Family
	table  string
}

var _ knftables.Interface = (*NFTables)(nil)

// NFTables returns the real knftables interface for table in family, in
// this namespace. It fails when `nft` is missing or too old (knftables.New
// checks both), or the namespace refuses an nft table.
func (n *Namespace) NFTables(family knftables.Family, table string) (*NFTables, error) {
	nft := &NFTables{ns: n, family: family, table: table}
	err := n.Do(func() error {
		var err error
		nft.inner, err = knftables.New(family, table)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("%s: nftables: %w", n.Name, err)
	}
	return nft, nil
}

func (t *NFTables) NewTransaction() *knftables.Transaction { return t.inner.NewTransaction() }

func (t *NFTables) Run(ctx context.Context, tx *knftables.Transaction) error {
	return t.ns.Do(func() error { return t.inner.Run(ctx, tx) })
}

func (t *NFTables) Check(ctx context.Context, tx *knftables.Transaction) error {
	return t.ns.Do(func() error { return t.inner.Check(ctx, tx) })
}

func (t *NFTables) List(ctx context.Context, objectType string) (out []string, err error) {
	err = t.ns.Do(func() error { out, err = t.inner.List(ctx, objectType); return err })
	return out, err
}

func (t *NFTables) ListAll(ctx context.Context) (out map[string][]string, err error) {
	err = t.ns.Do(func() error { out, err = t.inner.ListAll(ctx); return err })
	return out, err
}

func (t *NFTables) ListRules(ctx context.Context, chain string) (out []*knftables.Rule, err error) {
	err = t.ns.Do(func() error { out, err = t.inner.ListRules(ctx, chain); return err })
	return out, err
}

func (t *NFTables) ListElements(ctx context.Context, objectType, name string) (out []*knftables.Element, err error) {
	err = t.ns.Do(func() error { out, err = t.inner.ListElements(ctx, objectType, name); return err })
	return out, err
}

func (t *NFTables) ListCounters(ctx context.Context) (out []*knftables.Counter, err error) {
	err = t.ns.Do(func() error { out, err = t.inner.ListCounters(ctx); return err })
	return out, err
}

// ListTable is `nft list table FAMILY TABLE` run in the namespace: the
// table as the kernel prints it, for people to read.
func (t *NFTables) ListTable(family knftables.Family, table string) (string, error) {
	out, stderr, err := t.ns.runIn("nft", []string{"list", "table", string(family), table}, "")
	if err != nil {
		return "", fmt.Errorf("nft list table: %w: %s", err, strings.TrimSpace(stderr))
	}
	return out, nil
}

// Verify compares the table in the namespace with dump (an `nft -f`
// transaction that creates the whole table, such as knftables.Fake's
// Dump), by meaning: dump is loaded into a scratch namespace, both tables
// are listed by the same nft, and the listings are compared after the
// normalisations CompareNFTLists describes. An empty dump wants no table.
func (t *NFTables) Verify(dump string) error {
	got, err := t.ListTable(t.family, t.table)
	if err != nil {
		if dump == "" && strings.Contains(err.Error(), "No such file or directory") {
			return nil
		}
		return err
	}
	if dump == "" {
		return fmt.Errorf("the kernel holds table %s %s, the fake none", t.family, t.table)
	}
	scratch, err := Create("canon")
	if err != nil {
		return err
	}
	defer scratch.Close()
	want, err := (&NFTables{ns: scratch}).load(dump, t.family, t.table)
	if err != nil {
		return fmt.Errorf("the kernel refuses the fake's table: %w", err)
	}
	return CompareNFTLists(want, got)
}

// load runs `nft -f -` with text in the namespace, and lists the table.
func (t *NFTables) load(text string, family knftables.Family, table string) (string, error) {
	if _, stderr, err := t.ns.runIn("nft", []string{"-f", "-"}, text); err != nil {
		return "", fmt.Errorf("nft -f: %w: %s", err, strings.TrimSpace(stderr))
	}
	return t.ListTable(family, table)
}
