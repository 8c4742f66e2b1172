package realcp

import (
	"context"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/proxysim/proxysim/e2e/transcript"
	"github.com/proxysim/proxysim/netns"
	"github.com/proxysim/proxysim/scenarios"
	_ "github.com/proxysim/proxysim/scenarios/controllers" // the library's controller stories
	"github.com/proxysim/proxysim/scenarios/iptablesmode"
	"github.com/proxysim/proxysim/scenarios/nftablesmode"
	"github.com/proxysim/proxysim/scenarios/replay"
	"github.com/proxysim/proxysim/sim/controllers/endpointslice"
	"github.com/proxysim/proxysim/sim/vclock"
)

var (
	updateVerdicts = flag.Bool("update-realcp", false, "rewrite the pinned verdicts (testdata/realcp-*.txt) instead of comparing with them")
	onlyScenario   = flag.String("realcp-scenario", "", "run only these library scenarios (comma-separated); the verdicts are not checked")
	maxLength      = flag.Duration("realcp-max-length", 0, "run only the scenarios at most this long; the verdicts are not checked")
	runLong        = flag.Bool("realcp-long", false, "run the long stories (an hour of real time each; realCases' long field) instead of the others; their verdicts are pinned in testdata/realcp-long.txt")
	checkPinned    = flag.Bool("realcp-check-pinned", false, "with -realcp-scenario or -realcp-max-length: each verdict must be the one pinned in testdata/realcp.txt (make realcp-ci)")
)

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// requireRoot skips (or, under PROXYSIM_REALCP_REQUIRED, fails) when this
// host cannot run kube-proxy in a namespace.
func requireRoot(t *testing.T) {
	t.Helper()
	skip := t.Skipf
	if os.Getenv("PROXYSIM_REALCP_REQUIRED") != "" {
		skip = t.Fatalf
	}
	if !netns.Privileged() {
		skip("kube-proxy in a network namespace needs root (make realcp runs as root)")
	}
}

// bare is an object as a client writes it: no resourceVersion (writes are
// unconditional), no UID or creation time of proxysim's store.
func bare(o runtime.Object) runtime.Object {
	c := o.DeepCopyObject()
	if m, ok := c.(metav1.Object); ok {
		m.SetResourceVersion("")
		m.SetUID("")
		m.SetCreationTimestamp(metav1.Time{})
		m.SetGeneration(0)
		m.SetManagedFields(nil)
	}
	return c
}

// realTriggerTime moves a slice's trigger-time annotation (written by
// proxysim's EndpointSlice controller on its virtual clock, which starts
// at vclock.Epoch) onto the real clock, with origin the real instant of
// the replay's virtual start: kube-proxy observes network programming
// latency from it, and ignores times not after its own start.
func realTriggerTime(o runtime.Object, origin time.Time) {
	s, ok := o.(*discovery.EndpointSlice)
	if !ok {
		return
	}
	v, ok := s.Annotations[v1.EndpointsLastChangeTriggerTime]
	if !ok {
		return
	}
	at, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return // kube-proxy ignores it as it is
	}
	s.Annotations[v1.EndpointsLastChangeTriggerTime] = origin.Add(at.Sub(vclock.Epoch)).UTC().Format(time.RFC3339Nano)
}

// apply sends one object write to the API server; origin is the real
// instant of virtual time 0 (see realTriggerTime).
// createBefore creates one of the objects there before kube-proxy starts.
// The API server's allocator hears of the library ServiceCIDR (made Ready
// in startControlPlane) through an informer, and refuses a Service of its
// range until it has ("does not match the current range"): seen when four
// control planes start side by side. Such a create is tried again for up
// to 10 s; kube-proxy has not started, so nothing's timing moves.
func createBefore(ctx context.Context, client kubernetes.Interface, obj runtime.Object) error {
	err := apply(ctx, client, "add", obj, time.Now())
	for try := 0; err != nil && try < 100 && strings.Contains(err.Error(), "does not match the current range"); try++ {
		time.Sleep(100 * time.Millisecond)
		err = apply(ctx, client, "add", obj, time.Now())
	}
	return err
}

