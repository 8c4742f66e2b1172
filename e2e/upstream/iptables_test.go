package upstream

// The iptables proxier side by side: kube-proxy v1.36.3's own
// (k8s.io/kubernetes/pkg/proxy/iptables) and proxysim's (sim/iptables),
// fed the same random Service and EndpointSlice events, forced to sync at
// the same points, sometimes with the same restore failing on both. After
// every sync the restore payloads, the resulting iptables-save of filter
// and nat, and the iptables metrics must be identical after the
// normalisations in canonical() (see docs/explanation/mode-iptables.md).

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"net"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
	sysctltest "k8s.io/component-helpers/node/util/sysctl/testing"
	"k8s.io/kubernetes/pkg/proxy/conntrack"
	"k8s.io/kubernetes/pkg/proxy/healthcheck"
	kiptables "k8s.io/kubernetes/pkg/proxy/iptables"
	"k8s.io/kubernetes/pkg/proxy/metrics"
	proxyutil "k8s.io/kubernetes/pkg/proxy/util"
	utiliptables "k8s.io/kubernetes/pkg/util/iptables"
	iptablestest "k8s.io/kubernetes/pkg/util/iptables/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/proxysim/proxysim/e2e/transcript"
	"github.com/proxysim/proxysim/fakes"
	"github.com/proxysim/proxysim/sim/iptables"
	"github.com/proxysim/proxysim/sim/proxy"
)

// iptSequences lets CI run fewer iptables sequences than tracker ones:
// one iptables sequence costs about ten tracker sequences.
var iptSequences = flag.Int("ipt-sequences", 0, "random sequences for the iptables comparison (0: as many as -sequences)")

// errInjected is the restore failure both sides get at the same sync.
var errInjected = errors.New("injected restore failure")

// kubeIPT is upstream's FakeIPTables behind a recorder: it keeps the last
// restore payload and fails the next restore on demand, before the fake
// sees it. EnsureRule gets kube-proxy's argv; the fake joins it with
// spaces, so an argument with a space (a comment) is quoted here, as
// iptables-save prints it.
type kubeIPT struct {
	*iptablestest.FakeIPTables
	last     string
	failNext bool
	// discard accepts restores without applying them (benchmarks).
	discard bool
}

func (f *kubeIPT) RestoreAll(data []byte, flush utiliptables.FlushFlag, counters utiliptables.RestoreCountersFlag) error {
	f.last = string(data)
	if f.failNext {
		f.failNext = false
		return errInjected
	}
	if f.discard {
		return nil
	}
	return f.FakeIPTables.RestoreAll(data, flush, counters)
}

func (f *kubeIPT) EnsureRule(pos utiliptables.RulePosition, table utiliptables.Table, chain utiliptables.Chain, args ...string) (bool, error) {
	quoted := make([]string, len(args))
	for i, a := range args {
		if strings.Contains(a, " ") {
			a = `"` + a + `"`
		}
		quoted[i] = a
	}
	return f.FakeIPTables.EnsureRule(pos, table, chain, quoted...)
}

// ourIPT is the same recorder in front of proxysim's fake.
type ourIPT struct {
	*fakes.IPTables
	last     string
	failNext bool
	discard  bool
}

func (f *ourIPT) Restore(payload string) error {
	f.last = payload
	if f.failNext {
		f.failNext = false
		return errInjected
	}
	if f.discard {
		return nil
	}
	return f.IPTables.Restore(payload)
}

// setUnexported replaces an unexported field of upstream's Proxier. The
// exported NewProxier wires a real nfacct client, a real conntrack
// handle and a real health-check server (which would create counters,
// delete conntrack entries and listen on node ports of this host);
// upstream's own tests build the struct in a _test.go file, which cannot be
// imported. v == nil sets the zero value.
func setUnexported(p any, field string, v any) {
	f := reflect.ValueOf(p).Elem().FieldByName(field)
	if !f.IsValid() {
		panic("upstream Proxier has no field " + field)
	}
	w := reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
	if v == nil {
		w.Set(reflect.Zero(f.Type()))
		return
	}
	w.Set(reflect.ValueOf(v))
}

