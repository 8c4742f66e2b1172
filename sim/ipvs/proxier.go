package ipvs

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/proxysim/proxysim/sim"
	"github.com/proxysim/proxysim/sim/proxy"
)

// DummyDevice is the device virtual IPs are bound to.
const DummyDevice = "kube-ipvs0"

// DefaultScheduler is IPVS's round robin.
const DefaultScheduler = "rr"

// Config is the IPVS proxier's configuration.
type Config struct {
	Scheduler string
	StrictARP bool
	Timeouts  Timeouts
	// NodeIPs are the node's own addresses: NodePort virtual servers listen
	// on them, and an external or load-balancer IP among them is not bound
	// to kube-ipvs0. kube-proxy finds them on the node's interfaces (every
	// address of its family except loopback, IPv6 link-local and
	// kube-ipvs0's own).
	NodeIPs []string
	// FullSyncPeriod forces a full reconcile this often (0: only at start and
	// after failures). kube-proxy's IPVS proxier reconciles in full on every
	// sync; a full sync here leaves the kernel exactly as that would, and
	// partial syncs leave it the same unless something else changed IPVS.
	FullSyncPeriod time.Duration
	// Family is the proxier's IP family: a full sync deletes stale virtual
	// servers and unbinds stale kube-ipvs0 addresses of this family only,
	// leaving the other family's to its own proxier, as kube-proxy's
	// single-stack IPVS proxiers do (cleanLegacyService; the addresses it
	// lists on kube-ipvs0 are of its family). "" (the world's, through
	// Backend; otherwise any) treats every family as its own.
	Family v1.IPFamily
	// SyncFailsOnError makes a sync with a failed dataplane operation a
	// failed run, so the runner's retry rules apply. kube-proxy's IPVS
	// proxier never does this (it logs the failure and reports success); its
	// iptables and nftables proxiers fail the sync when a restore fails.
	SyncFailsOnError bool
}

// Op is one dataplane operation, reported to an observer.
type Op struct {
	Name   string // add-vs, update-vs, delete-vs, add-rs, update-rs, delete-rs, bind, unbind, sysctl, timeouts
	Detail string
	Err    error
}

// Proxier is a proxy.Backend that programs IPVS.
type Proxier struct {
	cfg         Config
	dp          Dataplane
	clock       clock.PassiveClock
	observe     func(Op)
	initialSync bool
	graceful    *GracefulTerminationManager

	// What the last syncs programmed, for partial syncs: per service its
	// virtual servers, the owner of each virtual server, and how many
	// virtual servers bind each address.
	applied  map[types.NamespacedName]map[string]*desiredVS
	owners   map[string]map[types.NamespacedName]bool
	bindRefs map[string]int
	needFull bool
	lastFull time.Time
	// ipText caches cluster IPs' text: desiredFor needs it for every
	// changed service at every sync.
	ipText map[netip.Addr]string
	// nodeIPs are Config.NodeIPs, parsed.
	nodeIPs map[netip.Addr]bool

	// cur counts the netlink calls of the sync under way (see counted);
	// work and workFull keep the last sync's until the world takes them.
	cur, work *sim.IPVSWork
	workFull  bool
}

// New applies the startup sysctls and IPVS timeouts and returns a proxier.
// The graceful termination manager runs on clk; observe may be nil.
func New(cfg Config, dp Dataplane, clk clock.WithDelayedExecution, observe func(Op)) (*Proxier, error) {
	if cfg.Scheduler == "" {
		cfg.Scheduler = DefaultScheduler
	}
	if observe == nil {
		observe = func(Op) {}
	}
	p := &Proxier{cfg: cfg, clock: clk, observe: observe, initialSync: true, nodeIPs: map[netip.Addr]bool{}}
	dp = p.counted(dp)
	p.dp = dp
	for _, n := range cfg.NodeIPs {
		if a, err := netip.ParseAddr(n); err == nil {
			p.nodeIPs[a.Unmap()] = true
		}
	}
	kv, err := ParseKernelVersion(dp.KernelVersion)
	if err != nil {
		return nil, err
	}
	values, notes := StartupSysctls(kv, cfg.StrictARP)
	for _, n := range notes {
		observe(Op{Name: "note", Detail: n})
	}
	for _, s := range values {
		if err := p.ensureSysctl(s.Name, s.Value); err != nil {
			return nil, err
		}
	}
	if t := cfg.Timeouts; t.TCP > 0 || t.TCPFin > 0 || t.UDP > 0 {
		err := dp.IPVS.SetTimeouts(t)
		p.observe(Op{Name: "timeouts", Detail: fmt.Sprintf("tcp=%v tcpfin=%v udp=%v", t.TCP, t.TCPFin, t.UDP), Err: err})
		if err != nil {
			return nil, err
		}
	}
	p.graceful = NewGracefulTerminationManager(dp.IPVS, clk, observe)
	return p, nil
}

