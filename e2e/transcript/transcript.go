// Package transcript records what a scenario replay did, in a form another
// implementation can be driven by and compared with: every Service and
// EndpointSlice write the proxy heard, at its virtual instant; every
// injected dataplane fault and proxy restart; and every sync with its
// instants, its error and the dataplane it left.
//
// e2e/upstream and e2e/upstream133 replay a transcript through kube-proxy's
// own code inside a testing/synctest bubble and compare the syncs. This
// package only records: it must not import kube-proxy (k8s.io/kubernetes),
// so that modules pinned to different kube-proxy releases can share it.
package transcript

import (
	"fmt"
	"reflect"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/iptablesmode"
	"github.com/proxysim/proxysim/scenarios/replay"
	"github.com/proxysim/proxysim/sim"
	"github.com/proxysim/proxysim/sim/trace"
)

// Write is one object change as the proxy's informers delivered it.
type Write struct {
	At   time.Duration
	Op   string // add, update or delete
	Kind string // Service or EndpointSlice
	// Obj is the object written (for a delete, the last one seen).
	Obj runtime.Object
	// By is the writer as the trace names it (a controller:
	// "endpointslice-controller", "garbage-collector"), "" for the
	// scenario's own steps.
	By string
	// Seq is the write's place among all the recording's writes
	// (Writes and Pods together), from 0.
	Seq int
}

// Fault is an injected dataplane failure: the next N dataplane writes
// (iptables-restore calls, nft transactions) fail.
type Fault struct {
	At time.Duration
	N  int
}

// Sync is one sync of proxysim's proxier.
type Sync struct {
	Start, End time.Duration
	Why        string // initial, request, timer, retry, ...
	Err        string
	// Heard is how many of Transcript.Writes the proxy had been delivered
	// when the sync started (one instant's writes and syncs interleave).
	Heard int
	// Dataplane is the mode's snapshot (iptables-save, nft dump) right
	// after the sync.
	Dataplane string
}

// Action is one entry of Transcript.Script: exactly one of its pointers
// is set.
type Action struct {
	At      time.Duration
	Write   *Write
	Fault   *Fault
	Restart bool
}

// Step is one step of the timeline as the trace recorded it.
type Step struct {
	At     time.Duration
	Op     string
	Detail string
}

// Transcript is one replay, recorded.
type Transcript struct {
	Scenario *scenarios.Scenario
	// Initial are the scenario's objects, in the API server before the
	// proxy starts.
	Initial  []runtime.Object
	Writes   []Write
	Faults   []Fault
	Restarts []time.Duration
	// Script is Writes, Faults and Restarts merged in the order they
	// happened: the order to replay them in.
	Script []Action
	// Pods are the Pod and Node writes, in order (recorded only by
	// RecordWith's Options.Pods): what a replay that runs its own
	// EndpointSlice controller writes, where Writes has the slices
	// proxysim's controller made of them. They are not in Script.
	Pods  []Write
	Steps []Step
	Syncs []Sync
	// Unsupported names the steps a replay of kube-proxy's own code cannot
	// reproduce, with the reason; empty when it can replay them all.
	Unsupported []string
	// Result is proxysim's own verdict on the scenario.
	Result *replay.Result
	// Cost is the world's sync cost model for its node, as the replay
	// started with it (scenario and pool variation): what each runner run
	// cost (sim.CostModel.RunCost), for a Charge to charge the other side.
	Cost sim.CostModel
	// node is the world's own node, whose proxy this is.
	node string
}

// faultFormats are the fault steps a bubble can inject at the same instant
// (iptablesmode's restoreFault, nftablesmode's transactionFault).
var faultFormats = []string{"next %d restores fail", "next %d transactions fail"}

// replayable are the step kinds a transcript carries to another
// implementation: object writes (as the writes they made), faults,
// restarts; notes change nothing, and a client connection only fills the
// tracer's affinity history, never a proxier's rules (the IPVS mode's
// connections are trace.Conn events, listed: its fake keeps them).
// The controllers' steps (pods made ready, rolling updates, ingress
// churn) write Pods and Ingresses, which a proxy does not watch; the
// EndpointSlice writes they cause are in the transcript like any other.
var replayable = map[string]bool{
	"apply": true, "patch": true, "churn": true, "delete": true, "update": true,
	"note": true, "fault": true, "restart": true, "connection": true,
	"podReady": true, "rollingUpdate": true, "ingressChurn": true,
}