func apply(ctx context.Context, client kubernetes.Interface, op string, obj runtime.Object, origin time.Time) error {
	obj = bare(obj)
	realTriggerTime(obj, origin)
	switch o := obj.(type) {
	case *v1.Service:
		c := client.CoreV1().Services(o.Namespace)
		// A Service's status (its load balancer's addresses) is written
		// through its own subresource, as a cloud controller would, right
		// after the object.
		status := func(got *v1.Service, err error) error {
			if err != nil || len(o.Status.LoadBalancer.Ingress) == 0 {
				return err
			}
			got.Status = o.Status
			_, err = c.UpdateStatus(ctx, got, metav1.UpdateOptions{})
			return err
		}
		switch op {
		case "add":
			return status(c.Create(ctx, o, metav1.CreateOptions{}))
		case "update":
			return status(c.Update(ctx, o, metav1.UpdateOptions{}))
		case "delete":
			return c.Delete(ctx, o.Name, metav1.DeleteOptions{})
		}
	case *discovery.EndpointSlice:
		c := client.DiscoveryV1().EndpointSlices(o.Namespace)
		switch op {
		case "add":
			_, err := c.Create(ctx, o, metav1.CreateOptions{})
			return err
		case "update":
			_, err := c.Update(ctx, o, metav1.UpdateOptions{})
			return err
		case "delete":
			return c.Delete(ctx, o.Name, metav1.DeleteOptions{})
		}
	}
	return fmt.Errorf("cannot write %T (%s)", obj, op)
}

// defaultNodeIP is the Node's address when the scenario names none (the
// library's usual node address).
const defaultNodeIP = "192.168.0.2"

// configOf is kube-proxy's configuration for the scenario.
func configOf(s *scenarios.Scenario, backend netns.IPTablesBackend) (proxyConfig, error) {
	c := proxyConfig{
		Mode: s.Proxy.Mode, Backend: backend, NodeName: s.Proxy.NodeName, NodeIP: defaultNodeIP,
		SyncPeriod: 30 * time.Second, MinSyncPeriod: time.Second, ConfigSyncPeriod: 15 * time.Minute,
	}
	if c.NodeName == "" {
		c.NodeName = "node-a"
	}
	if s.Proxy.SyncPeriod != nil {
		c.SyncPeriod = s.Proxy.SyncPeriod.D()
	}
	c.MinSyncPeriod = replay.RunnerConfig(s.Proxy).MinInterval
	if c.MinSyncPeriod == 0 {
		// kube-proxy reads a 0s minSyncPeriod as unset (1s); proxysim's
		// unset is 0, no cooldown: 1ns is that, in a form kube-proxy keeps.
		c.MinSyncPeriod = time.Nanosecond
	}
	if s.Proxy.ConfigSyncPeriod != nil && s.Proxy.ConfigSyncPeriod.D() > 0 {
		c.ConfigSyncPeriod = s.Proxy.ConfigSyncPeriod.D()
	}
	var nodeIPs []string
	switch set := s.Proxy.Settings.(type) {
	case *iptablesmode.Settings:
		nodeIPs, c.ClusterCIDR, c.MasqueradeAll = set.NodeIPs, set.ClusterCIDR, set.MasqueradeAll
	case *nftablesmode.Settings:
		nodeIPs, c.ClusterCIDR, c.MasqueradeAll = set.NodeIPs, set.ClusterCIDR, set.MasqueradeAll
		if set.NodePortAddresses == "primary" {
			c.NodePortAddresses = []string{"primary"}
		}
	default:
		return c, fmt.Errorf("mode %q is not compared here", s.Proxy.Mode)
	}
	if len(nodeIPs) > 1 {
		return c, fmt.Errorf("%d node IPs: the Node has one", len(nodeIPs))
	}
	if len(nodeIPs) == 1 {
		c.NodeIP = nodeIPs[0]
	}
	return c, nil
}

// clusterFacts are what the API server adds to a scenario's cluster.
type clusterFacts struct {
	// kubernetes is its own default/kubernetes Service.
	kubernetes *v1.Service
	// serviceCIDRs are the ranges of its ServiceCIDR objects (the default
	// one from --service-cluster-ip-range).
	serviceCIDRs []string
}

func factsOf(ctx context.Context, cp *controlPlane) (clusterFacts, error) {
	var f clusterFacts
	var err error
	f.kubernetes, err = cp.kubernetesService(ctx)
	if err != nil {
		return f, err
	}
	list, err := cp.client.NetworkingV1().ServiceCIDRs().List(ctx, metav1.ListOptions{})
	if err != nil {
		return f, err
	}
	for _, sc := range list.Items {
		f.serviceCIDRs = append(f.serviceCIDRs, sc.Spec.CIDRs...)
	}
	return f, nil
}

