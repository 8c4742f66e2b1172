package upstream

// kube-proxy v1.36's own IPVS proxier (k8s.io/kubernetes/pkg/proxy/ipvs)
// side by side with proxysim's (sim/ipvs), each programming the real kernel
// in a network namespace of its own: real IPVS through netlink, a real
// kube-ipvs0 dummy device, real per-namespace sysctls. Both get the same
// random Service and EndpointSlice events and are synced at the same
// points; after every sync the two namespaces must hold the same IPVS table
// (virtual servers with their flags, scheduler, timeout and netmask; real
// servers with their weights and forwarding method), the same kube-ipvs0
// (state and addresses), the same ipsets and iptables rules (upstream's
// exported fakes against proxysim's, compareIPVSRules) and, once per
// sequence, the same sysctls and IPVS timeouts. Normalisations: see
// docs/explanation/mode-ipvs.md.
//
// Upstream's iptables and ipset side stays on its exported fakes, and its
// conntrack cleaner and health-check server are swapped for upstream's
// fakes (setUnexported) so that nothing listens or deletes conntrack
// entries. Upstream's netlink handle and Go's net.Interfaces follow the
// calling thread's namespace, so every call that reaches the kernel runs on
// a locked OS thread inside upstream's namespace (netns.Namespace.Do).
//
// The host kernel here has no IPVS: make upstream-ipvs-vm runs this test
// as a static binary inside the QEMU VM.

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"net"
	"reflect"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	mobyipvs "github.com/moby/ipvs"
	"github.com/vishvananda/netlink"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	utilsysctl "k8s.io/component-helpers/node/util/sysctl"
	"k8s.io/kubernetes/pkg/proxy/conntrack"
	"k8s.io/kubernetes/pkg/proxy/healthcheck"
	kipvs "k8s.io/kubernetes/pkg/proxy/ipvs"
	ipsettest "k8s.io/kubernetes/pkg/proxy/ipvs/ipset/testing"
	utilipvs "k8s.io/kubernetes/pkg/proxy/ipvs/util"
	proxyutil "k8s.io/kubernetes/pkg/proxy/util"
	utiliptables "k8s.io/kubernetes/pkg/util/iptables"
	iptablestest "k8s.io/kubernetes/pkg/util/iptables/testing"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/proxysim/proxysim/fakes"
	"github.com/proxysim/proxysim/netns"
	"github.com/proxysim/proxysim/sim/ipvs"
	"github.com/proxysim/proxysim/sim/proxy"
	"github.com/proxysim/proxysim/sim/vclock"
)

var ipvsSequences = flag.Int("ipvs-sequences", 0, "random sequences for the IPVS proxier comparison on the real kernel (0: skip; make upstream-ipvs-vm runs it in the VM)")

// nodeLink is the node's own interface in both namespaces.
const nodeLink = "eth0"

// ipvsConfig is one sequence's settings, on both sides.
type ipvsConfig struct {
	family    v1.IPFamily
	zone      string
	scheduler string
	strictARP bool
	timeouts  ipvs.Timeouts
	// nodeAddrs are put on eth0 in both namespaces (both families);
	// upstream finds them itself, proxysim gets the family's as NodeIPs.
	nodeAddrs []string
	// reconcile makes every proxysim sync a full one (FullSyncPeriod 1s,
	// its clock stepped 1s per sync), as kube-proxy's are; only such
	// sequences also get outside changes to the kernel (meddle).
	reconcile bool
}

func (c ipvsConfig) String() string {
	return fmt.Sprintf("family=%s zone=%q scheduler=%s strictARP=%v timeouts=%v/%v/%v node=%v reconcile=%v",
		c.family, c.zone, c.scheduler, c.strictARP, c.timeouts.TCP, c.timeouts.TCPFin, c.timeouts.UDP, c.nodeAddrs, c.reconcile)
}