// otherFaults are faults that touch neither the proxy nor its dataplane.
var otherFaults = []string{"the next %d ingress-nginx reloads fail"}

// Options say what a recording keeps beyond the proxy's writes.
type Options struct {
	// Pods records the Pod and Node writes (Transcript.Pods).
	Pods bool
	// Timings keeps no dataplane snapshot (RecordTimings).
	Timings bool
}

// Record replays s with proxysim's engine on its fake dataplane and
// returns the transcript.
func Record(s *scenarios.Scenario) (t *Transcript, err error) {
	return RecordWith(s, Options{})
}

// RecordTimings is Record without the dataplane snapshots (every
// Sync.Dataplane is empty): for a long story whose thousands of syncs
// are compared by instant and outcome only, where keeping each sync's
// ruleset would cost gigabytes.
func RecordTimings(s *scenarios.Scenario) (*Transcript, error) {
	return RecordWith(s, Options{Timings: true})
}

// RecordWith is Record with options.
func RecordWith(s *scenarios.Scenario, o Options) (t *Transcript, err error) {
	// A retold scenario (AsIPTables) may hold a step that only its first
	// mode has, which drives that mode's dataplane.
	if err := foreignStep(s); err != nil {
		return nil, err
	}
	t = &Transcript{Scenario: s}
	if s.Proxy.SyncCost.Profile != "" {
		t.unsupported("proxy.syncCost.profile (first at 0s): a profile costs a sync's dataplane work (sim.SyncWork), which a Charge does not count on upstream's fakes")
	}
	for _, o := range s.Initial {
		t.Initial = append(t.Initial, o.Obj)
	}
	mode, ok := scenarios.LookupMode(s.Proxy.Mode)
	if !ok {
		return nil, fmt.Errorf("%s: mode %q is not registered", s.File, s.Proxy.Mode)
	}
	var dp scenarios.Dataplane
	var snapErr error
	// heard: how many writes the proxy had been delivered at each sync's
	// start, counted from its initial sync's.
	var heard []int
	toProxy, base := 0, 0
	opts := replay.Options{
		Dataplane: func(s *scenarios.Scenario, clk clock.PassiveClock) (scenarios.Dataplane, error) {
			d, err := mode.Fake(s, clk)
			dp = d
			return d, err
		},
		World: func(w *sim.World) error {
			t.Cost, t.node = w.Config().Cost, w.Config().NodeName
			rec := &recorder{t: t, w: w, pods: o.Pods, by: map[string]string{}}
			w.Trace.Observe(func(e trace.Event) {
				at := time.Duration(e.At)
				switch e.Kind {
				case trace.Object:
					// A delivery to the proxy (its deliveries are traced
					// without its name), of the kinds recorded here.
					if e.Why == "" && e.Detail == "" && (strings.HasPrefix(e.Object, "Service ") || strings.HasPrefix(e.Object, "EndpointSlice ")) {
						toProxy++
					}
					// A consumer's or named writer's write is traced before
					// its events are delivered (sim World.afterWrite).
					if e.Why != "" && e.Err == "" && e.Op != "refused" {
						rec.by[e.Object] = e.Why
					}
				case trace.Start:
					if e.Why == "initial" {
						// A proxy's first sync (at its start and each
						// restart) heard the lists: every write so far.
						base = toProxy - len(t.Writes)
					}
					heard = append(heard, toProxy-base)
				case trace.End:
					var snap string
					if !o.Timings {
						var err error
						if snap, err = dp.Snapshot(); err != nil && snapErr == nil {
							snapErr = err
						}
					}
					t.Syncs = append(t.Syncs, Sync{End: at, Dataplane: snap})
				case trace.Step:
					t.Steps = append(t.Steps, Step{At: at, Op: e.Op, Detail: e.Detail})
					t.step(at, e)
				case trace.Conn:
					// The fake IPVS keeps connections: they count in
					// ActiveConn/InActConn, graceful termination waits
					// for them, persistence templates pin them.
					// Upstream's fake IPVS has no connection table.
					t.unsupported(fmt.Sprintf("client connection (first at %v): proxysim's fake IPVS keeps it (connection counts, graceful termination, persistence templates); upstream's fake IPVS has no connection table", at))
				}
			})
			return w.Subscribe(rec)
		},
	}
	res, err := replay.Replay(s, opts)
	if err != nil {
		return nil, err
	}
	if snapErr != nil {
		return nil, snapErr
	}
	t.Result = res
	if len(res.Runs) != len(t.Syncs) {
		return nil, fmt.Errorf("%s: %d syncs but %d run.end events", s.File, len(res.Runs), len(t.Syncs))
	}
	for i, r := range res.Runs {
		t.Syncs[i].Start, t.Syncs[i].Why, t.Syncs[i].Err = r.Start, r.Why, r.Err
	}
	for i := range min(len(heard), len(t.Syncs)) {
		t.Syncs[i].Heard = heard[i]
	}
	return t, nil
}

