package transcript

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
)

// Target is a proxy built from its own code (kube-proxy's, in
// e2e/upstream) that a transcript drives inside a synctest bubble.
type Target interface {
	// Start builds the proxy over client and starts it at the current
	// virtual instant, as its own server would: informers, config
	// handlers, its sync loop. It is called once at 0 and again at every
	// restart, after the previous one was stopped. stop must end every
	// goroutine Start made.
	Start(ctx context.Context, client kubernetes.Interface) (stop func(), err error)
	// Fail makes the next n dataplane writes fail.
	Fail(n int)
}

// Drive replays the transcript against target. It must be called inside
// a synctest bubble (synctest.Test), where time.Sleep moves virtual time:
// the scenario's objects go into a fake clientset, target starts, and
// every write, fault and restart of the script happens at its virtual
// instant, each followed by synctest.Wait so that the proxy has handled
// it before the next. It ends at the scenario's length with every
// goroutine stopped.
//
// wait.NeverStop, a channel made outside any bubble that kube-proxy's
// SyncLoop selects on, is replaced for the proxy's lifetime by one made
// here (a select on an outside channel would freeze virtual time): no
// two Drives may run at once.
func (t *Transcript) Drive(target Target) (err error) {
	origin := time.Now()
	var objs []runtime.Object
	for _, o := range t.Initial {
		objs = append(objs, bare(o))
	}
	client := fake.NewClientset(objs...)
	saved := wait.NeverStop
	defer func() { wait.NeverStop = saved }()
	var stop func()
	start := func() error {
		never := make(chan struct{})
		wait.NeverStop = never
		ctx, cancel := context.WithCancel(context.Background())
		s, err := target.Start(ctx, client)
		stop = func() {
			cancel()
			close(never)
			if s != nil {
				s()
			}
			synctest.Wait()
		}
		if err != nil {
			return err
		}
		synctest.Wait()
		return nil
	}
	if err := start(); err != nil {
		stop()
		return err
	}
	defer func() { stop() }()
	until := func(at time.Duration) {
		if d := at - time.Since(origin); d > 0 {
			time.Sleep(d)
		}
	}
	for _, a := range t.Script {
		until(a.At)
		switch {
		case a.Restart:
			stop()
			if err := start(); err != nil {
				return fmt.Errorf("restart at %v: %w", a.At, err)
			}
		case a.Fault != nil:
			target.Fail(a.Fault.N)
		case a.Write != nil:
			if err := write(client, a.Write); err != nil {
				return fmt.Errorf("%v: %s %s: %w", a.At, a.Write.Op, a.Write.Kind, err)
			}
		}
		synctest.Wait()
	}
	until(t.Scenario.Length())
	synctest.Wait()
	return nil
}

// bare is a copy of o without the resourceVersion proxysim's API server
// stamped: client-go's fake tracker refuses an update whose version is not
// the stored one, and assigns none itself.
func bare(o runtime.Object) runtime.Object {
	c := o.DeepCopyObject()
	if m, ok := c.(metav1.Object); ok {
		m.SetResourceVersion("")
	}
	// The one API-server default kube-proxy relies on and proxysim's
	// store does not apply (it defaults nothing): a ClientIP affinity's
	// timeout, 10800 s (k8s.io/kubernetes pkg/apis/core/v1 defaults).
	// Without it kube-proxy's newBaseServiceInfo dereferences nil.
	if svc, ok := c.(*v1.Service); ok && svc.Spec.SessionAffinity == v1.ServiceAffinityClientIP {
		if svc.Spec.SessionAffinityConfig == nil {
			svc.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{}
		}
		if svc.Spec.SessionAffinityConfig.ClientIP == nil {
			svc.Spec.SessionAffinityConfig.ClientIP = &v1.ClientIPConfig{}
		}
		if svc.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds == nil {
			timeout := int32(v1.DefaultClientIPServiceAffinitySeconds)
			svc.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds = &timeout
		}
	}
	return c
}

func write(client kubernetes.Interface, w *Write) error {
	ctx := context.Background()
	switch o := bare(w.Obj).(type) {
	case *v1.Service:
		c := client.CoreV1().Services(o.Namespace)
		switch w.Op {
		case "add":
			_, err := c.Create(ctx, o, metav1.CreateOptions{})
			return err
		case "update":
			_, err := c.Update(ctx, o, metav1.UpdateOptions{})
			return err
		case "delete":
			return c.Delete(ctx, o.Name, metav1.DeleteOptions{})
		}
	case *discovery.EndpointSlice:
		c := client.DiscoveryV1().EndpointSlices(o.Namespace)
		switch w.Op {
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
	return fmt.Errorf("cannot write %T (%s)", w.Obj, w.Op)
}

// Observed is one sync of the implementation under comparison, as its
// own log reported it.
type Observed struct {
	Start, End time.Duration
	Full       bool
	Failed     bool
	// Dataplane is the snapshot taken when the sync reported completion.
	Dataplane string
}

// SyncLog is a logr sink that turns kube-proxy's proxier log lines into
// Observed syncs, stamped with the bubble's virtual clock. The messages
// are those of syncProxyRules in pkg/proxy/iptables and pkg/proxy/nftables
// (v1.33 and v1.36): "Syncing iptables rules" / "Syncing nftables rules"
// (with fullSync) at the start, "Sync failed" on failure, "SyncProxyRules
// complete" from its deferred function, after every other effect.
type SyncLog struct {
	origin   time.Time
	snapshot func() string
	mu       sync.Mutex
	syncs    []Observed
}

// NewSyncLog stamps syncs relative to origin and takes snapshot() at each
// completion.
func NewSyncLog(origin time.Time, snapshot func() string) *SyncLog {
	return &SyncLog{origin: origin, snapshot: snapshot}
}

// Logger is the logger to put in the proxier's context.
func (l *SyncLog) Logger() logr.Logger { return logr.New(&syncSink{l: l}) }

// count is the number of syncs started so far.
func (l *SyncLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.syncs)
}

// Syncs lists the syncs seen so far.
func (l *SyncLog) Syncs() []Observed {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Observed(nil), l.syncs...)
}