func randomIPVSConfig(r *rand.Rand) ipvsConfig {
	c := ipvsConfig{family: v1.IPv4Protocol, scheduler: []string{"", "rr", "wrr", "sh"}[r.Intn(4)]}
	if r.Intn(4) == 0 {
		c.family = v1.IPv6Protocol
	}
	c.zone = []string{"zone-a", "zone-b", ""}[r.Intn(3)]
	c.strictARP = r.Intn(2) == 0
	if r.Intn(3) == 0 {
		c.timeouts = ipvs.Timeouts{TCP: time.Duration(r.Intn(3)) * 100 * time.Second, TCPFin: time.Duration(r.Intn(3)) * 10 * time.Second, UDP: time.Duration(r.Intn(3)) * 30 * time.Second}
	}
	// After deterministic(), 10.100.0.1 and fd00:100::1 are default/a's
	// first external IP, 10.101.0.1 and fd00:101::1 its first
	// load-balancer IP: such a node address is also a service's.
	v4 := [][]string{{"192.168.0.2"}, {"192.168.0.2", "198.51.100.1"}, {"192.168.0.2", "10.100.0.1"}, {"10.101.0.1", "192.168.0.2"}}[r.Intn(4)]
	v6 := [][]string{{"fd00:192::2"}, {"fd00:192::2", "2001:db8::1"}, {"fd00:192::2", "fd00:100::1"}, {"fd00:101::1", "fd00:192::2"}}[r.Intn(4)]
	c.nodeAddrs = append(append(c.nodeAddrs, v4...), v6...)
	c.reconcile = r.Intn(2) == 0
	return c
}

// familyAddrs are the node addresses of the sequence's family.
func (c ipvsConfig) familyAddrs() []string {
	var out []string
	for _, a := range c.nodeAddrs {
		if (net.ParseIP(a).To4() == nil) == (c.family == v1.IPv6Protocol) {
			out = append(out, a)
		}
	}
	return out
}

// For the log: phase sums the time each part of a run took, ipvsOps
// counts proxysim's dataplane operations by name (failed ones apart) and
// ipvsFailures keeps the first few failures.
var (
	phase        = map[string]time.Duration{}
	ipvsOps      = map[string]int{}
	ipvsFailures []string
)

// ipvsSide is one proxier with its namespace.
type ipvsSide struct {
	ns *netns.Namespace
	// dump reads the namespace's IPVS table (a handle of its own, opened
	// in the namespace).
	dump *mobyipvs.Handle
}

func newIPVSSide(role string, cfg ipvsConfig) (*ipvsSide, error) {
	ns, err := netns.Create(role)
	if err != nil {
		return nil, err
	}
	s := &ipvsSide{ns: ns}
	if !ns.HasIPVS() {
		s.close()
		return nil, netns.ErrNoIPVS
	}
	if err := addNodeLink(ns); err != nil {
		s.close()
		return nil, err
	}
	// No duplicate address detection: an IPv6 node address must be
	// usable, not tentative, from the start.
	if err := ns.Sysctl().Set("net/ipv6/conf/"+nodeLink+"/accept_dad", 0); err != nil {
		s.close()
		return nil, err
	}
	for _, a := range cfg.nodeAddrs {
		bits := 24
		if net.ParseIP(a).To4() == nil {
			bits = 64
		}
		if err := ns.AddrAdd(nodeLink, fmt.Sprintf("%s/%d", a, bits)); err != nil {
			s.close()
			return nil, err
		}
	}
	if s.dump, err = mobyipvs.New(ns.Path()); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// addNodeLink gives the namespace a node interface: a dummy device, up.
func addNodeLink(ns *netns.Namespace) error {
	h, err := netlink.NewHandleAt(ns.Handle(), syscall.NETLINK_ROUTE)
	if err != nil {
		return err
	}
	defer h.Close()
	if err := h.LinkAdd(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: nodeLink}}); err != nil {
		return fmt.Errorf("add %s: %w", nodeLink, err)
	}
	l, err := h.LinkByName(nodeLink)
	if err != nil {
		return err
	}
	return h.LinkSetUp(l)
}

func (s *ipvsSide) close() {
	if s.dump != nil {
		s.dump.Close()
	}
	_ = s.ns.Close()
}

// ipvsPair is both proxiers, fed identically.
type ipvsPair struct {
	cfg   ipvsConfig
	kSide *ipvsSide
	oSide *ipvsSide
	// The ipsets and iptables each side writes besides IPVS: upstream's
	// fakes and proxysim's, kept across restarts as a node keeps them.
	kIPT     *kubeIPT
	kSets    *ipsettest.FakeIPSet
	oIPT     *ourIPT
	oSets    *fakes.IPSets
	k        *kipvs.Proxier
	kHandle  utilipvs.Interface
	kSynced  bool
	o        *proxy.Proxier
	oBack    *ipvs.Proxier
	oIPVS    *netns.IPVS
	clk      *clocktesting.FakeClock
	restarts int
}

