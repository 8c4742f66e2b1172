package bubble

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/sim/route"
)

// The comparison of a proxy under test with proxysim's model of kube-proxy
// v1.36 (compare: kube-proxy). Both run in one world, each programming its
// own fake dataplane; after every write of either, each probe — every
// Service port's ClusterIP, and every connection a route expectation
// traces — is traced through both. After each step the probes whose shares
// differ are reported, and for each probe the step changed, when the change
// first became visible in each dataplane.

// ComparedWith says what the comparison is with, for reports.
const ComparedWith = "proxysim's model of kube-proxy v1.36 (the main module cannot import k8s.io/kubernetes; e2e/upstream checks that model against kube-proxy's own code)"

// Comparison is a bubble replay's comparison with kube-proxy, step by step.
type Comparison struct {
	With  string
	Steps []StepComparison
}

// StepComparison is one step's differences: routes whose shares differ
// right after the step, and probes whose change became visible at
// different instants.
type StepComparison struct {
	Step    int
	At      time.Duration
	Pos     scenarios.Pos
	Routes  []RouteDiff
	Latency []LatencyDiff
}

// RouteDiff is one probe traced through both dataplanes.
type RouteDiff struct {
	Probe     string
	Proxy     string // the proxy under test's shares
	KubeProxy string // the model's
}

// LatencyDiff is when a probe's change first became visible in each
// dataplane, from the step's instant; nil when it did not change before
// the next step (or the end).
type LatencyDiff struct {
	Probe     string
	Proxy     *time.Duration
	KubeProxy *time.Duration
}

// Differs reports whether any step differs.
func (c *Comparison) Differs() bool {
	for _, s := range c.Steps {
		if len(s.Routes) > 0 || len(s.Latency) > 0 {
			return true
		}
	}
	return false
}

// probe is one connection traced through both dataplanes.
type probe struct {
	name string
	pkt  route.Packet
}

// snapshot is what every probe did in one dataplane from an instant on.
type snapshot struct {
	at     time.Duration
	shares map[string]string
}

type comparer struct {
	b      *bubble
	client kubernetes.Interface
	probes []probe
	known  map[string]bool
	// src is where ClusterIP probes come from: the first route
	// expectation's client, or a pod address of no node.
	src net.IP
	// hist holds each dataplane's snapshots (0: the proxy under test, 1:
	// the model), a new one only when something changed.
	hist       [2][]snapshot
	modelWrote bool
	// before[i] is where each history stood just before step i acted, and
	// beforeVals[i] what it held then (a snapshot of the same instant may
	// be overwritten by what the step did).
	before     map[int][2]int
	beforeVals map[int][2]map[string]string
	steps      []StepComparison
}

func newComparer(b *bubble, client kubernetes.Interface) *comparer {
	c := &comparer{b: b, client: client, known: map[string]bool{}, before: map[int][2]int{}, beforeVals: map[int][2]map[string]string{}, src: net.ParseIP("10.244.254.254")}
	first := true
	for i := range b.s.Timeline {
		e := b.s.Timeline[i].Expect
		if e == nil {
			continue
		}
		for _, ch := range e.Checks {
			pr, ok := ch.(interface{ Probe() (route.Packet, bool) })
			if !ok {
				continue
			}
			if pkt, ok := pr.Probe(); ok {
				if first {
					c.src, first = pkt.Src, false
				}
				c.add(pkt)
			}
		}
	}
	return c
}

func (c *comparer) add(pkt route.Packet) {
	name := fmt.Sprintf("%s %s from %s", strings.ToUpper(pkt.Protocol), net.JoinHostPort(pkt.Dst.String(), fmt.Sprint(pkt.DPort)), pkt.Src)
	if c.known[name] {
		return
	}
	c.known[name] = true
	c.probes = append(c.probes, probe{name, pkt})
	sort.Slice(c.probes, func(i, j int) bool { return c.probes[i].name < c.probes[j].name })
}

// refreshProbes adds a probe for every port of every Service with a
// ClusterIP the API server holds now.
func (c *comparer) refreshProbes() {
	list, err := c.client.CoreV1().Services(metav1.NamespaceAll).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, svc := range list.Items {
		ip := net.ParseIP(svc.Spec.ClusterIP)
		if ip == nil || ip.To4() == nil || svc.Spec.Type == v1.ServiceTypeExternalName {
			continue
		}
		for _, p := range svc.Spec.Ports {
			proto := strings.ToLower(string(p.Protocol))
			if proto == "" {
				proto = "tcp"
			}
			c.add(route.Packet{Src: c.src, Dst: ip, DPort: int(p.Port), Protocol: proto})
		}
	}
}