// iptConfig is one sequence's proxier settings, on both sides.
type iptConfig struct {
	family             v1.IPFamily
	zone               string
	masqueradeAll      bool
	masqueradeBit      int
	clusterCIDR        string
	nodeIP             string
	localhostNodePorts bool
	tcpLiberal         bool
	randomFully        bool
	syncPeriod         time.Duration
}

func (c iptConfig) String() string {
	return fmt.Sprintf("family=%s zone=%q masqueradeAll=%v bit=%d clusterCIDR=%q nodeIP=%s localhostNodePorts=%v tcpLiberal=%v randomFully=%v syncPeriod=%v",
		c.family, c.zone, c.masqueradeAll, c.masqueradeBit, c.clusterCIDR, c.nodeIP, c.localhostNodePorts, c.tcpLiberal, c.randomFully, c.syncPeriod)
}

func randomConfig(r *rand.Rand) iptConfig {
	c := iptConfig{family: v1.IPv4Protocol, masqueradeBit: 14, localhostNodePorts: true, randomFully: true, syncPeriod: time.Hour}
	if r.Intn(5) == 0 {
		c.family = v1.IPv6Protocol
		c.localhostNodePorts = false // as NewDualStackProxier passes it
	}
	c.zone = []string{"zone-a", "zone-b", ""}[r.Intn(3)]
	c.masqueradeAll = r.Intn(5) == 0
	if r.Intn(4) == 0 {
		c.masqueradeBit = 5 + r.Intn(20)
	}
	if r.Intn(2) == 0 {
		c.clusterCIDR = map[v1.IPFamily]string{v1.IPv4Protocol: "10.0.0.0/8", v1.IPv6Protocol: "fd00::/16"}[c.family]
	}
	nodeIPs := map[v1.IPFamily][]string{v1.IPv4Protocol: {"192.168.0.2", "10.101.3.4", "198.51.100.1"}, v1.IPv6Protocol: {"fd00:101::7", "2001:db8::1"}}[c.family]
	c.nodeIP = nodeIPs[r.Intn(len(nodeIPs))]
	if c.family == v1.IPv4Protocol && r.Intn(5) == 0 {
		c.localhostNodePorts = false
	}
	c.tcpLiberal = r.Intn(5) == 0
	c.randomFully = r.Intn(5) != 0
	// The stale-chain cleanup of large-cluster mode: never again within
	// a sequence, or at every sync (proxysim's clock moves 1s per sync).
	if r.Intn(2) == 0 {
		c.syncPeriod = time.Nanosecond
	}
	return c
}

// iptPair is both proxiers.
type iptPair struct {
	cfg   iptConfig
	k     *kiptables.Proxier
	kIPT  *kubeIPT
	o     *proxy.Proxier
	oBack *iptables.Proxier
	oIPT  *ourIPT
	clk   *clocktesting.FakePassiveClock
	// base are upstream's counters when the pair was built: they are
	// process-wide.
	base kMetrics
}

func newIPTPair(cfg iptConfig) (*iptPair, error) {
	registerIPTablesMetrics()
	fake := iptablestest.NewFake()
	if cfg.family == v1.IPv6Protocol {
		fake = iptablestest.NewIPv6Fake()
	}
	fake.SetHasRandomFully(cfg.randomFully)
	kIPT := &kubeIPT{FakeIPTables: fake}
	sysctl := sysctltest.NewFake()
	if cfg.tcpLiberal {
		sysctl.Settings["net/netfilter/nf_conntrack_tcp_be_liberal"] = 1
	}
	detector := proxyutil.NewNoOpLocalDetector()
	if cfg.clusterCIDR != "" {
		detector = proxyutil.NewDetectLocalByCIDR(cfg.clusterCIDR)
	}
	nodeIP := net.ParseIP(cfg.nodeIP)
	k, err := kiptables.NewProxier(context.Background(), cfg.family, kIPT, sysctl, cfg.syncPeriod, time.Second,
		cfg.masqueradeAll, cfg.localhostNodePorts, cfg.masqueradeBit, detector, nodeName, nodeIP, nil, nil, nil, false)
	if err != nil {
		return nil, err
	}
	setUnexported(k, "nfacct", nil)
	setUnexported(k, "conntrack", conntrack.NewFake())
	setUnexported(k, "serviceHealthServer", healthcheck.NewFakeServiceHealthServer())
	if cfg.zone != "" {
		k.OnTopologyChange(map[string]string{v1.LabelTopologyZone: cfg.zone})
	}

	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	oIPT := &ourIPT{IPTables: fakes.NewIPTables()}
	oBack := iptables.New(iptables.Config{
		Family:               cfg.family,
		MasqueradeBit:        cfg.masqueradeBit,
		ClusterCIDR:          cfg.clusterCIDR,
		MasqueradeAll:        cfg.masqueradeAll,
		NodeIP:               nodeIP,
		NoLocalhostNodePorts: !cfg.localhostNodePorts,
		ConntrackTCPLiberal:  cfg.tcpLiberal,
		NoRandomFully:        !cfg.randomFully,
		SyncPeriod:           cfg.syncPeriod,
	}, oIPT, clk, nil)
	o := proxy.NewProxier(cfg.family, nodeName, cfg.zone, oBack, proxy.EndpointSliceTrackerOptions{})
	return &iptPair{cfg: cfg, k: k, kIPT: kIPT, o: o, oBack: oBack, oIPT: oIPT, clk: clk, base: readKMetrics(cfg.family)}, nil
}