// step files a traced step as a fault, a restart or something the other
// side cannot be given.
func (t *Transcript) step(at time.Duration, e trace.Event) {
	if !replayable[e.Op] {
		t.unsupported(fmt.Sprintf("step %q (first at %v): %s", e.Op, at, whyNot(e.Op)))
		return
	}
	if node, ok := strings.CutPrefix(e.Object, "node "); ok && node != t.node && (e.Op == "restart" || e.Op == "fault") {
		return // another node of a cluster (scenarios' node step): not the proxy replayed
	}
	switch e.Op {
	case "restart":
		t.Restarts = append(t.Restarts, at)
		t.Script = append(t.Script, Action{At: at, Restart: true})
	case "fault":
		for _, f := range faultFormats {
			var n int
			if _, err := fmt.Sscanf(e.Detail, f, &n); err == nil {
				t.Faults = append(t.Faults, Fault{At: at, N: n})
				t.Script = append(t.Script, Action{At: at, Fault: &t.Faults[len(t.Faults)-1]})
				return
			}
		}
		for _, f := range otherFaults {
			var n int
			if _, err := fmt.Sscanf(e.Detail, f, &n); err == nil {
				return
			}
		}
		t.unsupported(fmt.Sprintf("fault %q at %v: no kube-proxy fake injects it", e.Detail, at))
	}
}

// unsupported adds a reason once.
func (t *Transcript) unsupported(why string) {
	op, _, _ := strings.Cut(why, " (first at")
	for _, u := range t.Unsupported {
		if strings.HasPrefix(u, op+" ") {
			return
		}
	}
	t.Unsupported = append(t.Unsupported, why)
}

// whyNot says why a step kind has no counterpart when kube-proxy's own
// code is driven through its API objects.
func whyNot(op string) string {
	switch op {
	case "run", "retryAfter", "stop":
		return "calls the runner directly; kube-proxy's proxier exposes no such call (sim/runner checks these timelines against upstream's runner tests)"
	case "syncCost":
		return "changes the sync cost along the timeline; a Charge applies the model the replay started with"
	case "ipvs":
		return "an operator's ipvsadm on the kernel behind the proxy's back; no counterpart through API objects"
	default:
		return "no counterpart in kube-proxy's code driven through API objects"
	}
}

// recorder is a consumer beside the proxy: it hears every write the proxy
// hears, at the same instant, after the proxy.
type recorder struct {
	t      *Transcript
	w      *sim.World
	synced int
	seq    int
	// pods: hear Pods and Nodes too (Options.Pods).
	pods bool
	// by is the last writer the trace named for each object ("Kind
	// ns/name"); a step's writes name none.
	by map[string]string
}

func (r *recorder) Name() string { return "transcript" }
func (r *recorder) Kinds() []string {
	if r.pods {
		return []string{"Service", "EndpointSlice", "Pod", "Node"}
	}
	return []string{"Service", "EndpointSlice"}
}

