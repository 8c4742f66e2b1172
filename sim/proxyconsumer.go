package sim

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/proxysim/proxysim/sim/proxy"
	"github.com/proxysim/proxysim/sim/runner"
	"github.com/proxysim/proxysim/sim/trace"
)

// proxyConsumer is the node's service proxy as a consumer of the world:
// proxier (trackers, initialization gating), runner and backend, whatever
// dataplane the backend programs.
type proxyConsumer struct {
	w       *World
	proxier *proxy.Proxier
	runner  *runner.Runner
	backend proxy.Backend
	// work is what the latest sync did, for the cost of the run under way.
	work SyncWork
}

// newProxy builds a fresh proxy: backend, proxier and runner.
func (w *World) newProxy() (*proxyConsumer, error) {
	backend := w.cfg.Backend
	if w.cfg.NewBackend != nil {
		b, err := w.cfg.NewBackend(w)
		if err != nil {
			return nil, err
		}
		backend = b
	}
	if backend == nil {
		backend = &RecordingBackend{}
	}
	p := &proxyConsumer{w: w, backend: backend}
	w.prog.reset(w.Clock.Now())
	p.proxier = proxy.NewProxier(w.cfg.Family, w.cfg.NodeName, w.cfg.Zone, backend, w.cfg.Endpoints)
	r, err := runner.New(w.cfg.Runner, w.Clock, p.sync, &runnerTrace{w: w})
	if err != nil {
		return nil, err
	}
	p.runner = r
	p.proxier.SetSyncer(r)
	p.proxier.SetObserver(p)
	return p, nil
}

func (p *proxyConsumer) Name() string    { return "proxy" }
func (p *proxyConsumer) Kinds() []string { return []string{"Service", "EndpointSlice"} }

// Start starts the runner's loop, before the informers, as kube-proxy does.
func (p *proxyConsumer) Start() error {
	p.runner.StartVirtual(p.cost)
	return nil
}

func (p *proxyConsumer) Stop() {
	p.runner.Stop()
	if s, ok := p.backend.(interface{ Stop() }); ok {
		s.Stop()
	}
}

// sync is the runner's function: one sync of the proxier.
func (p *proxyConsumer) sync() error {
	if p != p.w.proxy {
		return fmt.Errorf("proxy was restarted")
	}
	if err := p.w.injectedSyncFailure(); err != nil {
		p.takeWork()
		return err
	}
	err := p.proxier.SyncProxyRules()
	p.takeWork()
	return err
}

// cost is the run's virtual duration, asked by the runner right after sync
// returned: the work is known by then.
func (p *proxyConsumer) cost() time.Duration {
	c := p.w.cfg.Cost
	if len(c.Runs) == 0 {
		// A model that prices the work may split it (kernel write,
		// listing, compute), for the report page.
		if sp, ok := c.Work.(CostSplitter); ok {
			if n := len(p.w.syncs); n > 0 && p.w.syncs[n-1].End < 0 {
				p.w.syncs[n-1].Split = sp.SplitCost(p.work)
			}
		}
	}
	return c.RunCost(p.w.runnerRuns, p.w.costFrom, p.work)
}

// takeWork records what the sync that just returned did on its sync record
// and, if asked, in the trace (run.work).
func (p *proxyConsumer) takeWork() {
	var work SyncWork
	if r, ok := p.backend.(WorkReporter); ok {
		if got, ok := r.TakeSyncWork(); ok {
			work = got
		}
	}
	work.ServicePorts, work.Endpoints = p.proxier.Size()
	p.work = work
	w := p.w
	if n := len(w.syncs); n > 0 && w.syncs[n-1].End < 0 {
		w.syncs[n-1].Work = work
		if w.cfg.TraceWork {
			w.Trace.Add(trace.Event{Kind: trace.Work, Run: w.syncs[n-1].N, Detail: work.String()})
		}
	}
}

func (p *proxyConsumer) OnAdd(kind string, obj runtime.Object) error {
	p.heard(kind, nil, obj)
	switch o := obj.(type) {
	case *v1.Service:
		p.proxier.OnServiceAdd(o)
	case *discovery.EndpointSlice:
		p.w.programmingSlice(nil, o, false)
		return p.proxier.OnEndpointSliceAdd(o)
	}
	return nil
}

func (p *proxyConsumer) OnUpdate(kind string, old, obj runtime.Object) error {
	p.heard(kind, old, obj)
	switch o := obj.(type) {
	case *v1.Service:
		p.proxier.OnServiceUpdate(old.(*v1.Service), o)
	case *discovery.EndpointSlice:
		p.w.programmingSlice(old, o, false)
		return p.proxier.OnEndpointSliceUpdate(old.(*discovery.EndpointSlice), o)
	}
	return nil
}

func (p *proxyConsumer) OnDelete(kind string, obj runtime.Object) error {
	p.heard(kind, nil, obj)
	switch o := obj.(type) {
	case *v1.Service:
		p.proxier.OnServiceDelete(o)
	case *discovery.EndpointSlice:
		p.w.programmingSlice(nil, o, true)
		return p.proxier.OnEndpointSliceDelete(o)
	}
	return nil
}

// ServiceTracked and SliceTracked are the proxier's Observer: the change
// metrics, set before the sync the change may start at once.
func (p *proxyConsumer) ServiceTracked(pending int) {
	if p.w.cfg.Metrics != nil {
		p.w.cfg.Metrics.ServiceChange(pending)
	}
}