// event delivers one random change to both proxiers.
func (p *iptPair) event(g *gen) string {
	if g.r.Intn(10) < 3 {
		prev, cur := g.serviceChange()
		switch {
		case prev == nil:
			p.k.OnServiceAdd(cur)
			p.o.OnServiceAdd(cur)
		case cur == nil:
			p.k.OnServiceDelete(prev)
			p.o.OnServiceDelete(prev)
		default:
			p.k.OnServiceUpdate(prev, cur)
			p.o.OnServiceUpdate(prev, cur)
		}
		return "service " + describeSvc(prev, cur)
	}
	slice, remove := g.sliceChange()
	if remove {
		p.k.OnEndpointSliceDelete(slice)
		_ = p.o.OnEndpointSliceDelete(slice)
	} else {
		p.k.OnEndpointSliceUpdate(nil, slice)
		_ = p.o.OnEndpointSliceUpdate(nil, slice)
	}
	return fmt.Sprintf("slice %s/%s remove=%v endpoints=%d", slice.Namespace, slice.Name, remove, len(slice.Endpoints))
}

// sync forces a sync on both sides: upstream's OnServiceSynced calls
// syncProxyRules directly every time it is called.
func (p *iptPair) sync(fail bool) {
	p.kIPT.failNext, p.oIPT.failNext = fail, fail
	p.clk.SetTime(p.clk.Now().Add(time.Second))
	p.k.OnServiceSynced()
	_ = p.o.SyncProxyRules()
}

// compare checks the last payloads, the tables and the metrics.
func (p *iptPair) compare() error {
	kp, err := canonical(p.kIPT.last)
	if err != nil {
		return fmt.Errorf("upstream payload: %v\n%s", err, p.kIPT.last)
	}
	op, err := canonical(p.oIPT.last)
	if err != nil {
		return fmt.Errorf("proxysim payload: %v\n%s", err, p.oIPT.last)
	}
	if kp != op {
		return fmt.Errorf("restore payloads differ:\n%s", lineDiff(kp, op))
	}
	var buf bytes.Buffer
	for _, t := range []utiliptables.Table{utiliptables.TableFilter, utiliptables.TableNAT} {
		if err := p.kIPT.SaveInto(t, &buf); err != nil {
			return err
		}
	}
	ks, err := canonical(buf.String())
	if err != nil {
		return fmt.Errorf("upstream save: %v", err)
	}
	os, err := canonical(p.oIPT.SaveAll())
	if err != nil {
		return fmt.Errorf("proxysim save: %v", err)
	}
	if ks != os {
		return fmt.Errorf("iptables-save differs:\n%s", lineDiff(ks, os))
	}
	km := readKMetrics(p.cfg.family).minus(p.base)
	om := ourMetrics(p.oBack.Metrics())
	if km != om {
		return fmt.Errorf("metrics differ:\nkube-proxy %+v\nproxysim   %+v", km, om)
	}
	return nil
}