// predicted is s as kube-proxy met it: the API server's own
// default/kubernetes Service among the objects, its ServiceCIDRs known to
// the nftables proxier, each runner run costing
// what kube-proxy's logged (syncCost runs; the initial, direct sync takes
// no time in proxysim), and no expectations (written for proxysim's
// dataplane alone).
func predicted(s *scenarios.Scenario, facts clusterFacts, runs []time.Duration) *scenarios.Scenario {
	c := *s
	kubeSvc := facts.kubernetes
	if set, ok := s.Proxy.Settings.(*nftablesmode.Settings); ok {
		own := *set
		own.ServiceCIDRs = facts.serviceCIDRs
		c.Proxy.Settings = &own
	}
	c.Initial = append([]scenarios.Object{{Obj: bare(kubeSvc), Kind: "Service", Key: scenarios.KeyOf("Service", kubeSvc.Namespace, kubeSvc.Name)}}, s.Initial...)
	c.Proxy.SyncCost = scenarios.SyncCost{}
	for _, r := range runs {
		c.Proxy.SyncCost.Runs = append(c.Proxy.SyncCost.Runs, scenarios.Duration(r))
	}
	c.Timeline = nil
	for _, st := range s.Timeline {
		st.Expect = nil
		c.Timeline = append(c.Timeline, st)
	}
	return &c
}

// recordPredicted replays the prediction. Its syncs now take time, so it
// runs on after the scenario's end until no sync is under way (the real
// ones were waited for): past the last instant a counted sync can start
// (the end plus the tolerance) by one longest run, and by one more each
// time a sync is still running there.
func recordPredicted(s *scenarios.Scenario, runs []time.Duration) (*transcript.Transcript, error) {
	longest := time.Duration(0)
	for _, r := range runs {
		longest = max(longest, r)
	}
	base := s.Timeline
	var err error
	for k := 1; k <= 5; k++ {
		end := scenarios.Duration(s.Length() + tolerance + time.Duration(k)*(longest+time.Millisecond))
		s.Timeline = append(base[:len(base):len(base)], scenarios.Step{At: &end, Note: "the last sync ends"})
		var tr *transcript.Transcript
		tr, err = transcript.Record(s)
		if err == nil {
			return tr, nil
		}
		if !strings.Contains(err.Error(), "run.end events") {
			return nil, err
		}
	}
	return nil, err
}

// run is one scenario replayed against the real kube-proxy.
type run struct {
	s *scenarios.Scenario
	// t0 is virtual instant 0: the end of kube-proxy's first, direct
	// sync (proxysim's takes no time, so its writes at 0 come after it).
	t0 time.Time
	// writeAt are the instants (after t0) the writes were issued.
	writeAt []time.Duration
	syncs   []realSync
	writes  []time.Duration // when each write was issued, after t0
	metrics string
	// t0s are t0 and, after each restart, the instant that stands for
	// virtual 0 from then on (restartedAt says from when).
	t0s, restartedAt []time.Time
	// restartSyncs are the indexes of the first syncs of restarted
	// kube-proxies (direct, like the first).
	restartSyncs map[int]bool
	// metricsBefore are the /metrics of each kube-proxy process ended by
	// a restart, scraped before it was stopped.
	metricsBefore []string
	// flushes are the instants (after t0) the operator's flushes ran.
	flushes []time.Duration
	// canaryAt are the instants (after t0) kube-proxy's iptables canary
	// monitor created its canaries (each start of its interval).
	canaryAt []time.Duration
	// loopStarts are the instants each kube-proxy process's runner began
	// its loop (and its maxInterval timer), before the informers synced
	// and its first, direct sync ran: the origin of its first periodic
	// sync (see loopStart).
	loopStarts []time.Time
	wall       time.Duration
	startup    time.Duration // control plane
	proxyUp    time.Duration // kube-proxy started to its first sync

	// A controller story's (controller_test.go): upstream's EndpointSlice
	// controller, the real clock's stamp of virtual 0 in its Pods, and
	// when kube-proxy was started (trigger times not after it are old
	// news to kube-proxy).
	slices     *sliceController
	stamps     stamps
	proxyStart time.Time
	// logTail is the end of kube-proxy's log, for a failure's report.
	logTail string
	// sliceJitter is the largest offset between a slice write of
	// upstream's controller and proxysim's (compareRun).
	sliceJitter time.Duration
}