func newIPVSPair(cfg ipvsConfig) (*ipvsPair, error) {
	p := &ipvsPair{cfg: cfg}
	kf := iptablestest.NewFake()
	if cfg.family == v1.IPv6Protocol {
		kf = iptablestest.NewIPv6Fake()
	}
	p.kIPT = &kubeIPT{FakeIPTables: kf.SetHasRandomFully(true)}
	p.kSets = ipsettest.NewFake("v7.1")
	p.oIPT, p.oSets = &ourIPT{IPTables: fakes.NewIPTables()}, fakes.NewIPSets()
	var err error
	t0 := time.Now()
	if p.kSide, err = newIPVSSide("upstream-ipvs", cfg); err != nil {
		return nil, err
	}
	if p.oSide, err = newIPVSSide("proxysim-ipvs", cfg); err != nil {
		p.kSide.close()
		return nil, err
	}
	phase["setup namespaces"] += time.Since(t0)
	t0 = time.Now()
	if err := p.startKube(); err != nil {
		p.close()
		return nil, err
	}
	phase["setup kube-proxy"] += time.Since(t0)
	t0 = time.Now()
	if err := p.startOurs(); err != nil {
		p.close()
		return nil, err
	}
	phase["setup proxysim"] += time.Since(t0)
	return p, nil
}

// startKube constructs kube-proxy's proxier inside its namespace, as
// kube-proxy starts: its sysctls and timeouts land in that namespace.
func (p *ipvsPair) startKube() error {
	cfg := p.cfg
	return p.kSide.ns.Do(func() error {
		h := utilipvs.New()
		if h == nil || reflect.ValueOf(h).IsNil() {
			return errors.New("utilipvs.New failed")
		}
		var nodeIP net.IP
		if a := cfg.familyAddrs(); len(a) > 0 {
			nodeIP = net.ParseIP(a[0])
		}
		k, err := kipvs.NewProxier(context.Background(), cfg.family, p.kIPT, h, p.kSets, utilsysctl.New(),
			30*time.Second, 0, nil, cfg.strictARP, cfg.timeouts.TCP, cfg.timeouts.TCPFin, cfg.timeouts.UDP,
			false, 14, proxyutil.NewNoOpLocalDetector(), nodeName, nodeIP, nil, nil, cfg.scheduler, nil, false)
		if err != nil {
			return fmt.Errorf("kube-proxy's NewProxier: %w", err)
		}
		setUnexported(k, "conntrack", conntrack.NewFake())
		setUnexported(k, "serviceHealthServer", healthcheck.NewFakeServiceHealthServer())
		if cfg.zone != "" {
			k.OnTopologyChange(map[string]string{v1.LabelTopologyZone: cfg.zone})
		}
		p.k, p.kHandle, p.kSynced = k, h, false
		return nil
	})
}

// startOurs constructs proxysim's proxier over its namespace's real
// dataplane.
func (p *ipvsPair) startOurs() error {
	dp, h, err := p.oSide.ns.Dataplane()
	if err != nil {
		return err
	}
	dp.IPSets, dp.IPTables = p.oSets, p.oIPT
	if p.oIPVS != nil {
		p.oIPVS.Close()
	}
	p.oIPVS = h
	p.clk = clocktesting.NewFakeClock(vclock.Epoch)
	c := ipvs.Config{Family: p.cfg.family, Scheduler: p.cfg.scheduler, StrictARP: p.cfg.strictARP, Timeouts: p.cfg.timeouts, NodeIPs: p.cfg.familyAddrs()}
	if p.cfg.reconcile {
		c.FullSyncPeriod = time.Second
	}
	back, err := ipvs.New(c, dp, p.clk, func(op ipvs.Op) {
		ipvsOps[op.Name]++
		if op.Err != nil {
			ipvsOps[op.Name+" failed"]++
			if len(ipvsFailures) < 10 {
				ipvsFailures = append(ipvsFailures, fmt.Sprintf("%s %s: %v", op.Name, op.Detail, op.Err))
			}
		}
	})
	if err != nil {
		return fmt.Errorf("proxysim's ipvs.New: %w", err)
	}
	if p.oBack != nil {
		p.oBack.Stop()
	}
	p.oBack = back
	p.o = proxy.NewProxier(p.cfg.family, nodeName, p.cfg.zone, back, proxy.EndpointSliceTrackerOptions{})
	return nil
}