// kMetrics are the iptables metrics of one family, read from upstream's
// registry, or proxysim's in the same shape.
type kMetrics struct {
	restoreFailures, partialRestoreFailures    float64
	filterTotal, filterLast, natTotal, natLast float64
	noLocalInternal, noLocalExternal           float64
	fullSyncs, partialSyncs                    uint64
}

// minus makes the process-wide counters relative to a pair's start; the
// gauges are per sync and stay as they are.
func (m kMetrics) minus(base kMetrics) kMetrics {
	m.restoreFailures -= base.restoreFailures
	m.partialRestoreFailures -= base.partialRestoreFailures
	m.fullSyncs -= base.fullSyncs
	m.partialSyncs -= base.partialSyncs
	return m
}

func readKMetrics(family v1.IPFamily) kMetrics {
	f := string(family)
	var m kMetrics
	m.restoreFailures, _ = testutil.GetCounterMetricValue(metrics.IPTablesRestoreFailuresTotal.WithLabelValues(f))
	m.partialRestoreFailures, _ = testutil.GetCounterMetricValue(metrics.IPTablesPartialRestoreFailuresTotal.WithLabelValues(f))
	m.filterTotal, _ = testutil.GetGaugeMetricValue(metrics.IPTablesRulesTotal.WithLabelValues("filter", f))
	m.filterLast, _ = testutil.GetGaugeMetricValue(metrics.IPTablesRulesLastSync.WithLabelValues("filter", f))
	m.natTotal, _ = testutil.GetGaugeMetricValue(metrics.IPTablesRulesTotal.WithLabelValues("nat", f))
	m.natLast, _ = testutil.GetGaugeMetricValue(metrics.IPTablesRulesLastSync.WithLabelValues("nat", f))
	m.noLocalInternal, _ = testutil.GetGaugeMetricValue(metrics.SyncProxyRulesNoLocalEndpointsTotal.WithLabelValues("internal", f))
	m.noLocalExternal, _ = testutil.GetGaugeMetricValue(metrics.SyncProxyRulesNoLocalEndpointsTotal.WithLabelValues("external", f))
	m.fullSyncs, _ = testutil.GetHistogramMetricCount(metrics.SyncFullProxyRulesLatency.WithLabelValues(f))
	m.partialSyncs, _ = testutil.GetHistogramMetricCount(metrics.SyncPartialProxyRulesLatency.WithLabelValues(f))
	return m
}

func ourMetrics(m iptables.Metrics) kMetrics {
	return kMetrics{
		restoreFailures:        float64(m.RestoreFailures),
		partialRestoreFailures: float64(m.PartialRestoreFailures),
		filterTotal:            float64(m.RulesTotal["filter"]),
		filterLast:             float64(m.RulesLast["filter"]),
		natTotal:               float64(m.RulesTotal["nat"]),
		natLast:                float64(m.RulesLast["nat"]),
		noLocalInternal:        float64(m.NoLocalEndpoints["internal"]),
		noLocalExternal:        float64(m.NoLocalEndpoints["external"]),
		fullSyncs:              uint64(m.FullSyncs),
		partialSyncs:           uint64(m.PartialSyncs),
	}
}

// registerIPTablesMetrics registers only the metrics the comparison
// reads: kube-proxy's RegisterMetrics would also register its nfacct
// collectors, which read this host's netfilter counters.
func registerIPTablesMetrics() { registerOnce.Do(registerNow) }

var registerOnce sync.Once

func registerNow() {
	legacyregistry.MustRegister(
		metrics.IPTablesRestoreFailuresTotal,
		metrics.IPTablesPartialRestoreFailuresTotal,
		metrics.IPTablesRulesTotal,
		metrics.IPTablesRulesLastSync,
		metrics.SyncProxyRulesNoLocalEndpointsTotal,
		metrics.SyncFullProxyRulesLatency,
		metrics.SyncPartialProxyRulesLatency,
	)
}

// canonical and lineDiff are shared with e2e/upstream133: see
// transcript.CanonicalIPTables and transcript.LineDiff.
func canonical(text string) (string, error) { return transcript.CanonicalIPTables(text) }

func lineDiff(k, o string) string { return transcript.LineDiff(k, o) }

// iptCoverage counts what the iptables comparison exercised.
var iptCoverage struct {
	syncs, partial, failures, large, fwChains, sepChains, ipv6 int
}

