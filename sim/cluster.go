package sim

import (
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/proxysim/proxysim/sim/proxy"
	"github.com/proxysim/proxysim/sim/runner"
	"github.com/proxysim/proxysim/sim/sli"
	"github.com/proxysim/proxysim/sim/trace"
)

// A world's other nodes: every node of a cluster runs its own kube-proxy
// on the world's clock, hearing what the world's own proxy hears.
//
// Each node's kube-proxy is what a world of its own would run for it: the
// same events at the same instants (later by the node's watch delay), its
// own runner, sync costs, failures and restarts. What a node needs to
// decide when it syncs is small: its runner, the Service changes pending
// (kube-proxy asks for a sync while any is), the trigger times pending,
// and the size of the state a sync applies. That last depends only on how
// many events the node has heard, since a sync applies all of them; one
// reference proxier, applying every event at once, gives it for every
// node. So a node that nobody looks inside (a light node) holds no
// Service or EndpointSlice state at all.
//
// A node an expectation or a sample looks inside is materialised: a
// follower world, a World without an API server of its own whose proxy
// (proxier, runner, backend, dataplane) hears the events the world's
// proxy hears. It is the world's own proxy code, so it is what a world of
// its own gives.

// NodeSpec describes one more node's kube-proxy.
type NodeSpec struct {
	Name string
	Zone string
	// Runner and Cost are the node's, as Config's (Cost's Speed and
	// Jitter being the node's variation).
	Runner runner.Config
	Cost   CostModel
	// WatchDelay delays every event the API server sends this node's
	// informers by this long, in order (0: none).
	WatchDelay time.Duration
	// Endpoints tunes endpoint conversion (a materialised node's).
	Endpoints proxy.EndpointSliceTrackerOptions
	// NewBackend, if set, materialises the node: a whole proxier
	// programs the backend it builds, with the follower world as w.
	NewBackend func(w *World) (proxy.Backend, error)
	// Keep keeps a light node's every sync record, sample and pod latency
	// (Syncs, ProgrammingSamples, PodLatency) rather than counts alone. A
	// materialised node keeps them all anyway.
	Keep bool
	// LightWork, if set, computes a light node's sync work as its mode's
	// proxier would report it (see LightWorker): what a cost of the sync's
	// work (Cost.Work) needs on a light node.
	LightWork LightWorkFor
	// SLI, if set, is where a light node's network_programming_duration
	// observations go as they happen (folded into its scrapes), instead of
	// Observations keeping each: what lets thousands of nodes run for
	// hours. A materialised node keeps its own.
	SLI *sli.Recorder
}

// Node is one more node's kube-proxy in a world.
type Node struct {
	c    *cluster
	spec NodeSpec
	fw   *World // the follower world of a materialised node

	// A light node's proxy: see lightSync.
	runner      *runner.Runner
	services    *proxy.ServiceChangeTracker
	initialized bool
	heard       int       // stream events heard
	start       time.Time // when its proxy was built: older trigger times are not observed
	// The trigger times pending are those of the events heard from
	// pendFrom on (see cluster.triggers); the sync under way took those of
	// [takenFrom, takenTo).
	pendFrom, takenFrom, takenTo int
	gen                          int // proxy generation: runs of a replaced runner fail
	size                         [2]int
	runnerRuns                   int
	costFrom                     int
	failSyncs                    int
	cur                          SyncRecord // the sync under way (End -1)
	running                      bool
	// The pod changes its syncs carried: every change logged up to
	// seqDone that the slices showed by the event heardDone (those of its
	// last successful sync's start; see carried). seqRun and heardRun are
	// the sync under way's.
	seqDone, seqRun     int64
	heardDone, heardRun int
	// irregular are the changes whose slices stopped showing them before
	// this node carried them (see podState.spans): each is carried by the
	// first successful sync whose start shows it, as the world's proxy
	// does, which four numbers cannot say.
	irregular []*podState
	// lw computes its syncs' work (NodeSpec.LightWork).
	lw *lightWork

	stats    NodeStats
	syncs    []SyncRecord
	samples  []ProgrammingSample // with Keep
	obs      []Observation
	podLat   map[string]time.Duration // with Keep
	podVals  []time.Duration          // with Keep
	restarts []time.Duration
}

// Observation is one network_programming_duration observation without
// its Service: what every node keeps for the SLI.
type Observation struct {
	At, Value time.Duration
}

// NodeStats are what a node's kube-proxy did, kept for every node.
type NodeStats struct {
	Syncs, FailedSyncs int
	// Busy is the sum of the syncs' durations: the CPU time of syncing.
	Busy time.Duration
	// Samples counts network_programming_duration observations; Worst is
	// the largest, WorstPod the largest true pod latency.
	Samples         int
	Worst, WorstPod time.Duration
}

