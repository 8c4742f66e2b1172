package netns

import (
	"context"
	"syscall"
	"time"

	"sigs.k8s.io/knftables"

	"github.com/proxysim/proxysim/sim/iptables"
)

// KernelTime is the CPU time (user and system) of the processes a
// proxier's calls into the real kernel ran (iptables-restore, iptables-save,
// iptables; nft), in two parts: writes (the restore and the ensure calls;
// nft transactions) and listings (iptables-save; nft list). The kernel's
// own work on a netlink message is done in the sending process, so it is
// in their system time. CPU time, not wall time: on a shared host the wall
// time measures the neighbours too; on an idle node the two are close.
// Wall is the wall time of the same calls, for the record. It measures, it
// models nothing: calibrate fits curves over it, and replay --dataplane
// netns --kernel-times prints it beside a profile's prediction.
type KernelTime struct {
	Write, List time.Duration
	Wall        time.Duration
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

// time runs f, one call that runs a child process and waits for it, and
// counts the CPU time the children this process waited for used meanwhile
// (getrusage RUSAGE_CHILDREN): the calls of one proxier run one at a time.
func (c *kernelClock) time(list bool, f func()) {
	before := childrenCPU()
	start := time.Now()
	f()
	c.acc.Wall += time.Since(start)
	d := childrenCPU() - before
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

// childrenCPU is the user and system time of this process's waited-for
// children so far.
func childrenCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