func TestIPTablesProxierMatchesKubeProxy(t *testing.T) {
	registerIPTablesMetrics()
	start := time.Now()
	var syncs int
	total := *sequences
	if *iptSequences > 0 {
		total = *iptSequences
	}
	for i := 0; i < total; i++ {
		seed := *seed0 + int64(i)
		n, err := runIPTablesSequence(seed)
		syncs += n
		if err != nil {
			t.Fatalf("seed %d: %v\n(replay: go test -run TestIPTablesProxierMatchesKubeProxy -sequences 1 -seed %d -v)", seed, err, seed)
		}
	}
	t.Logf("%d random sequences, %d syncs in %v: kube-proxy's iptables proxier and proxysim's wrote the same restores, hold the same rules and report the same metrics",
		total, syncs, time.Since(start).Round(time.Millisecond))
	t.Logf("coverage: %d partial syncs, %d failed restores, %d syncs in large-cluster mode, %d with KUBE-FW chains, %d SEP chains, %d IPv6 syncs",
		iptCoverage.partial, iptCoverage.failures, iptCoverage.large, iptCoverage.fwChains, iptCoverage.sepChains, iptCoverage.ipv6)
	if total >= 100 && (iptCoverage.partial == 0 || iptCoverage.failures == 0 || iptCoverage.large == 0 || iptCoverage.fwChains == 0 || iptCoverage.ipv6 == 0) {
		t.Fatal("the generator missed a feature the comparison is meant to cover")
	}
}

func runIPTablesSequence(seed int64) (syncs int, err error) {
	r := rand.New(rand.NewSource(seed))
	cfg := randomConfig(r)
	p, err := newIPTPair(cfg)
	if err != nil {
		return 0, err
	}
	g := &gen{r: r, iptables: true, big: r.Intn(10) == 0, services: map[string]*v1.Service{}, slices: map[string]*discovery.EndpointSlice{}}
	var log []string
	fail := func(err error) error {
		tail := log
		if len(tail) > 8 {
			tail = tail[len(tail)-8:]
		}
		return fmt.Errorf("%s\nlast events:\n  %s\n%w", cfg, strings.Join(tail, "\n  "), err)
	}
	// Some events before the informers have synced: tracked, not synced.
	for i := r.Intn(6); i > 0; i-- {
		log = append(log, p.event(g))
	}
	p.k.OnServiceSynced()
	p.k.OnEndpointSlicesSynced()
	_ = p.o.OnServicesSynced()
	_ = p.o.OnEndpointSlicesSynced()
	syncs++
	log = append(log, "initial sync")
	if err := p.compare(); err != nil {
		return syncs, fail(err)
	}
	for step := 0; step < *steps; step++ {
		log = append(log, p.event(g))
		if r.Intn(4) != 0 && step != *steps-1 {
			continue
		}
		failing := r.Intn(12) == 0
		before := p.oBack.Metrics()
		p.sync(failing)
		syncs++
		log = append(log, fmt.Sprintf("sync (restore fails: %v)", failing))
		if err := p.compare(); err != nil {
			return syncs, fail(err)
		}
		after := p.oBack.Metrics()
		iptCoverage.syncs++
		if after.PartialSyncs > before.PartialSyncs {
			iptCoverage.partial++
		}
		if failing {
			iptCoverage.failures++
		}
		if cfg.family == v1.IPv6Protocol {
			iptCoverage.ipv6++
		}
		save := p.oIPT.SaveAll()
		if strings.Contains(save, ":KUBE-FW-") {
			iptCoverage.fwChains++
		}
		iptCoverage.sepChains += strings.Count(save, ":KUBE-SEP-")
		if large := largeNow(p.o); large {
			iptCoverage.large++
		}
	}
	return syncs, nil
}

func largeNow(o *proxy.Proxier) bool {
	_, eps := o.Size()
	return eps > iptables.LargeClusterEndpoints
}