// cluster is a world's other nodes and what they share.
type cluster struct {
	w       *World
	nodes   []*Node
	byName  map[string]*Node
	started bool
	// refStarted: the reference proxier has the listing (startRef).
	refStarted bool
	// own is the world's own proxy's work when it runs light
	// (LightBackend), nil otherwise.
	own *lightWork

	// ref applies every event the world's proxy hears at once: the size
	// of the state after any number of events.
	ref     *proxy.Proxier
	stream  []streamEvent // events from base on
	base    int
	head    int    // events so far
	initial [2]int // the size before any

	// Pod readiness as the slices heard show it (programming.view's rule),
	// and each pod's latest readiness change.
	watched bool
	view    map[string]int
	latest  map[string]*podState
	podLog  []podSlot // changes in order, from podBase on
	podBase int64
	podSeq  int64
	// visLog holds the changes in the order the slices showed them (their
	// visible, which only grows), from visBase on.
	visLog  []podSlot
	visBase int
	carry   []podSlot // Node.carried's list, reused: one node at a time
	// carryAt is Node.carriedAt's list for the bounds carryKey (if
	// carryMemo).
	carryAt   []atCount
	carryKey  carryKey
	carryMemo bool
	// triggers are the stream's events that add or drop trigger times
	// (kube-proxy's checkoutTriggerTimes lists), from stream position
	// trigBase on, in order; taken is Node.takenTriggers' list, reused.
	triggers []streamTrigger
	trigBase int
	taken    []uint64
	// svcKeys are the trigger lists' Services, each ranked in the order
	// of their names (ranked false: a Service came since ranking).
	svcKeys map[string]*svcKey
	ranked  bool
	trimAt  int      // the logs' size above which trimPods looks again
	touched []string // pods whose view count the event being applied changed
	// Every Service's states over the stream, for the light nodes' work
	// (versions: some node has a LightWork; see lightwork.go).
	versions               bool
	svcLog                 map[types.NamespacedName][]*ServiceState
	largeEps, initialLarge int
	versionsTrimmedAt      int
	// frontends are the Services' frontends at the head and their holder;
	// sharedFrontend the first held twice (LightSync.SharedFrontend).
	frontends      map[string]types.NamespacedName
	sharedFrontend string
	lightErr       error // LightWorkErr
	// podLat holds the light nodes' pod latencies (8 bytes each: nearly
	// every one is distinct).
	podLat sli.Exact
	// onSync is told of each light node's sync as it ends (OnNodeSync).
	onSync func(n *Node, r SyncRecord)
}

// streamEvent is one event the world's proxy heard, with what every node
// makes of it worked out once.
type streamEvent struct {
	ev  informerEvent
	svc types.NamespacedName // a Service's
	// prev and cur are a Service event's two states as ServicePorts;
	// same says the object did not change (an informer's resync).
	prev, cur proxy.ServicePortMap
	same      bool
	// A slice event: whether it changes what a proxy has pending, its
	// Service ("namespace/name"; "" when it has no trigger bookkeeping),
	// and its trigger time.
	sliceChanged bool
	svcKey       string
	remove       bool
	trigger      time.Time
	size         [2]int // the reference's size after it
	// svcName is the Service a Service or EndpointSlice event is about;
	// largeEps the endpoints of every Service port after it.
	svcName  types.NamespacedName
	largeEps int
}

// streamTrigger is a slice event that adds its trigger time to its
// Service's pending list, or (remove) drops the list.
type streamTrigger struct {
	at      int // its stream position
	svc     *svcKey
	trigger time.Time
	remove  bool
}

// svcKey is a Service's name in a trigger list ("namespace/name") and its
// rank among the names: a sync observes its lists by name, and thousands
// of nodes sort what they took.
type svcKey struct {
	name string
	rank int
}

// svcKeyOf is the ranked key for a Service's name.
func (c *cluster) svcKeyOf(name string) *svcKey {
	k := c.svcKeys[name]
	if k == nil {
		if c.svcKeys == nil {
			c.svcKeys = map[string]*svcKey{}
		}
		k = &svcKey{name: name}
		c.svcKeys[name] = k
		c.ranked = false
	}
	return k
}

// rank ranks the keys by name once a Service came since.
func (c *cluster) rank() {
	if c.ranked {
		return
	}
	keys := make([]*svcKey, 0, len(c.svcKeys))
	for _, k := range c.svcKeys {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b *svcKey) int { return strings.Compare(a.name, b.name) })
	for i, k := range keys {
		k.rank = i
	}
	c.ranked = true
}

type podState struct {
	key     string
	seq     int64
	at      time.Duration
	ready   bool
	visible int  // stream events after which the slices show it; -1 until
	stale   bool // a later change of the pod came: this one is not carried
	// spans are the stream events after which the slices stopped showing
	// the change, then showed it again, and so on, after visible: rare (a
	// Service's selector or the Service itself gone meanwhile).
	spans []int
	vis   int // its place in visLog (from visBase), -1 before
}

// podSlot is a change's place in the cluster's logs, with a copy of what
// Node.carried reads: every node's every sync walks the logs, and reading
// each change through its pointer was most of that walk at 5,000 nodes.
// refreshSlots keeps the copies the change's.
type podSlot struct {
	p       *podState
	at      time.Duration
	seq     int64
	visible int
	// off: stale, or followed by each node (spans): not carried through
	// the logs.
	off bool
}

func slotOf(p *podState) podSlot {
	return podSlot{p: p, at: p.at, seq: p.seq, visible: p.visible, off: p.stale || len(p.spans) > 0}
}

// refreshSlots copies a change's state into its slots in the logs.
func (c *cluster) refreshSlots(p *podState) {
	if i := p.seq - 1 - c.podBase; i >= 0 && i < int64(len(c.podLog)) {
		c.podLog[i] = slotOf(p)
	}
	if i := p.vis - c.visBase; p.vis >= 0 && i >= 0 && i < len(c.visLog) {
		c.visLog[i] = slotOf(p)
	}
}

// shows says whether the slices a node has heard up to stream event h
// show the change.
func (p *podState) shows(h int) bool {
	if p.visible < 0 || h < p.visible {
		return false
	}
	on := true
	for _, x := range p.spans {
		if h < x {
			break
		}
		on = !on
	}
	return on
}