// closeKubeHandle closes the netlink socket of upstream's IPVS handle
// (utilipvs has no Close): it would keep a deleted namespace alive.
// Upstream's graceful-termination goroutine keeps a reference but, with an
// empty list, never uses it.
func closeKubeHandle(h utilipvs.Interface) {
	if h == nil {
		return
	}
	v := reflect.ValueOf(h)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return
	}
	f := v.Elem().FieldByName("ipvsHandle")
	if !f.IsValid() {
		return
	}
	if lh, ok := reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Interface().(*mobyipvs.Handle); ok && lh != nil {
		lh.Close()
	}
}

func (p *ipvsPair) close() {
	closeKubeHandle(p.kHandle)
	if p.oBack != nil {
		p.oBack.Stop()
	}
	if p.oIPVS != nil {
		p.oIPVS.Close()
	}
	if p.oSide != nil {
		p.oSide.close()
	}
	if p.kSide != nil {
		p.kSide.close()
	}
}

func (p *ipvsPair) service(prev, cur *v1.Service) {
	prev, cur = deterministic(prev), deterministic(cur)
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
}

func (p *ipvsPair) slice(s *discovery.EndpointSlice, remove bool) {
	if remove {
		p.k.OnEndpointSliceDelete(s)
		_ = p.o.OnEndpointSliceDelete(s)
	} else {
		p.k.OnEndpointSliceUpdate(nil, s)
		_ = p.o.OnEndpointSliceUpdate(nil, s)
	}
}