// benchState is services default/svc-i, one TCP port each, with perSvc
// ready endpoints in one slice, every third on this node.
func benchObjects(services, perSvc int) ([]*v1.Service, []*discovery.EndpointSlice) {
	var svcs []*v1.Service
	var slices []*discovery.EndpointSlice
	for i := 0; i < services; i++ {
		name := fmt.Sprintf("svc-%d", i)
		svc := &v1.Service{}
		svc.Namespace, svc.Name = "default", name
		svc.Spec.Type = v1.ServiceTypeNodePort
		ip := fmt.Sprintf("10.96.%d.%d", i/250, 1+i%250)
		svc.Spec.ClusterIP, svc.Spec.ClusterIPs = ip, []string{ip}
		svc.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol}
		svc.Spec.Ports = []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP, NodePort: int32(30000 + i%2000)}}
		svcs = append(svcs, svc)
		sl := &discovery.EndpointSlice{AddressType: discovery.AddressTypeIPv4}
		sl.Namespace, sl.Name = "default", name+"-1"
		sl.Labels = map[string]string{discovery.LabelServiceName: name}
		sl.Ports = []discovery.EndpointPort{{Name: ptrTo("http"), Port: ptrTo(int32(8080)), Protocol: ptrTo(v1.ProtocolTCP)}}
		for j := 0; j < perSvc; j++ {
			e := discovery.Endpoint{Addresses: []string{fmt.Sprintf("10.%d.%d.%d", 1+i/250, i%250, 1+j)}, Conditions: discovery.EndpointConditions{Ready: ptrTo(true)}}
			if j%3 == 0 {
				e.NodeName = ptrTo(nodeName)
			}
			sl.Endpoints = append(sl.Endpoints, e)
		}
		slices = append(slices, sl)
	}
	return svcs, slices
}

func ptrTo[T any](v T) *T { return &v }

// BenchmarkIPTablesSync is one sync of kube-proxy's iptables proxier and
// of proxysim's on the same cluster: full (every chain) or partial (one
// service's endpoints changed), with each side's fake iptables applying
// the restore, or with the restore discarded (the proxier's own cost).
func BenchmarkIPTablesSync(b *testing.B) {
	for _, size := range []struct{ services, perSvc int }{{100, 10}, {1000, 5}} {
		for _, kind := range []string{"full", "partial"} {
			for _, dp := range []string{"fake", "discard"} {
				for _, impl := range []string{"kube-proxy", "proxysim"} {
					name := fmt.Sprintf("%dx%d/%s/%s/%s", size.services, size.perSvc, kind, dp, impl)
					b.Run(name, func(b *testing.B) {
						benchSync(b, size.services, size.perSvc, kind == "full", dp == "discard", impl == "kube-proxy")
					})
				}
			}
		}
	}
}

func benchSync(b *testing.B, services, perSvc int, full, discard, upstream bool) {
	cfg := iptConfig{family: v1.IPv4Protocol, masqueradeBit: 14, localhostNodePorts: true, randomFully: true, syncPeriod: time.Hour,
		clusterCIDR: "10.0.0.0/8", nodeIP: "192.168.0.2"}
	p, err := newIPTPair(cfg)
	if err != nil {
		b.Fatal(err)
	}
	svcs, slices := benchObjects(services, perSvc)
	for _, s := range svcs {
		p.k.OnServiceAdd(s)
		p.o.OnServiceAdd(s)
	}
	for _, s := range slices {
		p.k.OnEndpointSliceAdd(s)
		_ = p.o.OnEndpointSliceAdd(s)
	}
	p.k.OnServiceSynced()
	p.k.OnEndpointSlicesSynced()
	_ = p.o.OnServicesSynced()
	_ = p.o.OnEndpointSlicesSynced()
	if err := p.compare(); err != nil {
		b.Fatal(err)
	}
	p.kIPT.discard, p.oIPT.discard = discard, discard
	// Two versions of the first slice, to alternate between.
	alt := slices[0].DeepCopy()
	alt.Endpoints[0].Conditions.Ready = ptrTo(false)
	versions := []*discovery.EndpointSlice{alt, slices[0]}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if upstream {
			if full {
				p.k.OnTopologyChange(nil)
			} else {
				p.k.OnEndpointSliceUpdate(nil, versions[i%2])
			}
			p.k.OnServiceSynced()
		} else {
			if full {
				p.oBack.ForceFullSync()
			} else {
				_ = p.o.OnEndpointSliceUpdate(nil, versions[i%2])
			}
			_ = p.o.SyncProxyRules()
		}
	}
}