// replayReal runs s against a real control plane and kube-proxy.
func replayReal(t *testing.T, s *scenarios.Scenario, tr *transcript.Transcript, backend netns.IPTablesBackend, binary string) (*run, clusterFacts) {
	t.Helper()
	ctx := context.Background()
	cfg, err := configOf(s, backend)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	began := time.Now()
	cp := startControlPlane(t, dir)
	r := &run{s: s, startup: cp.Startup}
	t.Logf("control plane (etcd + kube-apiserver) ready in %v", cp.Startup.Round(time.Millisecond))
	facts, err := factsOf(ctx, cp)
	if err != nil {
		t.Fatal(err)
	}
	set, err := controllerStory(s)
	if err != nil {
		t.Fatal(err)
	}
	var pw *podWriter
	if set != nil {
		// Before kube-proxy starts: the Pods' stamps are old news.
		pw = &podWriter{client: cp.client, stamps: stamps{origin: time.Now().Add(-time.Hour).Truncate(time.Second)}, last: map[string]runtime.Object{}}
		if err := createInitial(ctx, cp, tr, cfg, pw); err != nil {
			t.Fatal(err)
		}
		r.slices = newSliceController(t, cp, *set)
		t.Logf("upstream's EndpointSlice controller: informers synced in %v", r.slices.Synced.Round(time.Millisecond))
	} else {
		// Services first, as a cluster would have them before their slices.
		for _, kind := range []string{"Service", "EndpointSlice"} {
			for _, o := range tr.Initial {
				if kindOf(o) != kind {
					continue
				}
				// Before kube-proxy starts: their trigger times are old news.
				if err := createBefore(ctx, cp.client, o); err != nil {
					t.Fatalf("create %s: %v", kind, err)
				}
			}
		}
	}
	proxyStart := time.Now()
	r.proxyStart = proxyStart
	kp := startKubeProxy(t, cp, dir, binary, cfg)
	if err := kp.log.waitSyncs(1, 90*time.Second); err != nil {
		t.Fatalf("kube-proxy's first sync: %v\n%s", err, kp.log.Tail(40))
	}
	r.t0 = kp.log.Syncs()[0].End
	r.t0s = []time.Time{r.t0}
	if err := r.noteLoopStart(kp); err != nil {
		t.Fatal(err)
	}
	r.proxyUp = kp.log.Syncs()[0].Start.Sub(proxyStart)
	t.Logf("kube-proxy's first sync %v after it was started", r.proxyUp.Round(time.Millisecond))
	if r.slices != nil {
		// Virtual 0: proxysim's controller starts with the world, its
		// first writes come after the proxy's initial sync.
		r.stamps = stamps{origin: r.t0.Truncate(time.Second)}
		pw.stamps = r.stamps
		r.slices.run()
	}
	steps, err := replaySteps(tr, r.slices != nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range steps {
		if d := time.Until(r.t0.Add(st.At)); d > 0 {
			time.Sleep(d)
		}
		if st.Flush != nil {
			if err := kp.flush(st.Flush); err != nil {
				t.Fatalf("%v: iptablesFlush: %v", st.At, err)
			}
			r.flushes = append(r.flushes, time.Since(r.t0))
			continue
		}
		if st.Pod != nil {
			r.writes = append(r.writes, time.Since(r.t0)-st.At)
			if err := pw.write(ctx, *st.Pod); err != nil {
				t.Fatalf("%v: %s %s: %v", st.At, st.Pod.Op, st.Pod.Kind, err)
			}
			continue
		}
		a := st.Action
		if a.Restart {
			if err := r.restart(kp, a.At); err != nil {
				t.Fatalf("%v: restart: %v\n%s", a.At, err, kp.log.Tail(40))
			}
			continue
		}
		if a.Fault != nil {
			if err := kp.injectFailures(a.Fault.N); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if r.slices != nil && a.Write.By == garbageCollector && managedByController(a.Write.Obj) {
			// No garbage collector runs here: its deletion of the slices
			// of a Service that is gone is made as it would.
			if err := deleteServiceSlices(ctx, cp.client, a.Write.Obj); err != nil {
				t.Fatalf("%v: the garbage collector's delete: %v", a.At, err)
			}
			continue
		}
		r.writes = append(r.writes, time.Since(r.t0)-a.At)
		r.writeAt = append(r.writeAt, time.Since(r.t0))
		// Trigger times: virtual 0 is kube-proxy's start, where its
		// tracker starts counting (proxysim's starts at virtual 0).
		if err := apply(ctx, cp.client, a.Write.Op, a.Write.Obj, proxyStart); err != nil {
			t.Fatalf("%v: %s %s: %v", a.At, a.Write.Op, a.Write.Kind, err)
		}
	}
	// The replay ends at the scenario's length; a sync that starts by then
	// (within the tolerance: a write at the last instant) completes, and
	// is compared; later ones are not the scenario's.
	if d := time.Until(r.t0.Add(s.Length() + tolerance)); d > 0 {
		time.Sleep(d)
	}
	n := 0
	for _, sy := range kp.log.Syncs() {
		if r.since(sy.Start) <= s.Length()+tolerance {
			n++
		}
	}
	if err := kp.log.waitSyncs(n, 30*time.Second); err != nil {
		t.Fatalf("the last sync: %v", err)
	}
	if done, err := kp.exited(); done {
		t.Fatalf("kube-proxy exited: %v\n%s", err, kp.log.Tail(40))
	}
	r.metrics, err = kp.metrics()
	if err != nil {
		t.Fatalf("scrape kube-proxy's /metrics: %v", err)
	}
	r.syncs = kp.log.Syncs()[:n]
	r.logTail = kp.log.Tail(80)
	ensured, err := kp.canaryEnsured()
	if err != nil {
		t.Fatal(err)
	}
	for _, at := range ensured {
		r.canaryAt = append(r.canaryAt, r.since(at))
	}
	r.wall = time.Since(began)
	return r, facts
}

// restart stops kube-proxy and starts it again in its namespace, at the
// virtual instant at. proxysim's restarted proxy syncs at once and in no
// time, the real one when its informers have synced, its start-up later:
// as at the first start, the end of that sync stands for the instant at
// from then on (the writes after it are issued, and the syncs after it
// compared, from there). Its metrics restart from zero: the old process's
// are scraped first (compareRun adds them up).
func (r *run) restart(kp *kubeProxy, at time.Duration) error {
	m, err := kp.metrics()
	if err != nil {
		return fmt.Errorf("scrape /metrics before the restart: %w", err)
	}
	r.metricsBefore = append(r.metricsBefore, m)
	issued := time.Now()
	n := len(kp.log.Syncs())
	if err := kp.restart(); err != nil {
		return err
	}
	if err := kp.log.waitSyncs(n+1, 90*time.Second); err != nil {
		return fmt.Errorf("the restarted kube-proxy's first sync: %w", err)
	}
	if r.restartSyncs == nil {
		r.restartSyncs = map[int]bool{}
	}
	r.restartSyncs[n] = true
	first := kp.log.Syncs()[n]
	r.t0 = first.End.Add(-at)
	r.t0s = append(r.t0s, r.t0)
	r.restartedAt = append(r.restartedAt, issued)
	return r.noteLoopStart(kp)
}

// noteLoopStart reads when the runner of kube-proxy's current process
// began its loop. SyncLoop sets kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds
// right before it starts the runner's loop, whose maxInterval timer starts
// then (v1.36.3 pkg/proxy/iptables and nftables proxier.go SyncLoop,
// pkg/proxy/runner BoundedFrequencyRunner.Loop); nothing queues a sync
// again before the replay's first write, so a scrape right after the
// first, direct sync still shows that instant.
func (r *run) noteLoopStart(kp *kubeProxy) error {
	m, err := kp.metrics()
	if err != nil {
		return fmt.Errorf("scrape /metrics after the first sync: %w", err)
	}
	for _, l := range strings.Split(m, "\n") {
		if rest, ok := strings.CutPrefix(l, "kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds{"); ok {
			_, v, _ := strings.Cut(rest, "} ")
			secs, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return fmt.Errorf("kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds: %q: %v", v, err)
			}
			whole, frac := math.Modf(secs)
			r.loopStarts = append(r.loopStarts, time.Unix(int64(whole), int64(frac*1e9)))
			return nil
		}
	}
	return errors.New("kube-proxy's /metrics has no kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds")
}

// loopStart is, for the sync at index i, the start of its process's
// runner loop (after t0; before that process's first sync) and that
// process's first sync's index, when no runner run of that process came
// before i: then its maxInterval timer still runs from the loop's start.
// ok is false once a runner run has reset it.
func (r *run) loopStart(i int) (from time.Duration, first int, ok bool) {
	proc, first := 0, 0
	for j := 1; j < i; j++ {
		if r.restartSyncs[j] {
			proc, first = proc+1, j
		}
	}
	if proc >= len(r.loopStarts) {
		return 0, 0, false
	}
	for j := first + 1; j < i; j++ {
		if !r.syncs[j].Forced {
			return 0, 0, false
		}
	}
	return r.since(r.loopStarts[proc]), first, true
}

// since is a real instant after the virtual 0 in effect then (t0, or the
// one a restart before set).
func (r *run) since(t time.Time) time.Duration {
	if len(r.t0s) == 0 {
		return t.Sub(r.t0)
	}
	t0 := r.t0s[0]
	for i, at := range r.restartedAt {
		if !t.Before(at) {
			t0 = r.t0s[i+1]
		}
	}
	return t.Sub(t0)
}

// replayStep is one thing the replay does at a virtual instant: an action
// of the transcript's script, or an operator's flush of iptables tables.
type replayStep struct {
	At     time.Duration
	Action *transcript.Action
	// Pod is a Pod or Node write of a controller story (controller_test.go
	// podWriter).
	Pod *transcript.Write
	// Flush are the tables an iptablesFlush step empties (`iptables -t
	// TABLE -F; iptables -t TABLE -X` each), in its order.
	Flush []string
}

// flushCommand is one command of an iptablesFlush step as the trace
// records it (scenarios/iptablesmode Flush).
var flushCommand = regexp.MustCompile(`^iptables -t (\w+) -([FX])$`)

// replaySteps is the transcript's script with the iptablesFlush steps
// merged in at their instants (a transcript lists such a step as
// unsupported: kube-proxy's code driven through its API objects has no
// counterpart, but its kernel here has: the operator's commands run in
// kube-proxy's namespace).
//
// In a controller story (withController) the slice writes proxysim's
// controller made are left out (upstream's controller makes its own) and
// the Pod and Node writes are merged in, in the order they were made.
func replaySteps(tr *transcript.Transcript, withController bool) ([]replayStep, error) {
	var out []replayStep
	for i := range tr.Script {
		a := &tr.Script[i]
		if withController && a.Write != nil && a.Write.By == endpointslice.Name {
			continue
		}
		out = append(out, replayStep{At: a.At, Action: a})
	}
	if withController {
		// Merged in the order the writes were made (Seq); a fault or
		// restart at a Pod write's instant stays after it.
		var merged []replayStep
		p := 0
		for _, st := range out {
			for p < len(tr.Pods) && (tr.Pods[p].At < st.At || tr.Pods[p].At == st.At && (st.Action.Write == nil || tr.Pods[p].Seq < st.Action.Write.Seq)) {
				merged = append(merged, replayStep{At: tr.Pods[p].At, Pod: &tr.Pods[p]})
				p++
			}
			merged = append(merged, st)
		}
		for ; p < len(tr.Pods); p++ {
			merged = append(merged, replayStep{At: tr.Pods[p].At, Pod: &tr.Pods[p]})
		}
		out = merged
	}
	for _, st := range tr.Steps {
		if st.Op != "iptablesFlush" {
			continue
		}
		f := replayStep{At: st.At, Flush: []string{}}
		for _, c := range strings.Split(strings.TrimSuffix(st.Detail, " (operator)"), "; ") {
			m := flushCommand.FindStringSubmatch(c)
			if m == nil {
				return nil, fmt.Errorf("iptablesFlush at %v: cannot read %q", st.At, c)
			}
			if m[2] == "F" {
				f.Flush = append(f.Flush, m[1])
			}
		}
		out = append(out, f)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At < out[j].At })
	return out, nil
}