// restart replaces both proxiers by new ones over the same namespaces, as
// a restarted kube-proxy finds the kernel as its predecessor left it, and
// replays the informers' initial list (every current object, as adds).
func (p *ipvsPair) restart(g *gen) error {
	closeKubeHandle(p.kHandle)
	if err := p.startKube(); err != nil {
		return err
	}
	if err := p.startOurs(); err != nil {
		return err
	}
	p.restarts++
	for _, k := range sortedKeys(g.services) {
		p.service(nil, g.services[k])
	}
	for _, k := range sortedKeys(g.slices) {
		p.slice(g.slices[k], false)
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// sync syncs both sides, then compares their kernels.
func (p *ipvsPair) sync() (ipvsStats, error) {
	// OnServiceSynced runs syncProxyRules directly, every time; the first
	// call of each pair also initializes the proxier. It must run inside
	// upstream's namespace.
	t0 := time.Now()
	err := p.kSide.ns.Do(func() error {
		if !p.kSynced {
			p.k.OnEndpointSlicesSynced()
			p.kSynced = true
		}
		p.k.OnServiceSynced()
		return nil
	})
	if err != nil {
		return ipvsStats{}, err
	}
	t1 := time.Now()
	p.clk.Step(time.Second)
	if !p.o.Initialized() {
		_ = p.o.OnServicesSynced()
		err = p.o.OnEndpointSlicesSynced()
	} else {
		err = p.o.SyncProxyRules()
	}
	if err != nil {
		return ipvsStats{}, fmt.Errorf("proxysim's sync failed: %w", err)
	}
	t2 := time.Now()
	st, err := p.compare()
	phase["sync kube-proxy"] += t1.Sub(t0)
	phase["sync proxysim"] += t2.Sub(t1)
	phase["compare"] += time.Since(t2)
	return st, err
}

// ipvsStats counts what one comparison saw.
type ipvsStats struct {
	virtualServers, realServers, addresses, persistent int
}

func (p *ipvsPair) compare() (ipvsStats, error) {
	kt, kst, err := ipvsState(p.kSide)
	if err != nil {
		return kst, fmt.Errorf("reading upstream's namespace: %w", err)
	}
	ot, _, err := ipvsState(p.oSide)
	if err != nil {
		return kst, fmt.Errorf("reading proxysim's namespace: %w", err)
	}
	if kt != ot {
		return kst, fmt.Errorf("kernels differ:\n%s", nftLineDiff(kt, ot))
	}
	return kst, p.compareRules()
}

// compareRules compares the ipsets (every set's type, family and
// members) and the iptables rules (the last restore payloads and the
// tables after it, normalised as the iptables comparison's, and the rules
// of KUBE-IPVS-OUT-FILTER sorted: kube-proxy writes one per load-balancer
// IP in the order of a Go map).
func (p *ipvsPair) compareRules() error {
	return compareIPVSRules(p.kIPT, p.kSets, p.oIPT, p.oSets)
}

func compareIPVSRules(kIPT *kubeIPT, kSets *ipsettest.FakeIPSet, oIPT *ourIPT, oSets *fakes.IPSets) error {
	var k []string
	for name, set := range kSets.Sets {
		k = append(k, setLine(name, string(set.SetType), set.HashFamily))
		for e := range kSets.Entries[name] {
			k = append(k, "add "+name+" "+e)
		}
	}
	ours, err := ipvs.ReadIPSets(oSets)
	if err != nil {
		return err
	}
	var o []string
	for name, c := range ours {
		o = append(o, setLine(name, string(c.Set.Type), c.Set.Family))
		for _, e := range c.Entries {
			o = append(o, "add "+name+" "+e)
		}
	}
	sort.Strings(k)
	sort.Strings(o)
	if ks, os := strings.Join(k, "\n")+"\n", strings.Join(o, "\n")+"\n"; ks != os {
		return fmt.Errorf("ipsets differ:\n%s", nftLineDiff(ks, os))
	}
	kp, err := ipvsCanonical(kIPT.last)
	if err != nil {
		return fmt.Errorf("upstream payload: %v\n%s", err, kIPT.last)
	}
	op, err := ipvsCanonical(oIPT.last)
	if err != nil {
		return fmt.Errorf("proxysim payload: %v\n%s", err, oIPT.last)
	}
	if kp != op {
		return fmt.Errorf("restore payloads differ:\n%s", lineDiff(kp, op))
	}
	var buf strings.Builder
	for _, t := range []utiliptables.Table{utiliptables.TableFilter, utiliptables.TableNAT} {
		var b bytes.Buffer
		if err := kIPT.SaveInto(t, &b); err != nil {
			return err
		}
		buf.Write(b.Bytes())
	}
	ks, err := ipvsCanonical(buf.String())
	if err != nil {
		return fmt.Errorf("upstream save: %v", err)
	}
	os, err := ipvsCanonical(oIPT.SaveAll())
	if err != nil {
		return fmt.Errorf("proxysim save: %v", err)
	}
	if ks != os {
		return fmt.Errorf("iptables-save differs:\n%s", lineDiff(ks, os))
	}
	return nil
}

// setLine names a set by its type, and by its family unless it is a
// bitmap (which has none).
func setLine(name, typ, family string) string {
	if typ == string(ipvs.BitmapPort) {
		return "create " + name + " " + typ
	}
	return "create " + name + " " + typ + " family " + family
}

// ipvsCanonical is canonical() with the KUBE-IPVS-OUT-FILTER rules sorted.
func ipvsCanonical(text string) (string, error) {
	c, err := canonical(text)
	if err != nil {
		return "", err
	}
	lines := strings.Split(c, "\n")
	start := -1
	for i := 0; i <= len(lines); i++ {
		in := i < len(lines) && strings.HasPrefix(lines[i], "-A "+ipvs.ChainIPVSOutFilter+" ")
		switch {
		case in && start < 0:
			start = i
		case !in && start >= 0:
			sort.Strings(lines[start:i])
			start = -1
		}
	}
	return strings.Join(lines, "\n"), nil
}

// ipvsState renders what a namespace's kernel holds: every virtual
// server and real server with every field the kernel reports except
// statistics and connection counts, and kube-ipvs0's flags and addresses.
// Lines are sorted: the kernel lists services in hash order.
func ipvsState(s *ipvsSide) (string, ipvsStats, error) {
	var st ipvsStats
	svcs, err := s.dump.GetServices()
	if err != nil {
		return "", st, err
	}
	var lines []string
	for _, svc := range svcs {
		vs := fmt.Sprintf("vs %s af=%d %s sched=%s flags=%#x timeout=%d netmask=%#x fwmark=%d",
			protoName(svc.Protocol), svc.AddressFamily, net.JoinHostPort(svc.Address.String(), fmt.Sprint(svc.Port)),
			svc.SchedName, svc.Flags, svc.Timeout, svc.Netmask, svc.FWMark)
		lines = append(lines, vs)
		st.virtualServers++
		if svc.Flags&0x1 != 0 {
			st.persistent++
		}
		dsts, err := s.dump.GetDestinations(svc)
		if err != nil {
			return "", st, err
		}
		for _, d := range dsts {
			lines = append(lines, fmt.Sprintf("%s -> af=%d %s weight=%d fwd=%#x thresholds=%d/%d",
				vs, d.AddressFamily, net.JoinHostPort(d.Address.String(), fmt.Sprint(d.Port)), d.Weight, d.ConnectionFlags, d.LowerThreshold, d.UpperThreshold))
			st.realServers++
		}
	}
	dev, err := devState(s.ns)
	if err != nil {
		return "", st, err
	}
	st.addresses = len(dev) - 1
	lines = append(lines, dev...)
	sort.Strings(lines)
	return strings.Join(lines, "\n"), st, nil
}

// devState describes kube-ipvs0: whether it exists, its kind and up flag,
// then one line per address with its prefix length.
func devState(ns *netns.Namespace) ([]string, error) {
	h, err := netlink.NewHandleAt(ns.Handle(), syscall.NETLINK_ROUTE)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	l, err := h.LinkByName(ipvs.DummyDevice)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return []string{"dev " + ipvs.DummyDevice + " absent"}, nil
		}
		return nil, err
	}
	out := []string{fmt.Sprintf("dev %s type=%s up=%v", ipvs.DummyDevice, l.Type(), l.Attrs().Flags&net.FlagUp != 0)}
	addrs, err := h.AddrList(l, netlink.FAMILY_ALL)
	if err != nil {
		return nil, err
	}
	for _, a := range addrs {
		ones, _ := a.Mask.Size()
		out = append(out, fmt.Sprintf("dev %s addr %s/%d", ipvs.DummyDevice, a.IP, ones))
	}
	return out, nil
}