// Graceful returns the proxier's graceful termination manager.
func (p *Proxier) Graceful() *GracefulTerminationManager { return p.graceful }

// ensureSysctl writes a sysctl only when it differs.
func (p *Proxier) ensureSysctl(name string, want int) error {
	cur, err := p.dp.Sysctl.Get(name)
	if err == nil && cur == want {
		return nil
	}
	err = p.dp.Sysctl.Set(name, want)
	p.observe(Op{Name: "sysctl", Detail: fmt.Sprintf("%s=%d", name, want), Err: err})
	if err != nil {
		return fmt.Errorf("sysctl %s=%d: %w", name, want, err)
	}
	return nil
}

type desiredVS struct {
	vs   VirtualServer
	dsts []RealServer // sorted by key, unique
	bind bool
}

// desiredFor computes the virtual servers one service asks for, adding them
// to out.
func (p *Proxier) desiredFor(s *proxy.SyncState, name types.NamespacedName, out map[string]*desiredVS) {
	add := func(addr string, port int32, sp *proxy.ServicePort, eps []*proxy.Endpoint, bind bool) {
		vs := VirtualServer{Address: addr, Protocol: string(sp.Protocol), Port: uint16(port), Scheduler: p.cfg.Scheduler}
		if sp.SessionAffinityClientIP {
			vs.Persistent, vs.Timeout = true, uint32(sp.StickyMaxAgeSeconds)
		}
		d := &desiredVS{vs: vs, dsts: make([]RealServer, 0, len(eps)), bind: bind}
		for _, e := range eps {
			d.dsts = append(d.dsts, RealServer{Address: e.IP, Port: uint16(e.Port), Weight: 1})
		}
		// Endpoint lists come sorted by IP:port and unique, which is the
		// real servers' key order; sort and deduplicate when they do not.
		if !strictlyIncreasing(d.dsts) {
			slices.SortStableFunc(d.dsts, compareRealServers)
			d.dsts = slices.CompactFunc(d.dsts, RealServer.sameAs)
		}
		out[vs.Key()] = d
	}
	for _, spn := range s.PortsOf(name) {
		sp := s.Services[spn]
		if sp == nil {
			continue
		}
		sel := proxy.SelectEndpoints(sp, s.Endpoints[spn], s.NodeName, s.Zone)
		internal, external := sel.Cluster, sel.Cluster
		// IPVS falls back to the cluster endpoints when a Local policy finds
		// no local ones.
		if sp.InternalPolicyLocal && len(sel.Local) > 0 {
			internal = sel.Local
		}
		if sp.ExternalPolicyLocal && len(sel.Local) > 0 {
			external = sel.Local
		}
		add(p.clusterIPText(sp.ClusterIP), sp.Port, sp, internal, true)
		// An external or load-balancer IP that is already one of the
		// node's own addresses is not bound to the dummy device
		// (kube-proxy's syncProxyRules: shouldBind).
		for _, ip := range sp.ExternalIPs {
			add(ip, sp.Port, sp, external, !p.isNodeIP(ip))
		}
		for _, ip := range sp.LoadBalancerIPs {
			add(ip, sp.Port, sp, external, !p.isNodeIP(ip))
		}
		if sp.NodePort != 0 {
			for _, ip := range p.cfg.NodeIPs {
				add(ip, sp.NodePort, sp, external, false)
			}
		}
	}
}

// ofFamily reports whether addr is of the proxier's family (any family when
// Config.Family is unset): the stale virtual servers and addresses a full
// sync may remove.
func (p *Proxier) ofFamily(addr string) bool {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return true
	}
	switch p.cfg.Family {
	case v1.IPv4Protocol:
		return a.Unmap().Is4()
	case v1.IPv6Protocol:
		return !a.Unmap().Is4()
	}
	return true
}

