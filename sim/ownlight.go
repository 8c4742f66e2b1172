package sim

import (
	"fmt"

	"github.com/proxysim/proxysim/sim/proxy"
)

// A cluster's first node is the world's own proxy: the one every step and
// expectation talks to. When none of them looks at its dataplane, it need
// not have one. LightBackend keeps the world's proxy (proxier, trackers,
// runner, costs, samples, pod latencies) and replaces only what it
// programs: each sync's work is worked out as a light node's is, from the
// cluster's shared log of Service states, so a cost of the work prices it
// exactly as the mode's proxier would have. See docs/cluster.md, "The
// first node".

// LightBackend is Config.NewBackend for a world whose own proxy programs
// no dataplane. With lw (needed when Config.Cost prices the sync's work),
// each sync reports the work its mode's proxier would; without, only the
// sizes. A restart keeps the worker (a new proxier over the same
// dataplane). The world becomes a cluster, even before any AddNode.
func LightBackend(lw LightWorkFor) func(w *World) (proxy.Backend, error) {
	var b *ownLight
	return func(w *World) (proxy.Backend, error) {
		if b != nil {
			if b.w != w {
				return nil, fmt.Errorf("sim: one LightBackend serves one world")
			}
			if b.lw != nil {
				b.lw.w.Restart()
			}
			return b, nil
		}
		c := w.clusterOf()
		b = &ownLight{w: w, c: c}
		if lw != nil {
			worker, err := lw(w.cfg.NodeName, w.cfg.Zone)
			if err != nil {
				return nil, fmt.Errorf("sim: node %s: %w", w.cfg.NodeName, err)
			}
			b.lw = &lightWork{w: worker, applied: -1}
			c.own = b.lw
			c.keepVersions()
		}
		return b, nil
	}
}

// ownLight is the world's own proxy's backend under LightBackend.
type ownLight struct {
	w     *World
	c     *cluster
	lw    *lightWork
	work  SyncWork
	taken bool
}

// Sync works out the sync's work. The world's proxy has heard every event
// the cluster has (the cluster hears each right after it), so the sync
// applies the stream up to its head.
func (b *ownLight) Sync(st *proxy.SyncState) error {
	b.taken = false
	if b.lw == nil {
		return nil
	}
	c := b.c
	if err := c.startRef(); err != nil {
		return err
	}
	// As a light node's, a worker that cannot be exact keeps its error in
	// the world (LightWorkErr) rather than failing the sync.
	b.work = c.lightWorkAt(b.lw, c.head, b.w.cfg.NodeName, SyncWork{})
	b.taken = true
	return nil
}

// TakeSyncWork is WorkReporter's: the world fills in the sizes.
func (b *ownLight) TakeSyncWork() (SyncWork, bool) {
	if !b.taken {
		return SyncWork{}, false
	}
	b.taken = false
	return b.work, true
}

// Light reports whether the world's own proxy runs under LightBackend.
func (w *World) Light() bool {
	_, ok := w.proxy.backend.(*ownLight)
	return ok
}