// AddNode adds a node's kube-proxy to the world, before Start: it starts
// with the world's proxy.
func (w *World) AddNode(spec NodeSpec) (*Node, error) {
	if w.started || w.rv > 0 {
		return nil, fmt.Errorf("sim: AddNode after the world's first write or Start: a node hears every write")
	}
	if spec.Name == "" || spec.Name == w.cfg.NodeName {
		return nil, fmt.Errorf("sim: node name %q empty or the world's own", spec.Name)
	}
	c := w.clusterOf()
	if c.byName[spec.Name] != nil {
		return nil, fmt.Errorf("sim: node %q added twice", spec.Name)
	}
	if spec.Runner.Generation == 0 {
		spec.Runner.Generation = runner.Cooldown
	}
	if spec.Runner.MaxInterval == 0 {
		spec.Runner.MaxInterval = 30 * time.Second
	}
	if err := spec.Runner.Validate(); err != nil {
		return nil, fmt.Errorf("sim: node %s: %w", spec.Name, err)
	}
	n := &Node{c: c, spec: spec}
	if spec.NewBackend != nil {
		fcfg := Config{Runner: spec.Runner, NodeName: spec.Name, Zone: spec.Zone, Family: w.cfg.Family,
			Cost: spec.Cost, ResyncPeriod: -1, NewBackend: spec.NewBackend, Start: w.cfg.Start, Clock: w.Clock,
			Endpoints: spec.Endpoints}
		fw, err := NewWorld(fcfg)
		if err != nil {
			return nil, fmt.Errorf("sim: node %s: %w", spec.Name, err)
		}
		fw.started = true
		n.fw = fw
	} else if spec.LightWork != nil {
		lw, err := spec.LightWork(spec.Name, spec.Zone)
		if err != nil {
			return nil, fmt.Errorf("sim: node %s: %w", spec.Name, err)
		}
		n.lw = &lightWork{w: lw, applied: -1}
		c.keepVersions()
	} else if spec.Cost.Work != nil {
		return nil, fmt.Errorf("sim: node %s: a cost of the sync's work needs the node's work: its mode computes none for a light node (NodeSpec.LightWork), so it must be materialised (NewBackend)", spec.Name)
	}
	if spec.Keep {
		n.podLat = map[string]time.Duration{}
	}
	c.nodes = append(c.nodes, n)
	c.byName[spec.Name] = n
	return n, nil
}

// clusterOf is the world's cluster, made on first use.
func (w *World) clusterOf() *cluster {
	if w.cluster == nil {
		w.cluster = &cluster{w: w, byName: map[string]*Node{}, view: map[string]int{}, latest: map[string]*podState{}}
		w.cluster.ref = proxy.NewProxier(w.cfg.Family, "", "", refBackend{w.cluster}, proxy.EndpointSliceTrackerOptions{})
	}
	return w.cluster
}

// keepVersions has the cluster log every Service's states: a light
// worker reads them.
func (c *cluster) keepVersions() {
	if !c.versions {
		c.versions, c.svcLog = true, map[types.NamespacedName][]*ServiceState{}
	}
}

// OnNodeSync has f told of each light node's sync as it ends, failed or
// not, so that an observer (the report page's heat map) can sum sync
// activity over time without Keep holding every record. A materialised
// node's syncs are its Syncs. Call it after AddNode; without nodes it does
// nothing.
func (w *World) OnNodeSync(f func(n *Node, r SyncRecord)) {
	if w.cluster != nil {
		w.cluster.onSync = f
	}
}

// Nodes lists the world's other nodes in the order they were added.
func (w *World) Nodes() []*Node {
	if w.cluster == nil {
		return nil
	}
	return w.cluster.nodes
}

// Node finds another node by name.
func (w *World) Node(name string) (*Node, bool) {
	if w.cluster == nil {
		return nil, false
	}
	n, ok := w.cluster.byName[name]
	return n, ok
}

// refBackend programs nothing: the reference proxier only counts, and
// logs the Services' states for light nodes' work.
type refBackend struct{ c *cluster }

func (b refBackend) Sync(st *proxy.SyncState) error {
	b.c.recordVersions(st)
	return nil
}

// Name is the node's name.
func (n *Node) Name() string { return n.spec.Name }

// Spec is the node's description.
func (n *Node) Spec() NodeSpec { return n.spec }

// Materialised reports whether the node has a whole proxier and dataplane.
func (n *Node) Materialised() bool { return n.fw != nil }

// Follower is a materialised node's world (its trace, backend and
// samples); nil for a light node.
func (n *Node) Follower() *World { return n.fw }

// Syncs lists the node's syncs: a materialised node's always, a light
// node's if it keeps them (NodeSpec.Keep).
func (n *Node) Syncs() []SyncRecord {
	if n.fw != nil {
		return n.fw.Syncs()
	}
	return append([]SyncRecord(nil), n.syncs...)
}

// ProgrammingSamples lists the node's network_programming_duration
// observations (a light node's only if it keeps them).
func (n *Node) ProgrammingSamples() []ProgrammingSample {
	if n.fw != nil {
		return n.fw.ProgrammingSamples()
	}
	return n.samples
}

// Observations lists the instants and values of the node's samples,
// kept for every node but a light one recording them (NodeSpec.SLI):
// what the SLI pools.
func (n *Node) Observations() []Observation {
	if n.fw != nil {
		return n.fw.Observations()
	}
	return n.obs
}

// Observations is Node.Observations for the world's own proxy.
func (w *World) Observations() []Observation {
	out := make([]Observation, len(w.prog.samples))
	for i, p := range w.prog.samples {
		out[i] = Observation{At: p.At, Value: p.Value}
	}
	return out
}

// PodLatency is World.PodLatency for the node (a light node's only if it
// keeps them).
func (n *Node) PodLatency(key string) (time.Duration, bool) {
	if n.fw != nil {
		return n.fw.PodLatency(key)
	}
	d, ok := n.podLat[key]
	return d, ok
}