// ownsBound reports whether a kube-ipvs0 address is this proxier's to
// unbind: one of its family and no loopback address (kube-proxy's listing
// of bound addresses leaves those out).
func (p *Proxier) ownsBound(addr string) bool {
	if a, err := netip.ParseAddr(addr); err == nil && a.IsLoopback() {
		return false
	}
	return p.ofFamily(addr)
}

// isNodeIP reports whether addr is one of Config.NodeIPs.
func (p *Proxier) isNodeIP(addr string) bool {
	if len(p.nodeIPs) == 0 {
		return false
	}
	a, err := netip.ParseAddr(addr)
	return err == nil && p.nodeIPs[a.Unmap()]
}

func (p *Proxier) clusterIPText(ip net.IP) string {
	key, ok := netip.AddrFromSlice(ip)
	if !ok {
		return ip.String()
	}
	if s, ok := p.ipText[key]; ok {
		return s
	}
	if p.ipText == nil {
		p.ipText = map[netip.Addr]string{}
	}
	s := ip.String()
	p.ipText[key] = s
	return s
}

// Sync programs IPVS to match the state. The first sync, a sync after any
// failed operation, and one every FullSyncPeriod reconcile everything with
// the kernel, as kube-proxy's IPVS proxier does on every sync; the others
// touch only the services that changed, so their cost is proportional to
// the change. Every failed operation is recorded and the sync carries on;
// with SyncFailsOnError the sync then fails.
func (p *Proxier) Sync(s *proxy.SyncState) error {
	var errs []error
	do := func(name, detail string, err error) {
		p.observe(Op{Name: name, Detail: detail, Err: err})
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", name, detail, err))
		}
	}
	p.cur = &sim.IPVSWork{}
	now := p.clock.Now()
	full := p.initialSync || p.needFull || (p.cfg.FullSyncPeriod > 0 && now.Sub(p.lastFull) >= p.cfg.FullSyncPeriod)
	var err error
	if !full {
		full, err = p.partialSync(s, do)
	}
	if full {
		err = p.fullSync(s, do)
		p.lastFull = now
	}
	if err != nil {
		errs = append(errs, err)
	}
	p.work, p.workFull, p.cur = p.cur, full, nil
	p.initialSync = false
	p.needFull = len(errs) > 0
	if p.cfg.SyncFailsOnError {
		return errors.Join(errs...)
	}
	return nil
}

// fullSync reconciles every virtual server, real server and address with
// the kernel.
func (p *Proxier) fullSync(s *proxy.SyncState, do func(string, string, error)) error {
	want := map[string]*desiredVS{}
	p.applied = map[types.NamespacedName]map[string]*desiredVS{}
	p.owners = map[string]map[types.NamespacedName]bool{}
	names := make([]types.NamespacedName, 0, len(s.ServicePortsIndex()))
	for name := range s.ServicePortsIndex() {
		names = append(names, name)
	}
	slices.SortFunc(names, proxy.CompareNames)
	for _, name := range names {
		d := map[string]*desiredVS{}
		p.desiredFor(s, name, d)
		p.applied[name] = d
		for k, v := range d {
			want[k] = v
			if p.owners[k] == nil {
				p.owners[k] = map[types.NamespacedName]bool{}
			}
			p.owners[k][name] = true
		}
	}
	if err := p.dp.Addresses.EnsureDevice(DummyDevice); err != nil {
		return fmt.Errorf("ensure %s: %w", DummyDevice, err)
	}
	current, err := p.dp.IPVS.VirtualServers()
	if err != nil {
		return fmt.Errorf("list virtual servers: %w", err)
	}
	have := map[string]VirtualServer{}
	for _, vs := range current {
		have[vs.Key()] = vs
	}
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	// An address is bound only once its virtual server is in place; one
	// whose virtual server failed stays wanted (never unbound) but unbound
	// until a later sync succeeds.
	wanted, bindNow := map[string]bool{}, map[string]bool{}
	for _, k := range keys {
		d := want[k]
		if d.bind {
			wanted[d.vs.Address] = true
		}
		if p.syncVirtualServer(d, have[k], k, have, do) && d.bind {
			bindNow[d.vs.Address] = true
		}
	}
	// Virtual servers nobody wants any more go at once, with their real
	// servers. Draining entries of a deleted virtual server stay listed, as
	// in kube-proxy, until a check fails to find them.
	stale := make([]string, 0)
	for k := range have {
		if want[k] == nil {
			stale = append(stale, k)
		}
	}
	sort.Strings(stale)
	for _, k := range stale {
		if !p.ofFamily(have[k].Address) {
			continue // the other family's proxier's
		}
		do("delete-vs", have[k].String(), p.dp.IPVS.DeleteVirtualServer(have[k]))
	}
	p.syncAddresses(wanted, bindNow, do)
	return nil
}