func (l *SyncLog) info(msg string, kv []any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Since(l.origin)
	switch {
	case strings.HasPrefix(msg, "Syncing ") && (strings.HasSuffix(msg, "tables rules") || msg == "Syncing ipvs proxier rules"):
		o := Observed{Start: now, End: -1}
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i] == "fullSync" {
				o.Full, _ = kv[i+1].(bool)
			}
		}
		l.syncs = append(l.syncs, o)
	case msg == "Sync failed" && len(l.syncs) > 0:
		l.syncs[len(l.syncs)-1].Failed = true
	case (msg == "SyncProxyRules complete" || msg == "syncProxyRules complete") && len(l.syncs) > 0:
		s := &l.syncs[len(l.syncs)-1]
		if s.End < 0 {
			s.End = now
			s.Dataplane = l.snapshot()
		}
	}
}

// syncSink passes every message up to verbosity 4 (the IPVS proxier's
// completion line) to its SyncLog; the rest is dropped.
type syncSink struct {
	l    *SyncLog
	vals []any
}

func (s *syncSink) Init(logr.RuntimeInfo)  {}
func (s *syncSink) Enabled(level int) bool { return level <= 4 }
func (s *syncSink) Info(_ int, msg string, kv ...any) {
	s.l.info(msg, append(append([]any(nil), s.vals...), kv...))
}
func (s *syncSink) Error(error, string, ...any) {}
func (s *syncSink) WithValues(kv ...any) logr.LogSink {
	return &syncSink{l: s.l, vals: append(append([]any(nil), s.vals...), kv...)}
}
func (s *syncSink) WithName(string) logr.LogSink { return s }

// Compare matches proxysim's syncs with the observed ones: the same
// number, each starting and ending at the same instants, failing or not alike, and
// leaving the same dataplane after canon (the documented normalisations).
// It returns one line per difference.
//
// One outcome is accepted and returned apart, in raced: when a write and
// a sync fall on the same virtual instant, kube-proxy's runner goroutine
// and the goroutine that delivers the write are both runnable at that
// instant and either may go first; proxysim delivers the write first. A
// sync whose dataplane differs is taken as having run before the write
// only if a write happened at exactly its instant and the next sync
// leaves the same dataplane on both sides (the write was not lost, only
// programmed one sync later).
func (t *Transcript) Compare(got []Observed, canon func(string) (string, error), diff func(a, b string) string) (diffs, raced []string) {
	n := len(t.Syncs)
	if len(got) != n {
		diffs = append(diffs, fmt.Sprintf("%d syncs in proxysim %v, %d in kube-proxy %v", n, starts(t.Syncs), len(got), observedStarts(got)))
		if len(got) < n {
			n = len(got)
		}
	}
	writeAt := map[time.Duration]bool{}
	for _, w := range t.Writes {
		writeAt[w.At] = true
	}
	same := func(i int) (bool, string, error) {
		a, err := canon(t.Syncs[i].Dataplane)
		if err != nil {
			return false, "", fmt.Errorf("proxysim's dataplane: %v", err)
		}
		b, err := canon(got[i].Dataplane)
		if err != nil {
			return false, "", fmt.Errorf("kube-proxy's dataplane: %v", err)
		}
		if a == b {
			return true, "", nil
		}
		return false, diff(b, a), nil
	}
	for i := 0; i < n; i++ {
		w, g := t.Syncs[i], got[i]
		if w.Start != g.Start {
			diffs = append(diffs, fmt.Sprintf("sync %d: proxysim at %v (%s), kube-proxy at %v", i+1, w.Start, w.Why, g.Start))
			continue
		}
		if w.End != g.End {
			// A run lasts its cost: the same on both sides when the
			// other side's dataplane charges it (Charge).
			diffs = append(diffs, fmt.Sprintf("sync %d at %v: proxysim ended at %v, kube-proxy at %v", i+1, w.Start, w.End, g.End))
		}
		if (w.Err != "") != g.Failed {
			diffs = append(diffs, fmt.Sprintf("sync %d at %v: proxysim error %q, kube-proxy failed=%v", i+1, w.Start, w.Err, g.Failed))
		}
		ok, d, err := same(i)
		if err != nil {
			diffs = append(diffs, fmt.Sprintf("sync %d at %v: %v", i+1, w.Start, err))
			continue
		}
		if ok {
			continue
		}
		if writeAt[w.Start] && i+1 < n {
			if next, _, err := same(i + 1); err == nil && next {
				raced = append(raced, fmt.Sprintf("sync %d at %v ran before the write at the same instant; sync %d at %v programmed it", i+1, w.Start, i+2, t.Syncs[i+1].Start))
				continue
			}
		}
		diffs = append(diffs, fmt.Sprintf("sync %d at %v: dataplanes differ (- kube-proxy, + proxysim):\n%s", i+1, w.Start, d))
	}
	return diffs, raced
}

func starts(s []Sync) []time.Duration {
	var out []time.Duration
	for _, x := range s {
		out = append(out, x.Start)
	}
	return out
}

func observedStarts(s []Observed) []time.Duration {
	var out []time.Duration
	for _, x := range s {
		out = append(out, x.Start)
	}
	return out
}