// PodLatencies lists every true pod latency the node measured, in the
// order its syncs measured them (a light node's only if it keeps them).
func (n *Node) PodLatencies() []time.Duration {
	if n.fw != nil {
		return n.fw.PodLatencies()
	}
	return n.podVals
}

// PodLatencyQuantile is the exact q-quantile of the true pod latencies
// measured by the world's proxy and every node (the smallest with at
// least q of them at or below it), and how many there are.
func (w *World) PodLatencyQuantile(q float64) (time.Duration, int64) {
	var own sli.Exact
	for _, d := range w.PodLatencies() {
		own.AddDuration(d)
	}
	if w.cluster == nil {
		return sli.DurationQuantile(q, &own)
	}
	for _, n := range w.cluster.nodes {
		if n.fw != nil {
			for _, d := range n.fw.PodLatencies() {
				own.AddDuration(d)
			}
		}
	}
	return sli.DurationQuantile(q, &own, &w.cluster.podLat)
}

// PodLatencySet is the true pod latencies PodLatencyQuantile takes its
// quantiles of, as one set (added with AddDuration): the world's own
// proxy's only if own, then every other node's. A shard of a cluster
// hands on its part with it.
func (w *World) PodLatencySet(own bool) *sli.Exact {
	out := &sli.Exact{}
	if own {
		for _, d := range w.PodLatencies() {
			out.AddDuration(d)
		}
	}
	if w.cluster == nil {
		return out
	}
	for _, n := range w.cluster.nodes {
		if n.fw != nil {
			for _, d := range n.fw.PodLatencies() {
				out.AddDuration(d)
			}
		}
	}
	out.Merge(&w.cluster.podLat)
	return out
}

// Restarts lists the instants the node's kube-proxy restarted.
func (n *Node) Restarts() []time.Duration { return n.restarts }

// Stats sums up what the node's kube-proxy did.
func (n *Node) Stats() NodeStats {
	if n.fw != nil {
		return n.fw.Stats()
	}
	return n.stats
}

// Stats sums up what the world's proxy did, as Node.Stats does a node's.
func (w *World) Stats() NodeStats {
	var s NodeStats
	for _, r := range w.syncs {
		s.Syncs++
		if r.End < 0 {
			continue
		}
		if r.Err != "" {
			s.FailedSyncs++
		}
		s.Busy += r.End - r.Start
	}
	for _, p := range w.prog.samples {
		s.Samples++
		s.Worst = max(s.Worst, p.Value)
	}
	for _, d := range w.PodLatencies() {
		s.WorstPod = max(s.WorstPod, d)
	}
	return s
}

// FailSyncs is World.FailSyncs for the node.
func (n *Node) FailSyncs(k int) {
	if n.fw != nil {
		n.fw.FailSyncs(k)
		return
	}
	n.failSyncs += max(k, 0)
}

// Restart restarts the node's kube-proxy, as World.Restart does the
// world's: it lists what its informers would now and syncs once.
func (n *Node) Restart() error {
	if !n.c.started {
		return fmt.Errorf("node %s: the world has not started", n.spec.Name)
	}
	n.restarts = append(n.restarts, n.c.w.Now())
	if n.spec.SLI != nil && n.fw == nil {
		n.spec.SLI.Restart(n.c.w.Now())
	}
	if n.fw != nil {
		fw := n.fw
		fw.Trace.Add(trace.Event{Kind: trace.Note, Detail: "proxy restart"})
		fw.stopSub(fw.psub)
		p, err := fw.newProxy()
		if err != nil {
			return err
		}
		fw.proxy = p
		fw.psub.c = p
		n.heard = n.c.head
		return fw.followStart(n.c.listing())
	}
	n.runner.Stop()
	if n.running {
		// The run under way never ends, as the world's own does not: its
		// record stays open and what it carried is lost.
		if n.spec.Keep {
			n.syncs = append(n.syncs, n.cur)
		}
		n.running = false
		n.dropIrregular()
		n.seqDone, n.heardDone = n.seqRun, n.heardRun
	}
	n.gen++
	n.heard = n.c.head
	if n.lw != nil {
		n.lw.w.Restart()
	}
	return n.lightStart()
}

// PodLatencies lists the latency of every pod readiness change the
// world's proxy programmed, in the order its syncs did (each sync's by pod
// name).
func (w *World) PodLatencies() []time.Duration { return w.prog.measured }

// listing is what a proxy starting now lists: every object the world's
// proxy holds, as informers' initial adds in their canonical order.
func (c *cluster) listing() []informerEvent {
	var evs []informerEvent
	if c.w.psub.inst != nil {
		for _, ev := range c.w.psub.inst.snapshot(false) {
			evs = append(evs, informerEvent{kind: ev.kind, op: "add", obj: ev.obj})
		}
	}
	return evs
}

// start starts every node, right after the world's proxy started.
func (c *cluster) start() error {
	if err := c.startRef(); err != nil {
		return err
	}
	c.started = true
	var list []informerEvent
	for _, n := range c.nodes {
		if n.fw != nil {
			if list == nil {
				list = c.listing()
			}
			if err := n.fw.followStart(list); err != nil {
				return fmt.Errorf("node %s: %w", n.spec.Name, err)
			}
			continue
		}
		if err := n.lightStart(); err != nil {
			return fmt.Errorf("node %s: %w", n.spec.Name, err)
		}
	}
	return nil
}