// syncVirtualServer adds or updates one virtual server and syncs its real
// servers, reporting whether the virtual server is in place.
func (p *Proxier) syncVirtualServer(d *desiredVS, cur VirtualServer, key string, have map[string]VirtualServer, do func(string, string, error)) bool {
	var err error
	_, exists := have[key]
	switch {
	case !exists:
		err = p.dp.IPVS.AddVirtualServer(d.vs)
		do("add-vs", d.vs.String(), err)
	case cur != d.vs:
		err = p.dp.IPVS.UpdateVirtualServer(d.vs)
		do("update-vs", d.vs.String(), err)
	}
	if err != nil {
		return false // as kube-proxy: no real servers for a virtual server that failed
	}
	p.syncRealServers(d, do)
	return true
}

// partialSync reprograms only the services that changed. It reports
// full=true, doing nothing, when a changed service shares a virtual server
// with another service, before or after the change (only a full sync sorts
// that out).
func (p *Proxier) partialSync(s *proxy.SyncState, do func(string, string, error)) (full bool, err error) {
	changed := s.Changed()
	next := make(map[types.NamespacedName]map[string]*desiredVS, len(changed))
	shared := func(k string, name types.NamespacedName) bool {
		for o := range p.owners[k] {
			if o != name {
				return true
			}
		}
		return false
	}
	for _, name := range changed {
		d := map[string]*desiredVS{}
		p.desiredFor(s, name, d)
		for k := range d {
			if shared(k, name) {
				return true, nil
			}
		}
		for k := range p.applied[name] {
			if shared(k, name) {
				return true, nil
			}
		}
		next[name] = d
	}
	refs := map[string]int{} // change in the number of virtual servers binding each address
	for _, name := range changed {
		old, d := p.applied[name], next[name]
		have := map[string]VirtualServer{}
		for k, o := range old {
			have[k] = o.vs
		}
		keys := make([]string, 0, len(d))
		for k := range d {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			nd := d[k]
			if p.syncVirtualServer(nd, have[k], k, have, do) && nd.bind && old[k] == nil {
				refs[nd.vs.Address]++
			}
			if o := p.owners[k]; len(o) != 1 || !o[name] {
				p.owners[k] = map[types.NamespacedName]bool{name: true}
			}
		}
		stale := make([]string, 0)
		for k := range old {
			if d[k] == nil {
				stale = append(stale, k)
			}
		}
		sort.Strings(stale)
		for _, k := range stale {
			o := old[k]
			do("delete-vs", o.vs.String(), p.dp.IPVS.DeleteVirtualServer(o.vs))
			if o.bind {
				refs[o.vs.Address]--
			}
			delete(p.owners, k)
		}
		if len(d) == 0 {
			delete(p.applied, name)
		} else {
			p.applied[name] = d
		}
	}
	addrs := make([]string, 0, len(refs))
	for a := range refs {
		addrs = append(addrs, a)
	}
	sort.Strings(addrs)
	for _, a := range addrs {
		before := p.bindRefs[a]
		after := before + refs[a]
		switch {
		case before == 0 && after > 0:
			do("bind", a+" dev "+DummyDevice, p.dp.Addresses.Bind(DummyDevice, a))
		case before > 0 && after <= 0:
			do("unbind", a+" dev "+DummyDevice, p.dp.Addresses.Unbind(DummyDevice, a))
		}
		if after <= 0 {
			delete(p.bindRefs, a)
		} else {
			p.bindRefs[a] = after
		}
	}
	return false, nil
}

