package nftables

import (
	"context"
	"errors"

	"sigs.k8s.io/knftables"

	"github.com/proxysim/proxysim/sim"
	"github.com/proxysim/proxysim/sim/proxy"
)

// Backend returns a sim.Config.NewBackend that programs nft, tracing each
// transaction. Each restart builds a new proxier over the same table, as a
// restarted kube-proxy finds its old table: its first sync is full and
// reads the sets and maps back.
func Backend(cfg Config, nft knftables.Interface, keep func(*Proxier)) func(*sim.World) (proxy.Backend, error) {
	return func(w *sim.World) (proxy.Backend, error) {
		p := New(cfg, nft, w.Clock, w.TraceDataplane)
		if keep != nil {
			keep(p)
		}
		return p, nil
	}
}

// ErrInjected is the error of a transaction failed by Faults.
var ErrInjected = errors.New("injected transaction failure")

// Faults makes transactions fail on demand, in front of any
// knftables.Interface; reads pass through.
type Faults struct {
	knftables.Interface
	armed sim.ArmedFailures
}

// WithFaults wraps nft; nothing fails until FailNext is called.
func WithFaults(nft knftables.Interface) *Faults { return &Faults{Interface: nft} }

// FailNext makes the next n transactions fail without reaching the
// dataplane, as `nft -f` fails a whole transaction.
func (f *Faults) FailNext(n int) { f.armed.Add(n) }

func (f *Faults) Run(ctx context.Context, tx *knftables.Transaction) error {
	if f.armed.Take() {
		return ErrInjected
	}
	return f.Interface.Run(ctx, tx)
}

// runOps is Run for a transaction whose operations are known, passed on to
// a dataplane that can use them.
func (f *Faults) runOps(ctx context.Context, tx *knftables.Transaction, ops []op) error {
	if f.armed.Take() {
		return ErrInjected
	}
	if r, ok := f.Interface.(opsRunner); ok {
		return r.runOps(ctx, tx, ops)
	}
	return f.Interface.Run(ctx, tx)
}