// startRef has the reference proxier apply the world's listing and takes
// the starting state from it, once: when the world's proxy has listed,
// before its first sync (which a light first node works out from it).
func (c *cluster) startRef() error {
	if c.refStarted {
		return nil
	}
	c.refStarted = true
	if err := c.ref.OnServicesSynced(); err != nil {
		return err
	}
	if err := c.ref.OnEndpointSlicesSynced(); err != nil {
		return err
	}
	sp, ep := c.ref.Size()
	c.initial = [2]int{sp, ep}
	c.initialLarge = c.largeEps
	return nil
}

// followStart starts a follower world's proxy as startSub starts a
// world's, with the listing given instead of its own informers'.
func (w *World) followStart(list []informerEvent) error {
	s := w.psub
	if err := s.c.(Lifecycle).Start(); err != nil {
		return err
	}
	for _, ev := range list {
		w.pending = append(w.pending, delivery{sub: s, ev: ev})
	}
	if err := w.drain(); err != nil {
		return err
	}
	for _, k := range s.kinds {
		w.Trace.Add(trace.Event{Kind: trace.Synced, Object: k.name})
		if err := s.c.OnSynced(k.name); err != nil {
			return err
		}
	}
	return nil
}

// follow hands a follower world's proxy one event.
func (w *World) follow(ev informerEvent) {
	w.pending = append(w.pending, delivery{sub: w.psub, ev: ev})
	w.keep(w.drain())
}

// take and tell take an event the world's proxy hears. During the
// world's own start (listing) only the starting state is built; a
// restart's listing is the world's proxy's alone.
//
// It comes in two parts. take applies the event to the cluster's state
// before the world's proxy handles it, so that a sync the handler starts
// at once (a light first node's, see LightBackend) finds it in the
// stream; tell, once the handler returned, has the nodes hear it, as they
// always have, after the world's proxy. take reports whether there is
// anything to tell.
func (c *cluster) take(ev informerEvent, listing bool) bool {
	if listing {
		if !c.started {
			c.apply(ev)
			c.viewChanged()
		}
		return false
	}
	se := c.apply(ev)
	c.head++
	se.size = c.sizeNow()
	se.largeEps = c.largeEps
	c.stream = append(c.stream, se)
	if se.svcKey != "" && (se.remove || !se.trigger.IsZero()) {
		c.triggers = append(c.triggers, streamTrigger{at: c.head - 1, svc: c.svcKeyOf(se.svcKey), trigger: se.trigger, remove: se.remove})
	}
	c.viewChanged()
	return true
}

// tell has every node hear the stream's latest event (take's).
func (c *cluster) tell() {
	idx := c.head - 1
	for _, n := range c.nodes {
		if n.spec.WatchDelay > 0 {
			c.w.Clock.AfterFunc(n.spec.WatchDelay, func() { n.hear(idx) })
			continue
		}
		n.hear(idx)
	}
	c.trim()
	c.trimVersions()
}

func (c *cluster) sizeNow() [2]int {
	if err := c.ref.SyncProxyRules(); err != nil {
		c.w.keep(err)
	}
	sp, ep := c.ref.Size()
	return [2]int{sp, ep}
}

// sizeAt is the state's size after k events.
func (c *cluster) sizeAt(k int) [2]int {
	if k == 0 {
		return c.initial
	}
	return c.stream[k-1-c.base].size
}

// trim forgets the events every node has heard, but the last (sizeAt
// reads it).
func (c *cluster) trim() {
	low, tlow := c.head, c.head
	for _, n := range c.nodes {
		low = min(low, n.heard)
		if n.fw == nil {
			tlow = min(tlow, n.pendFrom, n.takenFrom)
		}
	}
	low = c.lowestApplied(low)
	if drop := low - 1 - c.base; drop > 64 && drop*2 > len(c.stream) {
		c.stream = slices.Clone(c.stream[drop:])
		c.base += drop
	}
	if drop := c.triggerAt(tlow); drop > 64 && drop*2 > len(c.triggers) {
		c.triggers = slices.Clone(c.triggers[drop:])
		c.trigBase += drop
	}
}

// triggerAt is the index in triggers of the first at stream position h
// or later.
func (c *cluster) triggerAt(h int) int {
	i, _ := slices.BinarySearchFunc(c.triggers, h, func(t streamTrigger, h int) int { return t.at - h })
	return i
}

// apply feeds the reference proxier and works out the event's meaning.
func (c *cluster) apply(ev informerEvent) streamEvent {
	se := streamEvent{ev: ev}
	obj, old := asObject(ev.obj), asObject(ev.old)
	same := ev.op == "update" && identical(ev.old, ev.obj)
	family := c.w.cfg.Family
	switch o := obj.(type) {
	case *v1.Service:
		se.svc = types.NamespacedName{Namespace: o.Namespace, Name: o.Name}
		se.svcName = se.svc
		switch ev.op {
		case "add":
			se.cur = proxy.ServicePorts(o, family)
			c.ref.OnServiceAdd(o)
		case "update":
			se.prev, se.cur = proxy.ServicePorts(old.(*v1.Service), family), proxy.ServicePorts(o, family)
			if same {
				se.prev, se.same = se.cur, true
			}
			c.ref.OnServiceUpdate(old.(*v1.Service), o)
		case "delete":
			se.prev = proxy.ServicePorts(o, family)
			c.ref.OnServiceDelete(o)
		}
	case *discovery.EndpointSlice:
		var err error
		se.remove = ev.op == "delete"
		switch ev.op {
		case "add":
			err = c.ref.OnEndpointSliceAdd(o)
		case "update":
			err = c.ref.OnEndpointSliceUpdate(old.(*discovery.EndpointSlice), o)
		case "delete":
			err = c.ref.OnEndpointSliceDelete(o)
		}
		se.sliceChanged = err == nil && c.ref.LastSliceChanged()
		if name := o.Labels[discovery.LabelServiceName]; name != "" && o.Name != "" {
			se.svcName = types.NamespacedName{Namespace: o.Namespace, Name: name}
		}
		if string(o.AddressType) != string(family) {
			break
		}
		if c.watched {
			if os, ok := old.(*discovery.EndpointSlice); ok {
				c.count(os, -1)
			} else if se.remove {
				c.count(o, -1)
			}
			if !se.remove {
				c.count(o, 1)
			}
		}
		// programmingSlice's rules, the proxy's start aside.
		svc := o.Labels[discovery.LabelServiceName]
		if svc == "" || o.Name == "" || same {
			break
		}
		se.svcKey = o.Namespace + "/" + svc
		if se.remove {
			break
		}
		if ann, ok := o.Annotations[v1.EndpointsLastChangeTriggerTime]; ok {
			if t, err := time.Parse(time.RFC3339Nano, ann); err == nil {
				se.trigger = t
			}
		}
	}
	return se
}