// probeList is what is compared: the probes, or the snapshot.
func (c *comparer) probeList() []probe {
	if c.bySnapshots() {
		return []probe{{name: snapshotProbe}}
	}
	return c.probes
}

func (c *comparer) tracers() [2]RouteTracer {
	m, _ := c.b.model.(RouteTracer)
	if mt, ok := c.b.mode.(ModelTracer); ok {
		m = mt.TraceModel(c.b.model)
	}
	return [2]RouteTracer{c.b.od, m}
}

// snapshotProbe names the whole dataplane's snapshot, compared instead of
// routes for a mode without a tracer (see SnapshotComparer).
const snapshotProbe = "dataplane table"

// SnapshotComparer is implemented by an OwnDataplane without a tracer:
// a comparison with kube-proxy compares the two dataplanes' snapshots,
// each first passed through ComparableSnapshot (which drops what the
// two cannot share, such as connection counters).
type SnapshotComparer interface {
	ComparableSnapshot(snapshot string) string
}

// bySnapshots reports whether the comparison is of snapshots.
func (c *comparer) bySnapshots() bool {
	_, ok := c.b.od.(SnapshotComparer)
	return ok
}

// observe traces every probe through both dataplanes now and records what
// changed.
func (c *comparer) observe() {
	now := c.b.now()
	snap := c.bySnapshots()
	for i, tr := range c.tracers() {
		cur := map[string]string{}
		if snap {
			dp := []scenarios.Dataplane{c.b.od, c.b.model}[i]
			text, err := dp.Snapshot()
			if err != nil {
				text = "error: " + err.Error()
			}
			cur[snapshotProbe] = normalize(c.b.od.(SnapshotComparer).ComparableSnapshot(text))
		} else {
			for _, p := range c.probes {
				cur[p.name] = traceString(tr, p.pkt)
			}
		}
		h := c.hist[i]
		if n := len(h); n > 0 && sameShares(h[n-1].shares, cur) {
			continue
		}
		if n := len(h); n > 0 && h[n-1].at == now {
			h[n-1].shares = cur
		} else {
			h = append(h, snapshot{at: now, shares: cur})
		}
		c.hist[i] = h
	}
	c.modelWrote = false
}

func traceString(tr RouteTracer, pkt route.Packet) string {
	if tr == nil {
		return "no tracer"
	}
	sh, err := tr.Route(pkt, nil)
	if err != nil {
		return "error: " + err.Error()
	}
	return sh.String()
}