// garbageCollector is the writer proxysim's world names for the garbage
// collector's deletes (sim/controllers/endpointslice).
const garbageCollector = "garbage-collector"

// deleteServiceSlices deletes the EndpointSlice controller's slices of the
// Service that owned s, as the garbage collector does once the Service is
// gone (their owner reference).
func deleteServiceSlices(ctx context.Context, client kubernetes.Interface, obj runtime.Object) error {
	s := obj.(*discovery.EndpointSlice)
	sel := discovery.LabelServiceName + "=" + s.Labels[discovery.LabelServiceName] + "," + discovery.LabelManagedBy + "=" + s.Labels[discovery.LabelManagedBy]
	return client.DiscoveryV1().EndpointSlices(s.Namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: sel})
}

// kindOf is "Service" or "EndpointSlice" by the object's Go type.
func kindOf(o runtime.Object) string {
	switch o.(type) {
	case *v1.Service:
		return "Service"
	case *discovery.EndpointSlice:
		return "EndpointSlice"
	}
	return fmt.Sprintf("%T", o)
}

// within reports whether a real instant (after t0) is a predicted one
// (after 0) give or take tol.
func within(real, pred, tol time.Duration) bool {
	d := real - pred
	return d <= tol && d >= -tol
}

// compareRun matches every real sync with proxysim's prediction: the same
// number, each start within tolerance, the same outcome, and the same
// tables after each; then the metrics. It returns one line per difference,
// and the largest start offset seen.
func compareRun(t *testing.T, r *run, facts clusterFacts, mode string, tol time.Duration) (diffs, raced []string, jitter time.Duration) {
	// The runner's runs cost what kube-proxy logged for them; direct
	// syncs (the canary monitor's) cost nothing in proxysim.
	var runs []time.Duration
	for i, s := range r.syncs {
		if i > 0 && !s.Forced && !r.restartSyncs[i] {
			runs = append(runs, s.Elapsed)
		}
	}
	ptr, err := recordPredicted(predicted(r.s, facts, runs), runs)
	if err != nil {
		t.Fatalf("proxysim's prediction: %v", err)
	}
	writeRaced := false
	var pred []transcript.Sync
	var sliceDiffs, sliceRaced []string
	if r.slices != nil {
		// Upstream's controller's slices against proxysim's controller's;
		// its writes count as the writes near a sync (the race rule
		// below), as the replay's own do.
		real := realSliceWrites(r.slices.Events(), r, r.slices.RunAt, r.proxyStart)
		predicted := predictedSliceWrites(ptr, r.stamps)
		sliceDiffs, r.sliceJitter = compareSliceWrites(predicted, real, tol)
		for _, w := range real {
			r.writeAt = append(r.writeAt, w.At)
		}
		var rs []time.Duration
		for _, g := range r.syncs {
			rs = append(rs, r.since(g.Start))
		}
		d, rc := compareSliceStates(predicted, ptr.Syncs, real, rs, tol)
		sliceDiffs, sliceRaced = append(sliceDiffs, d...), rc
	}
	for _, p := range ptr.Syncs {
		if p.Start <= r.s.Length()+tolerance { // as the real syncs are counted
			pred = append(pred, p)
		}
	}
	if len(pred) != len(r.syncs) {
		diffs = append(diffs, fmt.Sprintf("%d syncs predicted %v, %d by kube-proxy %v", len(pred), predStarts(pred), len(r.syncs), realStarts(r)))
	}
	for i := 0; i < min(len(pred), len(r.syncs)); i++ {
		p, g := pred[i], r.syncs[i]
		at := r.since(g.Start)
		// The first, direct sync ends at t0: it starts its own duration
		// before, where proxysim's, which takes no time, starts at 0; so
		// does a restarted kube-proxy's first (see run.restart).
		switch {
		case i == 0:
		case r.restartSyncs[i]:
			if p.Why != initialWhy {
				diffs = append(diffs, fmt.Sprintf("sync %d: the restarted kube-proxy's first sync, proxysim predicted a sync at %v (%s)", i+1, p.Start, p.Why))
			}
		case p.Why == canaryWhy:
			// The canary monitor's syncs are timed from the monitor's own
			// origin on each side (see monitorOrigin).
			if !g.Forced {
				diffs = append(diffs, fmt.Sprintf("sync %d: predicted as the canary monitor's forced sync at %v, kube-proxy's at %v was not forced", i+1, p.Start, at.Round(time.Millisecond)))
			}
			realFrom, predFrom := r.monitorOrigin(at), predictedMonitorOrigin(pred[:i])
			if d := absDur((at - realFrom) - (p.Start - predFrom)); d > jitter {
				jitter = d
			}
			if !within(at-realFrom, p.Start-predFrom, tol) {
				diffs = append(diffs, fmt.Sprintf("sync %d: predicted %v after the canary monitor's start at %v (%s), kube-proxy %v after its monitor's start at %v (off by %v, tolerance %v)", i+1, p.Start-predFrom, predFrom, p.Why, (at-realFrom).Round(time.Millisecond), realFrom.Round(time.Millisecond), ((at-realFrom)-(p.Start-predFrom)).Round(time.Millisecond), tol))
			}
		case g.Forced:
			diffs = append(diffs, fmt.Sprintf("sync %d at %v: kube-proxy's canary monitor forced it, proxysim predicted a sync at %v (%s)", i+1, at.Round(time.Millisecond), p.Start, p.Why))
		default:
			realAt, predAt, from := at, p.Start, ""
			if realFrom, first, ok := r.loopStart(i); ok && p.Why == periodicWhy {
				// A process's first periodic sync comes maxInterval after
				// its runner's loop began: before its first sync in real
				// time, with it in proxysim (where start-up takes no
				// time). Each side is timed from its own loop's start.
				realAt, predAt = at-realFrom, p.Start-pred[first].Start
				from = fmt.Sprintf(" after its runner's loop began at %v", realFrom.Round(time.Millisecond))
			}
			if d := absDur(realAt - predAt); d > jitter {
				jitter = d
			}
			if !within(realAt, predAt, tol) {
				diffs = append(diffs, fmt.Sprintf("sync %d: predicted at %v (%s), kube-proxy at %v%s (off by %v, tolerance %v)", i+1, predAt, p.Why, realAt.Round(time.Millisecond), from, (realAt-predAt).Round(time.Millisecond), tol))
			}
		}
		if (p.Err != "") != g.Failed {
			diffs = append(diffs, fmt.Sprintf("sync %d: predicted error %q, kube-proxy failed=%v", i+1, p.Err, g.Failed))
		}
		if g.SnapErr != nil {
			diffs = append(diffs, fmt.Sprintf("sync %d: reading the kernel: %v", i+1, g.SnapErr))
			continue
		}
		if err := compareTables(mode, p.Dataplane, g.Dataplane); err != nil && p.Why == canaryWhy && compareTables(mode, withoutCanary(p.Dataplane), withoutCanary(g.Dataplane)) == nil {
			// The monitor creates its canaries again right after its
			// sync, racing with the kernel's read here; proxysim's
			// snapshot is taken before.
			raced = append(raced, fmt.Sprintf("sync %d at %v: the canary monitor's %s chains, created right after its sync, were read with it", i+1, p.Start, canaryChain))
		} else if err != nil {
			// Writes issued within the tolerance of a sync's start may
			// land on either side of it in real time: accepted when the
			// next sync leaves the same tables on both sides (the write
			// was programmed one sync earlier or later, not lost), as the
			// bubble comparison accepts a race at one virtual instant.
			if i+1 < min(len(pred), len(r.syncs)) && r.writeNear(at, tol) && r.syncs[i+1].SnapErr == nil &&
				compareTables(mode, pred[i+1].Dataplane, r.syncs[i+1].Dataplane) == nil {
				writeRaced = true
				raced = append(raced, fmt.Sprintf("sync %d at %v: a write issued within %v of its start was programmed by a neighbouring sync; sync %d agrees", i+1, p.Start, tol, i+2))
				continue
			}
			note := ""
			if g.Overlapped {
				note = " (the next sync had started before the kernel was read)"
			}
			diffs = append(diffs, fmt.Sprintf("sync %d at %v: tables differ%s: %v", i+1, p.Start, note, err))
		}
	}
	localhost := 0
	if n := len(r.syncs); n > 0 && mode == "iptables" {
		_, localhost = withoutNFAcct(r.syncs[n-1].Dataplane)
	}
	// After a race the last syncs' payloads are split differently on the
	// two sides (tables agree): the rules written by the last sync are not
	// comparable then.
	var skip []string
	if writeRaced {
		skip = append(skip, "kubeproxy_sync_proxy_rules_iptables_last")
	}
	diffs = append(diffs, compareMetrics(append(r.metricsBefore[:len(r.metricsBefore):len(r.metricsBefore)], r.metrics), string(ptr.Result.Metrics), localhost, skip...)...)
	return append(diffs, sliceDiffs...), append(raced, sliceRaced...), jitter
}