func protoName(p uint16) string {
	switch p {
	case syscall.IPPROTO_TCP:
		return "TCP"
	case syscall.IPPROTO_UDP:
		return "UDP"
	case 132:
		return "SCTP"
	}
	return fmt.Sprint(p)
}

// ipvsSysctls are the per-namespace settings both proxiers manage.
var ipvsSysctls = []string{
	ipvs.SysctlConntrack, ipvs.SysctlConnReuseMode, ipvs.SysctlExpireNodestConn, ipvs.SysctlExpireQuiescentTemplate,
	ipvs.SysctlIPForward, ipvs.SysctlArpIgnore, ipvs.SysctlArpAnnounce,
}

// startupState renders a namespace's sysctls and IPVS timeouts.
func startupState(s *ipvsSide) (string, error) {
	var b strings.Builder
	for _, name := range ipvsSysctls {
		v, err := s.ns.Sysctl().Get(name)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "%s=%d\n", name, v)
	}
	c, err := s.dump.GetConfig()
	if err != nil {
		return "", err
	}
	fmt.Fprintf(&b, "timeouts tcp=%v tcpfin=%v udp=%v\n", c.TimeoutTCP, c.TimeoutTCPFin, c.TimeoutUDP)
	return b.String(), nil
}

// matchPorts gives most new slices the ports of the service they are
// labelled for (names and protocols, target ports 8080 and up): the
// generator's independent choices rarely match, and a table without real
// servers compares little. Only slices never handed to a proxier are
// changed: kube-proxy keeps the objects it is given.
func matchPorts(g *gen, s *discovery.EndpointSlice) {
	svc := g.services[s.Namespace+"/"+s.Labels[discovery.LabelServiceName]]
	if svc == nil || s.AddressType == discovery.AddressTypeFQDN || !g.chance(70) {
		return
	}
	s.Ports = nil
	for i, sp := range svc.Spec.Ports {
		s.Ports = append(s.Ports, discovery.EndpointPort{Name: ptr.To(sp.Name), Protocol: ptr.To(sp.Protocol), Port: ptr.To(int32(8080 + i))})
	}
}