func (p *proxyConsumer) SliceTracked(s *discovery.EndpointSlice, changed bool) {
	p.w.metricsSlice(s, changed)
}

// OnSynced marks an informer synced. Services come first, so the
// EndpointSlice notification is the second one, which syncs directly,
// outside the runner.
func (p *proxyConsumer) OnSynced(kind string) error {
	switch kind {
	case "Service":
		return p.proxier.OnServicesSynced()
	case "EndpointSlice":
		p.w.syncStarted("initial")
		err := p.proxier.OnEndpointSlicesSynced()
		p.takeWork()
		p.w.syncFinished(err)
	}
	return nil
}

// heard notes when the proxy heard of a real change, for LastChange.
func (p *proxyConsumer) heard(kind string, old, obj runtime.Object) {
	if old != nil && identical(old, obj) {
		return // resync, or a relist that found nothing new
	}
	m, ok := obj.(Object)
	if !ok {
		return
	}
	w := p.w
	key := w.names.key(kind, m.GetNamespace(), m.GetName())
	at, ok := w.written[key]
	if !ok {
		at = w.Now()
	}
	delete(w.written, key)
	w.lastChange[key] = change{at: at, syncsBefore: len(w.syncs)}
}

type change struct {
	at          time.Duration
	syncsBefore int
}

// LastChange reports the instant of the latest API write that changed an
// object ("Kind namespace/name") and how many syncs had started before the
// proxy heard of it, so that Syncs()[syncsBefore] is the first sync that
// could carry it.
func (w *World) LastChange(key string) (at time.Duration, syncsBefore int, ok bool) {
	c, ok := w.lastChange[key]
	return c.at, c.syncsBefore, ok
}

// SyncRecord is one sync of the proxy, as the world saw it.
type SyncRecord struct {
	N     int
	Why   string
	Start time.Duration
	End   time.Duration // -1 while running
	Err   string
	// Work is what the sync wrote to the dataplane and read back, as its
	// backend reported it (see SyncWork); known from the sync's start,
	// since a run computes and writes at once and then lasts its cost.
	Work SyncWork
	// Split is what the work-based part of the cost model (CostModel.Work)
	// made of this run's cost, when it can tell (a CostSplitter: a cost
	// profile's part); zero otherwise: a direct sync, a cost listed per
	// run, a model without one.
	Split CostSplit
}

// Syncs lists every sync so far: the initial direct one of each proxy start
// and every runner run.
func (w *World) Syncs() []SyncRecord { return append([]SyncRecord(nil), w.syncs...) }

// TraceDataplane records one dataplane operation of the world's proxier,
// as every mode's backend reports them.
func (w *World) TraceDataplane(op, detail string, err error) {
	e := trace.Event{Kind: trace.Dataplane, Op: op, Detail: detail}
	if err != nil {
		e.Err = err.Error()
	}
	w.Trace.Add(e)
}

// SyncsView is Syncs without the copy, for checks that read it after every
// event; the caller must not change it, nor keep it past the next event.
func (w *World) SyncsView() []SyncRecord { return w.syncs }

func (w *World) syncStarted(why string) {
	n := len(w.syncs) + 1
	w.syncs = append(w.syncs, SyncRecord{N: n, Why: why, Start: w.Now(), End: -1})
	w.Trace.Add(trace.Event{Kind: trace.Start, Why: why, Run: n})
	w.programmingStart(n)
	if w.cfg.Metrics != nil {
		w.cfg.Metrics.SyncStarted()
	}
}

func (w *World) syncFinished(err error) {
	r := &w.syncs[len(w.syncs)-1]
	r.End = w.Now()
	e := trace.Event{Kind: trace.End, Run: r.N}
	if err != nil {
		r.Err = err.Error()
		e.Err = r.Err
	}
	w.Trace.Add(e)
	before := len(w.prog.samples)
	w.programmingEnd(r.N, err)
	if w.cfg.Metrics != nil {
		var obs []time.Duration
		for _, s := range w.prog.samples[before:] {
			obs = append(obs, s.Value)
		}
		w.cfg.Metrics.SyncFinished(w.cfg.Start.Add(r.Start), w.cfg.Start.Add(r.End), err, obs, w.Backend())
	}
}

// runnerTrace records runner decisions.
type runnerTrace struct{ w *World }

func (t *runnerTrace) Requested(time.Time) {
	t.w.Trace.Add(trace.Event{Kind: trace.Request})
	if t.w.cfg.Metrics != nil {
		t.w.cfg.Metrics.SyncQueued(t.w.Clock.Now())
	}
}
func (t *runnerTrace) Deferred(_ time.Time, why runner.Reason, until time.Time) {
	e := trace.Event{Kind: trace.Defer, Why: string(why)}
	if !until.IsZero() {
		e.Until = t.w.Trace.At(until)
	}
	t.w.Trace.Add(e)
}
func (t *runnerTrace) Started(_ time.Time, why runner.Reason) {
	t.w.runnerRuns++
	t.w.syncStarted(string(why))
}
func (t *runnerTrace) Finished(_ time.Time, err error) {
	t.w.syncFinished(err)
	if len(t.w.directQueued) > 0 {
		// The runner's lock is held here: the waiting direct syncs run
		// right after, at the same instant.
		t.w.Clock.AfterFunc(0, t.w.runQueuedDirect)
	}
}
func (t *runnerTrace) Dropped(_ time.Time, why runner.Reason) {
	t.w.Trace.Add(trace.Event{Kind: trace.Drop, Why: string(why)})
}