func (r *recorder) add(op, kind string, obj runtime.Object) {
	if r.synced < len(r.Kinds()) {
		return // the initial list: Transcript.Initial
	}
	w := &Write{At: r.w.Now(), Op: op, Kind: kind, Obj: obj.DeepCopyObject(), Seq: r.seq}
	r.seq++
	if m, ok := obj.(metav1.Object); ok {
		key := kind + " " + m.GetName()
		if m.GetNamespace() != "" {
			key = kind + " " + m.GetNamespace() + "/" + m.GetName()
		}
		w.By = r.by[key]
		delete(r.by, key)
	}
	if kind == "Pod" || kind == "Node" {
		r.t.Pods = append(r.t.Pods, *w)
		return
	}
	r.t.Writes = append(r.t.Writes, *w)
	r.t.Script = append(r.t.Script, Action{At: w.At, Write: w})
}

func (r *recorder) OnAdd(kind string, obj runtime.Object) error {
	r.add("add", kind, obj)
	return nil
}

// OnUpdate skips resyncs (identical objects): informers in the other
// implementation resync on their own clock.
func (r *recorder) OnUpdate(kind string, old, obj runtime.Object) error {
	if reflect.DeepEqual(old, obj) {
		return nil
	}
	r.add("update", kind, obj)
	return nil
}

func (r *recorder) OnDelete(kind string, obj runtime.Object) error {
	r.add("delete", kind, obj)
	return nil
}

func (r *recorder) OnSynced(string) error {
	r.synced++
	return nil
}

// AsIPTables is a scenario of another mode (the IPVS mode's runner and
// endpoint stories) retold for the iptables mode: the same proxy fields,
// objects and timeline, with the iptables proxier's runner (its periodic
// sync hourly) and without expectations, which were written for the other
// mode's dataplane. A step that only the other mode has makes Record list
// it, or fail.
func AsIPTables(s *scenarios.Scenario) *scenarios.Scenario {
	c := *s
	c.Proxy.Mode = iptablesmode.Name
	c.Proxy.Settings = &iptablesmode.Settings{}
	c.Timeline = nil
	for _, st := range s.Timeline {
		st.Expect = nil
		c.Timeline = append(c.Timeline, st)
	}
	return &c
}

// foreignStep reports the first step of s whose action is another mode's
// own (a step or fault that mode registers, such as the IPVS mode's client
// connections, faults and ipvsadm commands): it drives that mode's
// dataplane, so it cannot run in s's mode.
func foreignStep(s *scenarios.Scenario) error {
	owner := map[reflect.Type]string{}
	for _, name := range scenarios.ModeNames() {
		if name == s.Proxy.Mode {
			continue
		}
		m, _ := scenarios.LookupMode(name)
		for _, parts := range [][]func() scenarios.Action{m.Actions(), m.Faults()} {
			for _, newAction := range parts {
				owner[reflect.TypeOf(newAction())] = name
			}
		}
	}
	for _, st := range s.Timeline {
		for _, a := range st.Actions {
			key := actionKey(a)
			parts := []scenarios.Action{a}
			if f := faultOf(a); f != nil {
				parts = f.Parts // a fault step holds each mode's faults
			}
			for _, p := range parts {
				mode, ok := owner[reflect.TypeOf(p)]
				if !ok {
					continue
				}
				if p != a {
					key += "." + actionKey(p)
				}
				at := time.Duration(0)
				if st.At != nil {
					at = st.At.D()
				}
				return fmt.Errorf("step %q (first at %v) is the %s mode's own, on its dataplane; the %s mode has none", key, at, mode, s.Proxy.Mode)
			}
		}
	}
	return nil
}

// faultOf is the fault a fault step carries, nil for any other step.
func faultOf(a scenarios.Action) *scenarios.Fault {
	v := reflect.ValueOf(a)
	for v.Kind() == reflect.Pointer && !v.IsNil() {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return nil
	}
	for i := range v.NumField() {
		if !v.Type().Field(i).IsExported() {
			continue
		}
		if f, ok := v.Field(i).Interface().(*scenarios.Fault); ok {
			return f
		}
	}
	return nil
}

// actionKey is the scenario key of an action: the yaml name of its
// struct's first field, as the mode registers it.
func actionKey(a scenarios.Action) string {
	t := reflect.TypeOf(a)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() == reflect.Struct && t.NumField() > 0 {
		if tag, _, _ := strings.Cut(t.Field(0).Tag.Get("yaml"), ","); tag != "" {
			return tag
		}
	}
	return t.Name()
}