// meddle changes both kernels the same way behind the proxiers' backs, as
// an administrator or another program might, and describes the change. It
// picks from what upstream's namespace holds, which the last comparison
// found identical to proxysim's.
func (p *ipvsPair) meddle(r *rand.Rand) (string, error) {
	svcs, err := p.kSide.dump.GetServices()
	if err != nil {
		return "", err
	}
	sort.Slice(svcs, func(i, j int) bool { return svcKey(svcs[i]) < svcKey(svcs[j]) })
	sides := []*ipvsSide{p.kSide, p.oSide}
	// Adding what is already there (a stray of the other family stays)
	// fails alike on both sides and changes nothing.
	each := func(f func(*ipvsSide) error) error {
		for _, s := range sides {
			if err := f(s); err != nil && !errors.Is(err, syscall.EEXIST) {
				return err
			}
		}
		return nil
	}
	// A stray virtual server and a stray address, of either family.
	strayIP := []string{"10.99.0.1", "fd00:99::1"}[r.Intn(2)]
	switch k := r.Intn(6); {
	case k == 0 && len(svcs) > 0:
		svc := svcs[r.Intn(len(svcs))]
		return "delete-vs " + svcKey(svc), each(func(s *ipvsSide) error { return s.dump.DelService(svc) })
	case k == 1 && len(svcs) > 0:
		svc := svcs[r.Intn(len(svcs))]
		dsts, err := p.kSide.dump.GetDestinations(svc)
		if err != nil || len(dsts) == 0 {
			return "nothing (no real server to touch)", err
		}
		sort.Slice(dsts, func(i, j int) bool { return dsts[i].Address.String() < dsts[j].Address.String() })
		d := dsts[r.Intn(len(dsts))]
		if r.Intn(2) == 0 {
			return "delete-rs " + svcKey(svc) + " -> " + d.Address.String(), each(func(s *ipvsSide) error { return s.dump.DelDestination(svc, d) })
		}
		w := *d
		w.Weight = 5
		return "weight-rs " + svcKey(svc) + " -> " + d.Address.String(), each(func(s *ipvsSide) error { return s.dump.UpdateDestination(svc, &w) })
	case k == 2:
		addrs, err := devState(p.kSide.ns)
		if err != nil || len(addrs) < 2 {
			return "nothing (no address to unbind)", err
		}
		f := strings.Fields(addrs[1+r.Intn(len(addrs)-1)])
		ip, _, _ := strings.Cut(f[len(f)-1], "/")
		return "unbind " + ip, each(func(s *ipvsSide) error { return s.ns.Binder().Unbind(ipvs.DummyDevice, ip) })
	case k == 3:
		return "bind " + strayIP, each(func(s *ipvsSide) error {
			if err := s.ns.Binder().EnsureDevice(ipvs.DummyDevice); err != nil {
				return err
			}
			return s.ns.Binder().Bind(ipvs.DummyDevice, strayIP)
		})
	case k == 4:
		ip := net.ParseIP(strayIP)
		svc := &mobyipvs.Service{Address: ip, Protocol: syscall.IPPROTO_TCP, Port: 1234, SchedName: "rr", AddressFamily: syscall.AF_INET, Netmask: 0xffffffff}
		if ip.To4() == nil {
			svc.AddressFamily, svc.Netmask = syscall.AF_INET6, 128
		}
		return "add-vs " + svcKey(svc), each(func(s *ipvsSide) error { return s.dump.NewService(svc) })
	case k == 5 && len(svcs) > 0:
		svc := *svcs[r.Intn(len(svcs))]
		svc.SchedName = "sh"
		if svc.SchedName == svcs[0].SchedName {
			svc.SchedName = "wrr"
		}
		return "update-vs " + svcKey(&svc) + " scheduler " + svc.SchedName, each(func(s *ipvsSide) error { return s.dump.UpdateService(&svc) })
	}
	return "nothing (empty table)", nil
}

func svcKey(s *mobyipvs.Service) string {
	return protoName(s.Protocol) + " " + net.JoinHostPort(s.Address.String(), fmt.Sprint(s.Port))
}

// ipvsTotals adds up a run.
type ipvsTotals struct {
	syncs, restarts, nonEmpty                      int
	virtualServers, realServers, addresses, sticky int
	maxVS                                          int
	meddles                                        map[string]int
}