func (c *cluster) count(s *discovery.EndpointSlice, d int) {
	for i := range s.Endpoints {
		e := &s.Endpoints[i]
		if e.TargetRef == nil || e.TargetRef.Kind != "Pod" || (e.Conditions.Ready != nil && !*e.Conditions.Ready) {
			continue
		}
		k := e.TargetRef.Namespace + "/" + e.TargetRef.Name
		if c.view[k] += d; c.view[k] == 0 {
			delete(c.view, k)
		}
		c.touched = append(c.touched, k)
	}
}

// viewChanged marks visible the pod changes the slices now show.
func (c *cluster) viewChanged() {
	for _, k := range c.touched {
		c.checkVisible(k)
	}
	c.touched = c.touched[:0]
}

func (c *cluster) checkVisible(key string) {
	p := c.latest[key]
	if p == nil {
		return
	}
	shows := (c.view[key] > 0) == p.ready
	switch {
	case p.visible < 0:
		if shows {
			p.visible = c.head
			p.vis = c.visBase + len(c.visLog)
			c.visLog = append(c.visLog, slotOf(p))
			c.refreshSlots(p)
		}
	case shows != (len(p.spans)%2 == 0):
		if len(p.spans) == 0 {
			// No longer followed by the logs' bounds: each light node that
			// has not carried it yet follows it itself.
			for _, n := range c.nodes {
				if n.fw == nil && (p.seq > n.seqDone || p.visible > n.heardDone) {
					n.irregular = append(n.irregular, p)
				}
			}
		}
		p.spans = append(p.spans, c.head)
		c.refreshSlots(p)
	}
}

// podWrite follows a pod write as programmingPod does.
func (c *cluster) podWrite(cur, obj any, deleted bool) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	c.watched = true
	ready := !deleted && podServes(pod)
	was := false
	if p, ok := cur.(*v1.Pod); ok {
		was = podServes(p)
	}
	if ready == was && cur != nil {
		return
	}
	if cur == nil && !ready {
		return
	}
	key := pod.Namespace + "/" + pod.Name
	c.podSeq++
	if p := c.latest[key]; p != nil {
		p.stale = true
		c.refreshSlots(p)
	}
	st := &podState{key: key, seq: c.podSeq, at: c.w.Now(), ready: ready, visible: -1, vis: -1}
	c.latest[key] = st
	c.podLog = append(c.podLog, slotOf(st))
	c.checkVisible(key)
	c.trimPods()
}

// trimPods lets go of the changes every node is done with: those logged
// up to every node's seqDone, and those shown by every node's heardDone
// (see carried).
//
// It walks every node, so it looks only once the logs have grown by half
// since it last did: a node that never syncs keeps the logs from
// shrinking, and a walk per pod write would cost O(nodes) each.
func (c *cluster) trimPods() {
	if size := len(c.podLog) + len(c.visLog); size <= max(2048, c.trimAt) {
		return
	}
	defer func() { c.trimAt = (len(c.podLog) + len(c.visLog)) * 3 / 2 }()
	seq, heard := c.podSeq, c.head
	for _, n := range c.nodes {
		seq, heard = min(seq, n.seqDone), min(heard, n.heardDone)
	}
	if drop := seq - c.podBase; drop > 0 && drop*2 > int64(len(c.podLog)) {
		c.podLog = slices.Clone(c.podLog[drop:])
		c.podBase += drop
	}
	drop, _ := slices.BinarySearchFunc(c.visLog, heard+1, func(p podSlot, v int) int { return p.visible - v })
	if drop*2 > len(c.visLog) {
		c.visLog = slices.Clone(c.visLog[drop:])
		c.visBase += drop
	}
}

// hear hands a node the stream's event idx.
func (n *Node) hear(idx int) {
	if idx < n.heard {
		return // listed since: a restart's informers start after it
	}
	n.heard = idx + 1
	se := &n.c.stream[idx-n.c.base]
	if n.fw != nil {
		n.fw.follow(se.ev)
		return
	}
	if !n.initialized {
		return
	}
	if se.ev.kind.name == "Service" {
		if se.same {
			// The tracker's Update with a state equal to the one it last
			// heard for the Service changes nothing it holds: only whether
			// anything is pending asks for a sync (every Service, at every
			// resync, on every node).
			if n.services.Pending() > 0 {
				n.runner.Run()
			}
			return
		}
		if n.services.UpdatePorts(se.svc, se.prev, se.cur) {
			n.runner.Run()
		}
		return
	}
	if se.sliceChanged {
		n.runner.Run()
	}
}

