package netns

import (
	"context"
	"time"

	"sigs.k8s.io/knftables"

	"github.com/proxysim/proxysim/sim/iptables"
)

// KernelTime is the wall time a proxier's calls into the real kernel took,
// in two parts: writes (iptables-restore and the ensure calls; nft
// transactions) and listings (iptables-save; nft list). It measures, it
// models nothing: calibrate fits curves over it, and replay --dataplane
// netns prints it beside a profile's prediction.
type KernelTime struct {
	Write, List time.Duration
}

// Total is both parts.
func (k KernelTime) Total() time.Duration { return k.Write + k.List }

// kernelClock accumulates KernelTime; Take returns it and starts anew.
type kernelClock struct{ acc KernelTime }

// Take returns the time accumulated since the last Take.
func (c *kernelClock) Take() KernelTime {
	t := c.acc
	c.acc = KernelTime{}
	return t
}

func (c *kernelClock) time(list bool, f func()) {
	start := time.Now()
	f()
	d := time.Since(start)
	if list {
		c.acc.List += d
	} else {
		c.acc.Write += d
	}
}

// TimedIPTables is an iptables dataplane whose calls are timed.
type TimedIPTables struct {
	iptables.Dataplane
	kernelClock
}

var _ iptables.Dataplane = (*TimedIPTables)(nil)

func (t *TimedIPTables) Restore(payload string) (err error) {
	t.time(false, func() { err = t.Dataplane.Restore(payload) })
	return err
}

func (t *TimedIPTables) Save(table string) (out string, err error) {
	t.time(true, func() { out, err = t.Dataplane.Save(table) })
	return out, err
}

func (t *TimedIPTables) EnsureChain(table, chain string) (err error) {
	t.time(false, func() { err = t.Dataplane.EnsureChain(table, chain) })
	return err
}

func (t *TimedIPTables) EnsureRule(table, chain, rule string) (err error) {
	t.time(false, func() { err = t.Dataplane.EnsureRule(table, chain, rule) })
	return err
}

// TimedNFTables is a knftables interface whose transactions and listings
// are timed (Check and ListCounters, which no sync makes, are not).
type TimedNFTables struct {
	knftables.Interface
	kernelClock
}

var _ knftables.Interface = (*TimedNFTables)(nil)

func (t *TimedNFTables) Run(ctx context.Context, tx *knftables.Transaction) (err error) {
	t.time(false, func() { err = t.Interface.Run(ctx, tx) })
	return err
}

func (t *TimedNFTables) List(ctx context.Context, objectType string) (out []string, err error) {
	t.time(true, func() { out, err = t.Interface.List(ctx, objectType) })
	return out, err
}

func (t *TimedNFTables) ListAll(ctx context.Context) (out map[string][]string, err error) {
	t.time(true, func() { out, err = t.Interface.ListAll(ctx) })
	return out, err
}

func (t *TimedNFTables) ListRules(ctx context.Context, chain string) (out []*knftables.Rule, err error) {
	t.time(true, func() { out, err = t.Interface.ListRules(ctx, chain) })
	return out, err
}

func (t *TimedNFTables) ListElements(ctx context.Context, objectType, name string) (out []*knftables.Element, err error) {
	t.time(true, func() { out, err = t.Interface.ListElements(ctx, objectType, name) })
	return out, err
}

// syncTimes cuts a dataplane's timed calls into syncs by the proxiers' call
// pattern: an iptables sync ends with its one iptables-restore; an nftables
// sync lists the whole table once (ListAll) and ends with the transaction
// after it. A sync that failed before its last call is counted with the
// next.
type syncTimes struct {
	kernelClock
	listed bool
	syncs  []KernelTime
}

func (s *syncTimes) endSync() { s.syncs = append(s.syncs, s.Take()) }

// SyncKernelTimes is the kernel time of each sync so far, in order.
func (s *syncTimes) SyncKernelTimes() []KernelTime { return append([]KernelTime(nil), s.syncs...) }