func sameShares(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func (c *comparer) beforeStep(i int) {
	c.observe()
	c.before[i] = [2]int{len(c.hist[0]) - 1, len(c.hist[1]) - 1}
	var vals [2]map[string]string
	for d, h := range c.hist {
		if len(h) > 0 {
			vals[d] = h[len(h)-1].shares
		}
	}
	c.beforeVals[i] = vals
}

// afterStep compares the routes of both dataplanes right after step i.
func (c *comparer) afterStep(i int) {
	st := &c.b.s.Timeline[i]
	sc := StepComparison{Step: i, At: st.At.D(), Pos: scenarios.Pos{Line: st.Src.Line, Column: st.Src.Column, Path: fmt.Sprintf("timeline[%d]", i)}}
	h0, h1 := c.hist[0], c.hist[1]
	if len(h0) > 0 && len(h1) > 0 {
		a, m := h0[len(h0)-1].shares, h1[len(h1)-1].shares
		for _, p := range c.probeList() {
			if a[p.name] != m[p.name] {
				sc.Routes = append(sc.Routes, RouteDiff{Probe: p.name, Proxy: a[p.name], KubeProxy: m[p.name]})
			}
		}
	}
	c.steps = append(c.steps, sc)
}

// end works out, for every step that acted, when each probe's change
// became visible in each dataplane (before the next step).
func (c *comparer) end() {
	tl := c.b.s.Timeline
	for k := range c.steps {
		sc := &c.steps[k]
		i := sc.Step
		if len(tl[i].Actions) == 0 {
			continue
		}
		next := time.Duration(1<<63 - 1)
		if i+1 < len(tl) {
			next = tl[i+1].At.D()
		}
		from := c.before[i]
		for _, p := range c.probeList() {
			var seen [2]*time.Duration
			for d := 0; d < 2; d++ {
				seen[d] = c.firstChange(d, from[d], c.beforeVals[i][d][p.name], p.name, sc.At, next)
			}
			if !sameInstant(seen[0], seen[1]) {
				sc.Latency = append(sc.Latency, LatencyDiff{Probe: p.name, Proxy: seen[0], KubeProxy: seen[1]})
			}
		}
	}
}

// firstChange is when probe's shares in dataplane d first differed from
// was (what they were before the step), at or after at and before next,
// searching from snapshot from on; nil if they did not.
func (c *comparer) firstChange(d, from int, was, name string, at, next time.Duration) *time.Duration {
	h := c.hist[d]
	for j := max(from, 0); j < len(h); j++ {
		if h[j].at < at {
			continue
		}
		if h[j].at >= next {
			break
		}
		if v, ok := h[j].shares[name]; ok && v != was {
			l := h[j].at - at
			return &l
		}
	}
	return nil
}

func sameInstant(a, b *time.Duration) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

func (c *comparer) result() *Comparison {
	out := &Comparison{With: ComparedWith}
	for _, s := range c.steps {
		if len(s.Routes) > 0 || len(s.Latency) > 0 {
			out.Steps = append(out.Steps, s)
		}
	}
	return out
}

func latencyText(d *time.Duration) string {
	if d == nil {
		return "unchanged before the next step"
	}
	return "+" + d.String()
}

// Report is the replay's outcome for a person: each failed expectation
// (file:line:column, the step, expected against got), then with Compare
// each step where the proxy under test and kube-proxy differ, then what
// was skipped.
func (r *Result) Report() string {
	var b strings.Builder
	s := r.Scenario
	status := "PASS"
	if !r.Passed() {
		status = "FAIL"
	}
	fmt.Fprintf(&b, "%s %s (proxy under test on %s): %s, %s, %s\n", status, s.Name, r.Env,
		plural(r.Checks, "check"), plural(len(r.Failures), "failure"), plural(len(r.Writes), "dataplane write"))
	for _, f := range r.Failures {
		fmt.Fprintf(&b, "%s:%d:%d: %s at %v: %s: expected %s, got %s\n", f.File, f.Pos.Line, f.Pos.Column, f.Pos.Path, f.At, f.What, indentTable(f.Expected), indentTable(f.Got))
	}
	if c := r.Compare; c != nil {
		if !c.Differs() {
			fmt.Fprintf(&b, "compared with %s: the same routes at every step, each change visible at the same instant\n", c.With)
		} else {
			fmt.Fprintf(&b, "compared with %s:\n", c.With)
		}
		for _, sc := range c.Steps {
			fmt.Fprintf(&b, "  %s:%d:%d: %s at %v:\n", s.File, sc.Pos.Line, sc.Pos.Column, sc.Pos.Path, sc.At)
			for _, d := range sc.Routes {
				if d.Probe == snapshotProbe {
					fmt.Fprintf(&b, "    %s: proxy:%s\n    kube-proxy:%s\n", d.Probe, indentTable(d.Proxy), indentTable(d.KubeProxy))
					continue
				}
				fmt.Fprintf(&b, "    route %s: proxy %s, kube-proxy %s\n", d.Probe, d.Proxy, d.KubeProxy)
			}
			for _, d := range sc.Latency {
				fmt.Fprintf(&b, "    programming %s: proxy %s, kube-proxy %s%s\n", d.Probe, latencyText(d.Proxy), latencyText(d.KubeProxy), latencyDelta(d))
			}
		}
	}
	if len(r.Skipped) > 0 {
		fmt.Fprintf(&b, "not checked (proxysim's engine only):\n")
		for _, sk := range r.Skipped {
			fmt.Fprintf(&b, "  %s:%s\n", s.File, sk)
		}
	}
	return b.String()
}

func latencyDelta(d LatencyDiff) string {
	if d.Proxy == nil || d.KubeProxy == nil {
		return ""
	}
	diff := *d.Proxy - *d.KubeProxy
	if diff > 0 {
		return fmt.Sprintf(" (proxy %v later)", diff)
	}
	return fmt.Sprintf(" (proxy %v sooner)", -diff)
}

// normalize drops trailing spaces and blank lines, as goldens are
// compared.
func normalize(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n "), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t")
	}
	return strings.Join(lines, "\n")
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

func indentTable(s string) string {
	if !strings.Contains(s, "\n") {
		return s
	}
	return "\n" + s
}