func runIPVSSequence(seed int64, tot *ipvsTotals) error {
	r := rand.New(rand.NewSource(seed))
	cfg := randomIPVSConfig(r)
	p, err := newIPVSPair(cfg)
	if err != nil {
		return err
	}
	defer p.close()
	ks, err := startupState(p.kSide)
	if err != nil {
		return err
	}
	ours, err := startupState(p.oSide)
	if err != nil {
		return err
	}
	if ks != ours {
		return fmt.Errorf("%s: sysctls or timeouts differ after construction:\n%s", cfg, nftLineDiff(ks, ours))
	}
	g := &gen{iptables: true, r: r, services: map[string]*v1.Service{}, slices: map[string]*discovery.EndpointSlice{}}
	seen := map[*discovery.EndpointSlice]bool{}
	for step := 0; step < *steps; step++ {
		what := ""
		if g.r.Intn(10) < 3 {
			prev, cur := g.serviceChange()
			p.service(prev, cur)
			what = "service " + describeSvc(prev, cur)
		} else {
			s, remove := g.sliceChange()
			if !remove && !seen[s] {
				matchPorts(g, s)
				seen[s] = true
			}
			p.slice(s, remove)
			what = fmt.Sprintf("slice %s/%s remove=%v", s.Namespace, s.Name, remove)
		}
		if r.Intn(4) != 0 && step != *steps-1 {
			continue
		}
		// Now and then both proxiers restart first (after at least one
		// sync: the kernel then holds a table to take over).
		if p.kSynced && r.Intn(8) == 0 {
			if err := p.restart(g); err != nil {
				return fmt.Errorf("%s: restart after step %d: %w", cfg, step, err)
			}
			what += ", then both restarted"
		}
		if cfg.reconcile && p.kSynced && r.Intn(3) == 0 {
			m, err := p.meddle(r)
			if err != nil {
				return fmt.Errorf("%s: outside change after step %d: %w", cfg, step, err)
			}
			what += ", then outside both proxiers: " + m
			tot.meddles[strings.Fields(m)[0]]++
		}
		st, err := p.sync()
		if err != nil {
			return fmt.Errorf("%s: sync after step %d (%s): %w", cfg, step, what, err)
		}
		tot.syncs++
		if st.virtualServers > 0 {
			tot.nonEmpty++
		}
		tot.virtualServers += st.virtualServers
		tot.realServers += st.realServers
		tot.addresses += st.addresses
		tot.sticky += st.persistent
		tot.maxVS = max(tot.maxVS, st.virtualServers)
	}
	tot.restarts += p.restarts
	return nil
}

func TestIPVSMatchesKubeProxy(t *testing.T) {
	if *ipvsSequences == 0 {
		t.Skip("-ipvs-sequences is 0: run make upstream-ipvs-vm")
	}
	// Asked for by name: a kernel that cannot run it fails the test.
	if !netns.Privileged() || !hasIPVS() {
		t.Fatal("-ipvs-sequences needs root and a kernel with IPVS: run make upstream-ipvs-vm")
	}
	if _, err := netns.Sweep(); err != nil {
		t.Logf("sweeping leftover namespaces: %v", err)
	}
	start := time.Now()
	tot := ipvsTotals{meddles: map[string]int{}}
	for i := 0; i < *ipvsSequences; i++ {
		seed := *seed0 + int64(i)
		if err := runIPVSSequence(seed, &tot); err != nil {
			t.Fatalf("seed %d: %v\n(replay: make upstream-ipvs-vm IPVS_SEQUENCES=1 SEED=%d)", seed, err, seed)
		}
	}
	t.Logf("%d random sequences of %d changes, %d syncs, %d restarts in %v: kube-proxy's IPVS proxier and proxysim's left identical kernels, ipsets and iptables rules after every sync",
		*ipvsSequences, *steps, tot.syncs, tot.restarts, time.Since(start).Round(time.Millisecond))
	t.Logf("compared %d virtual servers (%d persistent, at most %d in one table, %d non-empty tables), %d real servers, %d kube-ipvs0 addresses",
		tot.virtualServers, tot.sticky, tot.maxVS, tot.nonEmpty, tot.realServers, tot.addresses)
	for _, k := range sortedKeys(tot.meddles) {
		t.Logf("  outside changes %q: %d", k, tot.meddles[k])
	}
	for _, k := range sortedKeys(ipvsOps) {
		t.Logf("  proxysim's %s operations: %d", k, ipvsOps[k])
	}
	for _, k := range sortedKeys(phase) {
		t.Logf("  time in %s: %v", k, phase[k])
	}
	for _, f := range ipvsFailures {
		t.Logf("  failed: %s", f)
	}
	if *ipvsSequences >= 20 && (tot.realServers == 0 || tot.sticky == 0 || tot.restarts == 0 || tot.addresses == 0) {
		t.Fatal("the sequences compared too little")
	}
}

// hasIPVS looks for IPVS in a throwaway namespace.
func hasIPVS() bool {
	ns, err := netns.Create("ipvs-probe")
	if err != nil {
		return false
	}
	defer ns.Close()
	return ns.HasIPVS()
}