// lightStart builds and starts a light node's proxy: a new runner and
// trackers, the listing (which leaves nothing pending once the initial
// sync took it), then the initial direct sync.
func (n *Node) lightStart() error {
	w := n.c.w
	gen := n.gen
	r, err := runner.New(n.spec.Runner, w.Clock, func() error { return n.lightSync(gen) }, nodeObserver{n})
	if err != nil {
		return err
	}
	n.runner = r
	n.services = proxy.NewServiceChangeTracker(w.cfg.Family)
	n.pendFrom, n.takenFrom, n.takenTo = n.heard, n.heard, n.heard
	n.start = w.Clock.Now()
	n.initialized = false
	n.size = [2]int{}
	r.StartVirtual(n.cost)
	n.initialized = true
	n.syncStarted("initial")
	n.services.DropPending()
	n.size = n.c.sizeAt(n.heard)
	n.cur.Work = n.lightWorkSync()
	n.syncFinished(nil)
	return nil
}

// lightSync is a light node's sync: it applies what is pending, which
// for a node without state is forgetting it.
func (n *Node) lightSync(gen int) error {
	if gen != n.gen {
		return fmt.Errorf("proxy was restarted")
	}
	if n.failSyncs > 0 {
		n.failSyncs--
		n.cur.Work = SyncWork{ServicePorts: n.size[0], Endpoints: n.size[1]}
		return ErrInjectedSyncFailure
	}
	if !n.initialized {
		n.cur.Work = SyncWork{ServicePorts: n.size[0], Endpoints: n.size[1]}
		return nil
	}
	n.services.DropPending()
	n.size = n.c.sizeAt(n.heard)
	n.cur.Work = n.lightWorkSync()
	return nil
}

// cost is proxyConsumer.cost for a light node.
func (n *Node) cost() time.Duration {
	c := n.spec.Cost
	if sp, ok := c.Work.(CostSplitter); ok && len(c.Runs) == 0 && n.running && n.spec.Keep {
		n.cur.Split = sp.SplitCost(n.cur.Work)
	}
	return c.RunCost(n.runnerRuns, n.costFrom, n.cur.Work)
}

type nodeObserver struct{ n *Node }

func (nodeObserver) Requested(time.Time)                          {}
func (nodeObserver) Deferred(time.Time, runner.Reason, time.Time) {}
func (nodeObserver) Dropped(time.Time, runner.Reason)             {}
func (o nodeObserver) Started(_ time.Time, why runner.Reason) {
	o.n.runnerRuns++
	o.n.syncStarted(string(why))
}
func (o nodeObserver) Finished(_ time.Time, err error) { o.n.syncFinished(err) }

// syncStarted and syncFinished are the world's, for a light node.
func (n *Node) syncStarted(why string) {
	n.stats.Syncs++
	n.cur = SyncRecord{N: n.stats.Syncs, Why: why, Start: n.c.w.Now(), End: -1}
	n.running = true
	n.takenFrom, n.takenTo, n.pendFrom = n.pendFrom, n.heard, n.heard
	// The pod changes this sync carries: those the slices it applies show
	// (see carried).
	n.seqRun, n.heardRun = n.c.podSeq, n.heard
}

// carried lists the pod changes the sync under way carries and that are
// still the pods' latest (by pod on a kept node, else in log order): every change logged by the sync's start
// that the slices it applies show (visible by heardRun), not carried by an
// earlier successful sync. Both bounds only grow from sync to sync, so a
// change is done once a successful sync started with seqDone ≥ its seq
// and heardDone ≥ its visible: what is left is the changes logged since
// seqDone that are visible by heardRun, and the older ones that became
// visible after heardDone. A node keeps four numbers, not a list of the
// cluster's changes (150,000 pods starting up on 5,000 nodes).
//
// The list is the cluster's, valid until the next call.
//
// A change whose slices stopped showing it meanwhile is the node's to
// follow (irregular): carried when the slices show it at the sync's start.
func (n *Node) carried() []podSlot {
	c := n.c
	out := c.carry[:0]
	lo := max(n.seqDone, c.podBase) - c.podBase
	for _, p := range c.podLog[lo:max(n.seqRun-c.podBase, lo)] {
		if !p.off && p.visible >= 0 && p.visible <= n.heardRun {
			out = append(out, p)
		}
	}
	from, _ := slices.BinarySearchFunc(c.visLog, n.heardDone+1, func(p podSlot, v int) int { return p.visible - v })
	for _, p := range c.visLog[from:] {
		if p.visible > n.heardRun {
			break
		}
		if !p.off && p.seq <= n.seqDone {
			out = append(out, p)
		}
	}
	for _, p := range n.irregular {
		if n.carries(p) {
			out = append(out, slotOf(p))
		}
	}
	if n.spec.Keep {
		// A kept node lists its pod latencies as a single node's replay
		// does, each sync's by pod; the cluster's exact set takes them in
		// any order (its quantiles are the same), so the others skip the
		// sort of every change they carry.
		slices.SortFunc(out, func(a, b podSlot) int { return strings.Compare(a.p.key, b.p.key) })
	}
	c.carry = out
	return out
}

