package ipvs

import (
	"errors"
	"fmt"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

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
	// NodeIPs are the addresses NodePort virtual servers listen on.
	NodeIPs []string
	// FailSyncOnError makes a sync with a failed dataplane operation a
	// failed run, so the runner's retry rules apply. kube-proxy's IPVS
	// proxier never does this (it logs the failure and reports success); its
	// iptables and nftables proxiers fail the sync when a restore fails.
	FailSyncOnError bool
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
	observe     func(Op)
	initialSync bool
	graceful    *GracefulTerminationManager
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
	p := &Proxier{cfg: cfg, dp: dp, observe: observe, initialSync: true}
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
	dsts map[string]RealServer
	bind bool
}

// desired computes the virtual servers the state asks for.
func (p *Proxier) desired(s *proxy.SyncState) (map[string]*desiredVS, map[string]bool) {
	out := map[string]*desiredVS{}
	binds := map[string]bool{}
	add := func(addr string, port int32, sp *proxy.ServicePort, eps []*proxy.Endpoint, bind bool) {
		vs := VirtualServer{Address: addr, Protocol: string(sp.Protocol), Port: uint16(port), Scheduler: p.cfg.Scheduler}
		if sp.SessionAffinityClientIP {
			vs.Persistent, vs.Timeout = true, uint32(sp.StickyMaxAgeSeconds)
		}
		d := &desiredVS{vs: vs, dsts: map[string]RealServer{}, bind: bind}
		for _, e := range eps {
			rs := RealServer{Address: e.IP, Port: uint16(e.Port), Weight: 1}
			d.dsts[rs.Key()] = rs
		}
		out[vs.Key()] = d
		if bind {
			binds[addr] = true
		}
	}
	for _, name := range s.Services.SortedNames() {
		sp := s.Services[name]
		sel := proxy.SelectEndpoints(sp, s.Endpoints[name], s.NodeName, s.Zone)
		internal, external := sel.Cluster, sel.Cluster
		// IPVS falls back to the cluster endpoints when a Local policy finds
		// no local ones.
		if sp.InternalPolicyLocal && len(sel.Local) > 0 {
			internal = sel.Local
		}
		if sp.ExternalPolicyLocal && len(sel.Local) > 0 {
			external = sel.Local
		}
		add(sp.ClusterIP.String(), sp.Port, sp, internal, true)
		for _, ip := range sp.ExternalIPs {
			add(ip, sp.Port, sp, external, true)
		}
		for _, ip := range sp.LoadBalancerIPs {
			add(ip, sp.Port, sp, external, true)
		}
		if sp.NodePort != 0 {
			for _, ip := range p.cfg.NodeIPs {
				add(ip, sp.NodePort, sp, external, false)
			}
		}
	}
	return out, binds
}

// Sync programs IPVS to match the state. Every failed operation is recorded
// and the sync carries on; with FailSyncOnError the sync then fails.
func (p *Proxier) Sync(s *proxy.SyncState) error {
	var errs []error
	do := func(name, detail string, err error) {
		p.observe(Op{Name: name, Detail: detail, Err: err})
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", name, detail, err))
		}
	}
	want, binds := p.desired(s)
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
	bindNow := map[string]bool{}
	for _, k := range keys {
		d := want[k]
		cur, exists := have[k]
		var err error
		switch {
		case !exists:
			err = p.dp.IPVS.AddVirtualServer(d.vs)
			do("add-vs", d.vs.String(), err)
		case cur != d.vs:
			err = p.dp.IPVS.UpdateVirtualServer(d.vs)
			do("update-vs", d.vs.String(), err)
		}
		if err != nil {
			continue // as kube-proxy: no real servers for a virtual server that failed
		}
		if d.bind {
			bindNow[d.vs.Address] = true
		}
		p.syncRealServers(d, do)
	}
	// Virtual servers nobody wants any more go at once, with their real
	// servers.
	stale := make([]string, 0)
	for k := range have {
		if want[k] == nil {
			stale = append(stale, k)
		}
	}
	sort.Strings(stale)
	for _, k := range stale {
		// Draining entries of a deleted virtual server stay listed, as in
		// kube-proxy, until a check fails to find them.
		do("delete-vs", have[k].String(), p.dp.IPVS.DeleteVirtualServer(have[k]))
	}
	p.syncAddresses(binds, bindNow, do)
	p.initialSync = false
	if p.cfg.FailSyncOnError {
		return errors.Join(errs...)
	}
	return nil
}

func (p *Proxier) syncRealServers(d *desiredVS, do func(string, string, error)) {
	cur, err := p.dp.IPVS.RealServers(d.vs)
	if err != nil {
		do("list-rs", d.vs.Key(), err)
		return
	}
	have := map[string]RealServer{}
	for _, rs := range cur {
		have[rs.Key()] = rs
	}
	keys := make([]string, 0, len(d.dsts))
	for k := range d.dsts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
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
	for _, k := range keys {
		rs := d.dsts[k]
		if _, ok := have[k]; ok {
			for i := 0; i < mismatched; i++ {
				do("update-rs", d.vs.Key()+" -> "+rs.Key()+" weight 1 (first sync)", p.dp.IPVS.UpdateRealServer(d.vs, rs))
			}
			if !p.graceful.InProgress(d.vs, rs) {
				continue
			}
			// The endpoint came back while draining: delete it now and add
			// it again below; if the delete fails, it is not re-added.
			if err := p.graceful.Cancel(d.vs, rs); err != nil {
				do("cancel-draining", d.vs.Key()+" -> "+rs.Key(), err)
				continue
			}
		}
		do("add-rs", d.vs.Key()+" -> "+rs.Key()+fmt.Sprintf(" weight %d", rs.Weight), p.dp.IPVS.AddRealServer(d.vs, rs))
	}
	stale := make([]string, 0)
	for k := range have {
		if _, ok := d.dsts[k]; !ok {
			stale = append(stale, k)
		}
	}
	sort.Strings(stale)
	for _, k := range stale {
		if err := p.graceful.Delete(d.vs, have[k]); err != nil {
			do("delete-rs", d.vs.Key()+" -> "+k, err)
		}
	}
}

// syncAddresses binds the addresses in bindNow that are not bound yet and
// unbinds every bound address that is not wanted at all.
func (p *Proxier) syncAddresses(wanted, bindNow map[string]bool, do func(string, string, error)) {
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
		if !wanted[a] {
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