func (p *Proxier) syncRealServers(d *desiredVS, do func(string, string, error)) {
	cur, err := p.dp.IPVS.RealServers(d.vs)
	if err != nil {
		do("list-rs", d.vs.Key(), err)
		return
	}
	// On the first sync after a restart, kube-proxy re-sets every wanted real
	// server that exists once for each existing real server of the virtual
	// server whose weight is not 1: the end state is weight 1 everywhere.
	mismatched := 0
	if p.initialSync {
		for _, rs := range cur {
			if rs.Weight != 1 {
				mismatched++
			}
		}
	}
	inCur := listed(cur)
	for _, rs := range d.dsts {
		if inCur.has(rs) {
			for i := 0; i < mismatched; i++ {
				do("update-rs", rsOp(d.vs, rs, " weight 1 (first sync)"), p.dp.IPVS.UpdateRealServer(d.vs, rs))
			}
			if !p.graceful.InProgress(d.vs, rs) {
				continue
			}
			// The endpoint came back while draining: delete it now and add
			// it again below; if the delete fails, it is not re-added.
			if err := p.graceful.Cancel(d.vs, rs); err != nil {
				do("cancel-draining", rsOp(d.vs, rs, ""), err)
				continue
			}
		}
		do("add-rs", rsOpWeight(d.vs, rs), p.dp.IPVS.AddRealServer(d.vs, rs))
	}
	var stale []RealServer
	wanted := realServerSet(d.dsts) // desiredFor keeps it in key order
	for _, rs := range cur {
		if !wanted.has(rs) {
			stale = append(stale, rs)
		}
	}
	slices.SortFunc(stale, compareRealServers)
	for i, rs := range stale {
		if i > 0 && rs.sameAs(stale[i-1]) {
			continue // listed twice: one delete, as keyed by a map
		}
		if err := p.graceful.Delete(d.vs, rs); err != nil {
			do("delete-rs", rsOp(d.vs, rs, ""), err)
		}
	}
}

func strictlyIncreasing(l []RealServer) bool {
	for i := 1; i < len(l); i++ {
		if compareRealServers(l[i-1], l[i]) >= 0 {
			return false
		}
	}
	return true
}

// realServerSet answers membership in a listing of real servers: by a scan
// for the usual few, by a sorted search for many.
type realServerSet []RealServer

func listed(list []RealServer) realServerSet {
	if len(list) > 16 {
		slices.SortFunc(list, compareRealServers)
	}
	return list
}

func (s realServerSet) has(rs RealServer) bool {
	if len(s) > 16 {
		_, ok := slices.BinarySearchFunc(s, rs, compareRealServers)
		return ok
	}
	for _, o := range s {
		if o.sameAs(rs) {
			return true
		}
	}
	return false
}

// syncAddresses binds the addresses in bindNow that are not bound yet and
// unbinds every bound address that is not wanted at all; it then counts, per
// bound address, the virtual servers that want it, for partial syncs.
func (p *Proxier) syncAddresses(wanted, bindNow map[string]bool, do func(string, string, error)) {
	p.bindRefs = map[string]int{}
	for _, d := range p.applied {
		for _, v := range d {
			if v.bind && bindNow[v.vs.Address] {
				p.bindRefs[v.vs.Address]++
			}
		}
	}
	cur, err := p.dp.Addresses.Addresses(DummyDevice)
	if err != nil {
		do("list-addresses", DummyDevice, err)
		return
	}
	have := map[string]bool{}
	for _, a := range cur {
		have[a] = true
	}
	want := make([]string, 0, len(bindNow))
	for a := range bindNow {
		want = append(want, a)
	}
	sort.Strings(want)
	for _, a := range want {
		if !have[a] {
			do("bind", a+" dev "+DummyDevice, p.dp.Addresses.Bind(DummyDevice, a))
		}
	}
	sort.Strings(cur)
	for _, a := range cur {
		if !wanted[a] && p.ownsBound(a) {
			do("unbind", a+" dev "+DummyDevice, p.dp.Addresses.Unbind(DummyDevice, a))
		}
	}
}

// isConnectionless reports protocols whose real servers are deleted at once.
func isConnectionless(proto string) bool {
	return proto == string(v1.ProtocolUDP) || proto == string(v1.ProtocolSCTP)
}

var _ proxy.Backend = (*Proxier)(nil)

// CheckInterval is how often the graceful termination manager looks at the
// real servers it is draining.
const CheckInterval = time.Minute

// Stop ends the proxier's background work (the graceful termination check).
func (p *Proxier) Stop() { p.graceful.Stop() }