// canaryWhy is why proxysim's canary monitor syncs (scenarios/iptablesmode
// NewBackend's SyncNow).
const canaryWhy = "canary"

// periodicWhy is why the runner runs when maxInterval elapsed (sim/runner
// ReasonPeriodic).
const periodicWhy = "periodic"

// initialWhy is why a proxy's first, direct sync runs (at start and after
// each restart; sim's proxy consumer).
const initialWhy = "initial"

// canaryChain is kube-proxy's canary chain (sim/iptables ChainCanary).
const canaryChain = "KUBE-PROXY-CANARY"

// withoutCanary is iptables-save text without the (empty) canary chains.
func withoutCanary(save string) string {
	var out []string
	for _, l := range strings.Split(save, "\n") {
		if strings.HasPrefix(l, ":"+canaryChain+" ") {
			continue
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}

// monitorOrigin is the start (after t0) of the real canary monitor's
// interval that a sync at `at` ended: the last time it created its
// canaries before. Its first one is at the proxier's construction, before
// the informers synced and the first sync ran (so before t0); after each
// forced sync it creates them again, when that sync has ended.
func (r *run) monitorOrigin(at time.Duration) time.Duration {
	from := time.Duration(0)
	for _, c := range r.canaryAt {
		if c < at {
			from = c
		}
	}
	return from
}

// predictedMonitorOrigin is the same for proxysim's monitor, given the
// syncs before: its first interval starts at 0 with the proxy (and again
// with each restarted one, at its first sync), each later one when its
// last forced sync ended (a direct sync takes no time in proxysim).
func predictedMonitorOrigin(before []transcript.Sync) time.Duration {
	from := time.Duration(0)
	for _, p := range before {
		if p.Why == canaryWhy || p.Why == initialWhy {
			from = p.End
		}
	}
	return from
}

// writeNear reports whether a write was issued within tol of at.
func (r *run) writeNear(at, tol time.Duration) bool {
	for _, w := range r.writeAt {
		if within(w, at, tol) {
			return true
		}
	}
	return false
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

func predStarts(s []transcript.Sync) []time.Duration {
	var out []time.Duration
	for _, x := range s {
		out = append(out, x.Start)
	}
	return out
}

func realStarts(r *run) []time.Duration {
	var out []time.Duration
	for _, x := range r.syncs {
		out = append(out, r.since(x.Start).Round(time.Millisecond))
	}
	return out
}

// describe is a run's syncs for the log: start after t0, full or partial,
// logged duration.
func describe(r *run) string {
	var b strings.Builder
	for i, s := range r.syncs {
		kind := "partial"
		if s.Full {
			kind = "full"
		}
		fmt.Fprintf(&b, "  sync %d at %v, %s, %v", i+1, r.since(s.Start).Round(time.Millisecond), kind, s.Elapsed.Round(100*time.Microsecond))
		if s.Failed {
			b.WriteString(", failed")
		}
		if s.Forced {
			b.WriteString(", forced by the canary monitor")
		}
		b.WriteString("\n")
	}
	for _, c := range r.canaryAt {
		fmt.Fprintf(&b, "  the canary monitor created its canaries at %v (starting its interval)\n", c.Round(time.Millisecond))
	}
	return b.String()
}