func (n *Node) syncFinished(err error) {
	now := n.c.w.Now()
	r := n.cur
	r.End = now
	n.running = false
	n.stats.Busy += r.End - r.Start
	if err != nil {
		r.Err = err.Error()
		n.stats.FailedSyncs++
	}
	if n.spec.Keep {
		n.syncs = append(n.syncs, r)
	}
	if n.c.onSync != nil {
		n.c.onSync(n, r)
	}
	if err == nil && n.takenTo > n.takenFrom {
		nowT := n.c.w.Clock.Now()
		evs, order := n.takenTriggers()
		for _, k := range order {
			tt := &evs[uint32(k)]
			v := nowT.Sub(tt.trigger)
			if n.spec.Keep {
				n.samples = append(n.samples, ProgrammingSample{At: now, Service: tt.svc.name, Value: v})
			}
			if n.spec.SLI != nil {
				n.spec.SLI.Observe(now, v.Seconds())
			} else {
				n.obs = append(n.obs, Observation{At: now, Value: v})
			}
			n.stats.Samples++
			n.stats.Worst = max(n.stats.Worst, v)
		}
	}
	n.takenFrom = n.takenTo
	if err != nil {
		return // what it carried, the next sync carries
	}
	// A change made stale meanwhile is not carried: the later one is.
	if n.spec.Keep {
		for _, p := range n.carried() {
			d := now - p.at
			n.c.podLat.AddDuration(d)
			n.stats.WorstPod = max(n.stats.WorstPod, d)
			n.podVals = append(n.podVals, d)
			n.podLat[p.p.key] = d
		}
		clear(n.c.carry) // holds no change the logs let go of
	} else {
		for _, r := range n.carriedAt() {
			d := now - r.at
			n.c.podLat.AddDurationN(d, r.count)
			n.stats.WorstPod = max(n.stats.WorstPod, d)
		}
	}
	n.dropIrregular()
	n.seqDone, n.heardDone = n.seqRun, n.heardRun
}

// carryKey is what Node.carried's answer depends on: the node's four
// bounds, and the logs' state, which changes only with a pod change
// (podSeq) or an event heard (head).
type carryKey struct {
	seqDone, seqRun, podSeq int64
	heardDone, heardRun     int
	head                    int
}

// atCount is how many changes made at one instant a sync carried.
type atCount struct {
	at    time.Duration
	count int64
}

// carriedAt is what carried lists, as counts of changes made at the same
// instant in turn. A node without irregular changes whose bounds are
// another's at the same state of the logs carries what that one did:
// every node's first sync after the pods came (150,000 on 5,000 nodes)
// is worked out once.
func (n *Node) carriedAt() []atCount {
	c := n.c
	key := carryKey{seqDone: n.seqDone, seqRun: n.seqRun, podSeq: c.podSeq, heardDone: n.heardDone, heardRun: n.heardRun, head: c.head}
	if len(n.irregular) == 0 && c.carryMemo && c.carryKey == key {
		return c.carryAt
	}
	// carried's walk, counting rather than listing.
	out := c.carryAt[:0]
	add := func(at time.Duration) {
		if k := len(out) - 1; k >= 0 && out[k].at == at {
			out[k].count++
			return
		}
		out = append(out, atCount{at: at, count: 1})
	}
	lo := max(n.seqDone, c.podBase) - c.podBase
	for i := range c.podLog[lo:max(n.seqRun-c.podBase, lo)] {
		if p := &c.podLog[lo+int64(i)]; !p.off && p.visible >= 0 && p.visible <= n.heardRun {
			add(p.at)
		}
	}
	from, _ := slices.BinarySearchFunc(c.visLog, n.heardDone+1, func(p podSlot, v int) int { return p.visible - v })
	for i := from; i < len(c.visLog); i++ {
		p := &c.visLog[i]
		if p.visible > n.heardRun {
			break
		}
		if !p.off && p.seq <= n.seqDone {
			add(p.at)
		}
	}
	for _, p := range n.irregular {
		if n.carries(p) {
			add(p.at)
		}
	}
	c.carryAt = out
	c.carryKey, c.carryMemo = key, len(n.irregular) == 0
	return out
}

// takenTriggers lists the trigger times the sync under way took, by
// Service and then in the order heard, as the world's proxy observes
// them: of the events heard since the sync before started, those after
// the proxy's start, less any before a removal of their Service's slice.
// It gives the events of the sync's window and the order to read the
// taken ones in: each a Service's rank above the event's index (the
// order list is the cluster's, valid until the next call).
func (n *Node) takenTriggers() ([]streamTrigger, []uint64) {
	c := n.c
	out := c.taken[:0]
	var removed []*svcKey // rare: a Service's slice removed meanwhile
	evs := c.triggers[c.triggerAt(n.takenFrom):c.triggerAt(n.takenTo)]
	c.rank()
	for i := len(evs) - 1; i >= 0; i-- {
		t := &evs[i]
		switch {
		case t.remove:
			removed = append(removed, t.svc)
		case !t.trigger.After(n.start) || slices.Contains(removed, t.svc):
		default:
			out = append(out, uint64(t.svc.rank)<<32|uint64(i))
		}
	}
	slices.Sort(out)
	c.taken = out
	return evs, out
}

// carries says whether the sync under way carries an irregular change
// that is still its pod's latest: logged by its start and shown by the
// slices it had heard then.
func (n *Node) carries(p *podState) bool {
	return !p.stale && p.seq <= n.seqRun && p.shows(n.heardRun)
}

// dropIrregular lets go of the irregular changes the sync under way
// carried (done, or lost with a restart) and of those a later change
// replaced.
func (n *Node) dropIrregular() {
	kept := n.irregular[:0]
	for _, p := range n.irregular {
		if !p.stale && !n.carries(p) {
			kept = append(kept, p)
		}
	}
	clear(n.irregular[len(kept):])
	n.irregular = kept
}

// closeNodes stops every node's timers.
func (c *cluster) close() {
	for _, n := range c.nodes {
		if n.fw != nil {
			n.fw.Close()
		} else if n.runner != nil {
			n.runner.Stop()
		}
	}
}
