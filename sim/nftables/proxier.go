package nftables

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/utils/clock"
	"sigs.k8s.io/knftables"

	"github.com/proxysim/proxysim/sim"
	"github.com/proxysim/proxysim/sim/proxy"
)

// FullSyncPeriod is kube-proxy's proxyutil.FullSyncPeriod: a sync more than
// this long after the last full one is full again.
const FullSyncPeriod = time.Hour

// StaleChainDelay is how long a stale service chain stays, flushed, before
// a sync deletes it: kube-proxy's syncProxyRules deletes chains it flushed
// more than one second before the sync's start (an inline literal there),
// because kernels before 6.2 notice that a chain is no longer referenced
// only a little later.
const StaleChainDelay = time.Second

// DefaultMasqueradeBit is kube-proxy's default --iptables-masquerade-bit,
// which the nftables proxier uses too.
const DefaultMasqueradeBit = 14

// Config is what the proxier syncs with, beyond the cluster state.
type Config struct {
	// IPv6 makes the proxier serve the ip6 family; otherwise ip.
	IPv6 bool
	// MasqueradeBit is the bit of the packet mark that asks for SNAT; 0
	// means DefaultMasqueradeBit.
	MasqueradeBit int
	// MasqueradeAll masquerades all ClusterIP traffic.
	MasqueradeAll bool
	// ClusterCIDR is the pod CIDR of kube-proxy's ClusterCIDR local-traffic
	// detector; empty means no detector.
	ClusterCIDR string
	// NodePortIPs are the addresses node ports are served on (kube-proxy's
	// --nodeport-addresses resolved to addresses, e.g. "primary"); empty
	// means every local address (`fib daddr type local`) but loopback.
	NodePortIPs []net.IP
	// ServiceCIDRs, when known, let traffic to an unallocated ClusterIP be
	// dropped.
	ServiceCIDRs []string
	// NodeIP is the node's address of this family (kube-proxy's nodeIP): a
	// loadBalancerSourceRange holding it also lets in the LoadBalancer IPs
	// themselves as sources.
	NodeIP net.IP
}

func (c Config) ipX() string {
	if c.IPv6 {
		return "ip6"
	}
	return "ip"
}

func (c Config) addrType() string {
	if c.IPv6 {
		return "ipv6_addr"
	}
	return "ipv4_addr"
}

func (c Config) noLocalhost() string {
	if c.IPv6 {
		return "ip6 daddr != ::1"
	}
	return "ip daddr != 127.0.0.0/8"
}

// Mark is the masquerade mark as kube-proxy prints it (`%#08x`).
func (c Config) Mark() string {
	bit := c.MasqueradeBit
	if bit == 0 {
		bit = DefaultMasqueradeBit
	}
	return fmt.Sprintf("%#08x", uint32(1)<<bit)
}

func (c Config) masqueradeRule() string { return "mark set mark or " + c.Mark() }

// Family is the knftables family of the configuration.
func (c Config) Family() knftables.Family {
	if c.IPv6 {
		return knftables.IPv6Family
	}
	return knftables.IPv4Family
}

// Metrics are kube-proxy's nftables metrics as exact counts
// (pkg/proxy/metrics: kubeproxy_sync_proxy_rules_nftables_*, the full and
// partial sync histograms' sample counts, the no-local-endpoints gauges).
type Metrics struct {
	// SyncFailures counts failed sync transactions
	// (nftables_sync_failures_total).
	SyncFailures int
	// CleanupFailures counts failed stale-chain deletions
	// (nftables_cleanup_failures_total).
	CleanupFailures int
	// FullSyncs and PartialSyncs count the samples of
	// sync_full_proxy_rules_duration_seconds and
	// sync_partial_proxy_rules_duration_seconds: every sync, failed or not.
	FullSyncs, PartialSyncs int
	// NoLocalEndpointsInternal and NoLocalEndpointsExternal are the
	// sync_proxy_rules_no_local_endpoints_total gauges, set after each
	// successful sync.
	NoLocalEndpointsInternal, NoLocalEndpointsExternal int
}

// Proxier is kube-proxy v1.36's nftables proxier over a knftables
// Interface: the real one in production, knftables.Fake in a simulation.
type Proxier struct {
	cfg   Config
	nft   knftables.Interface
	clk   clock.PassiveClock
	trace func(op, detail string, err error)

	needFullSync bool
	lastFullSync time.Time
	// baseChainsReset is kube-proxy's `flushed`: the first full sync of a
	// proxier adds and deletes every base chain once, so that a changed
	// priority takes effect.
	baseChainsReset bool
	// staleChains are service chains flushed and no longer referenced,
	// with the start of the sync that flushed them.
	staleChains map[string]time.Time

	containers []*elements
	clusterIPs, serviceIPs, firewallIPs, noEndpointServices,
	noEndpointNodePorts, serviceNodePorts, hairpin *elements

	metrics Metrics

	// portBases caches each service port's chain-name part (a SHA-256:
	// it never changes for a port), forgotten when it holds more than
	// twice the ports of a sync.
	portBases map[proxy.ServicePortName]string

	// work is what the last sync wrote and read, until the world takes it;
	// workFull whether it was full.
	work     *sim.NFTablesWork
	workFull bool
}

// New builds a proxier over nft on clk (which times full syncs and stale
// chains); trace, if not nil, hears every transaction.
func New(cfg Config, nft knftables.Interface, clk clock.PassiveClock, trace func(op, detail string, err error)) *Proxier {
	if trace == nil {
		trace = func(string, string, error) {}
	}
	p := &Proxier{cfg: cfg, nft: nft, clk: clk, trace: trace, needFullSync: true, staleChains: map[string]time.Time{}}
	p.clusterIPs = newElements("set", SetClusterIPs)
	p.serviceIPs = newElements("map", MapServiceIPs)
	p.firewallIPs = newElements("map", MapFirewallIPs)
	p.noEndpointServices = newElements("map", MapNoEndpointServices)
	p.noEndpointNodePorts = newElements("map", MapNoEndpointNodePorts)
	p.serviceNodePorts = newElements("map", MapServiceNodePorts)
	p.hairpin = newElements("set", SetHairpinConnections)
	p.containers = []*elements{p.clusterIPs, p.serviceIPs, p.firewallIPs, p.noEndpointServices, p.noEndpointNodePorts, p.serviceNodePorts, p.hairpin}
	return p
}

// ForceFullSync makes the next sync full, as kube-proxy's nftables
// proxier does on a change of the node's topology labels
// (OnTopologyChange).
func (p *Proxier) ForceFullSync() { p.needFullSync = true }

// Metrics returns the proxier's metrics so far.
func (p *Proxier) Metrics() Metrics { return p.metrics }

// StaleChains lists the chains waiting to be deleted, sorted.
func (p *Proxier) StaleChains() []string {
	out := make([]string, 0, len(p.staleChains))
	for c := range p.staleChains {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

// Sync is kube-proxy's syncProxyRules after the change trackers: delete
// stale chains that are old enough, then build and run one transaction —
// the whole table on a full sync, only the changed services' chains and
// the element diffs otherwise. A failed transaction fails the sync and
// makes the next one full.
func (p *Proxier) Sync(st *proxy.SyncState) (err error) {
	ctx := context.Background()
	start := p.clk.Now()
	full := p.needFullSync || start.Sub(p.lastFullSync) > FullSyncPeriod
	p.work = &sim.NFTablesWork{}
	defer func() {
		p.workFull = full
		if full {
			p.metrics.FullSyncs++
		} else {
			p.metrics.PartialSyncs++
		}
		if err != nil {
			p.needFullSync = true
		} else if full {
			p.lastFullSync = p.clk.Now()
		}
	}()

	if len(p.staleChains) > 0 {
		if p.deleteStaleChains(ctx, start) != nil {
			full = true
		}
	}

	tx := p.newTxn()
	if full {
		p.setup(ctx, tx)
	}

	var existingChains, existingAffinity map[string]bool
	all, lerr := p.nft.ListAll(ctx)
	p.work.Listings++
	for _, names := range all {
		p.work.ObjectsListed += len(names)
	}
	if lerr == nil {
		existingChains = toSet(all["chain"])
		existingAffinity = map[string]bool{}
		for _, s := range all["set"] {
			if strings.HasPrefix(s, PrefixAffinity) {
				existingAffinity[s] = true
			}
		}
	}
	// kube-proxy only logs a failed listing: nothing is then flushed as
	// stale, and the transaction still runs.

	changed := map[string]bool{}
	for _, n := range st.Changed() {
		changed[n.String()] = true
	}
	active := map[string]bool{}
	activeAffinity := map[string]bool{}
	if len(p.portBases) > 2*len(st.Services)+64 {
		p.portBases = nil
	}
	var noLocalInternal, noLocalExternal int
	for _, n := range st.Services.SortedNames() {
		skip := !full && !changed[n.NamespacedName.String()]
		i, e := p.syncServicePort(tx, st, n, st.Services[n], skip, active, activeAffinity)
		noLocalInternal += i
		noLocalExternal += e
	}

	for _, c := range sortedKeys(existingChains) {
		if !isServiceChain(c) {
			continue
		}
		if !active[c] {
			tx.Flush(&knftables.Chain{Name: c})
			p.work.StaleChainsFlushed++
			p.staleChains[c] = start
		} else {
			delete(p.staleChains, c)
		}
	}
	for _, s := range sortedKeys(existingAffinity) {
		if !activeAffinity[s] {
			tx.Delete(&knftables.Set{Name: s})
		}
	}
	for _, c := range p.containers {
		c.deleteLeftovers(tx)
	}

	kind := "partial"
	if full {
		kind = "full"
	}
	if rerr := p.run(ctx, tx); rerr != nil {
		p.trace("transaction", fmt.Sprintf("%s sync, %d operations", kind, tx.NumOperations()), rerr)
		p.metrics.SyncFailures++
		clear(p.staleChains)
		return fmt.Errorf("nftables: %w", rerr)
	}
	p.trace("transaction", fmt.Sprintf("%s sync, %d operations", kind, tx.NumOperations()), nil)
	p.needFullSync = false
	p.metrics.NoLocalEndpointsInternal = noLocalInternal
	p.metrics.NoLocalEndpointsExternal = noLocalExternal
	return nil
}

// deleteStaleChains deletes, in a transaction of its own, the stale chains
// flushed more than StaleChainDelay before start; the others wait for a
// later sync (no timer drives this). A failure is counted and makes the
// sync full; the chains are forgotten either way, as kube-proxy forgets
// them (a full sync finds them again if they are still there).
func (p *Proxier) deleteStaleChains(ctx context.Context, start time.Time) error {
	cutoff := start.Add(-StaleChainDelay)
	tx := &txn{Transaction: p.nft.NewTransaction(), work: p.work}
	var deleted []string
	for _, c := range p.StaleChains() {
		if p.staleChains[c].Before(cutoff) {
			tx.Delete(&knftables.Chain{Name: c})
			p.work.StaleChainsDeleted++
			delete(p.staleChains, c)
			deleted = append(deleted, c)
		}
	}
	if len(deleted) == 0 {
		return nil
	}
	p.work.Transactions++
	err := p.run(ctx, tx)
	p.trace("delete-stale", strings.Join(deleted, " "), err)
	if err != nil {
		p.metrics.CleanupFailures++
	}
	return err
}

// ensureChain adds and flushes a chain once per transaction, as
// kube-proxy's ensureChain; with skip (a service not rewritten in a
// partial sync) it only marks the chain active.
func ensureChain(tx *txn, name string, active map[string]bool, skip bool) {
	if active[name] {
		return
	}
	active[name] = true
	if skip {
		return
	}
	tx.Add(&knftables.Chain{Name: name})
	tx.Flush(&knftables.Chain{Name: name})
	tx.work.ChainsRewritten++
}

// setup is kube-proxy's setupNFTables: the table, the base chains (reset
// once per proxier), the jump chains and the fixed rules, the sets and
// maps, and the element storage read back from the dataplane.
func (p *Proxier) setup(ctx context.Context, tx *txn) {
	c := p.cfg
	ipX := c.ipX()
	tx.Add(&knftables.Table{Comment: knftables.PtrTo("rules for kube-proxy")})
	if !p.baseChainsReset {
		for _, bc := range baseChains {
			tx.Add(&knftables.Chain{Name: bc.name})
			tx.Delete(&knftables.Chain{Name: bc.name})
		}
		p.baseChainsReset = true
	}
	for _, bc := range baseChains {
		ch := &knftables.Chain{Name: bc.name, Type: knftables.PtrTo(bc.typ), Hook: knftables.PtrTo(bc.hook), Priority: knftables.PtrTo(bc.priority)}
		tx.Add(ch)
		tx.Flush(ch)
		tx.work.ChainsRewritten++
	}
	created := map[string]bool{}
	for _, j := range jumpChains {
		ensureChain(tx, j.to, created, false)
		tx.Add(&knftables.Rule{Chain: j.from, Rule: knftables.Concat(j.match, "jump", j.to)})
	}
	for _, ch := range []string{ChainServices, ChainClusterIPsCheck, ChainMasquerading} {
		ensureChain(tx, ch, created, false)
	}

	tx.Add(&knftables.Set{Name: SetHairpinConnections, Type: c.addrType() + " . " + c.addrType() + " . inet_proto . inet_service",
		Comment: knftables.PtrTo("service hairpin connections")})
	tx.Add(&knftables.Rule{Chain: ChainMasquerading, Rule: knftables.Concat(
		"mark", "and", c.Mark(), "!=", "0", "mark", "set", "mark", "xor", c.Mark(), "masquerade fully-random")})
	tx.Add(&knftables.Rule{Chain: ChainMasquerading, Rule: knftables.Concat(
		"ct status dnat", ipX, "saddr", ".", ipX, "daddr", ".", "meta l4proto", ".", "th dport", "@", SetHairpinConnections,
		"masquerade fully-random")})

	tx.Add(&knftables.Set{Name: SetClusterIPs, Type: c.addrType(), Comment: knftables.PtrTo("Active ClusterIPs")})
	tx.Add(&knftables.Rule{Chain: ChainClusterIPsCheck, Rule: knftables.Concat(ipX, "daddr", "@", SetClusterIPs, "reject"),
		Comment: knftables.PtrTo("Reject traffic to invalid ports of ClusterIPs")})
	if len(c.ServiceCIDRs) > 0 {
		tx.Add(&knftables.Rule{Chain: ChainClusterIPsCheck,
			Rule:    knftables.Concat(ipX, "daddr", "{", strings.Join(c.ServiceCIDRs, ","), "}", "drop"),
			Comment: knftables.PtrTo("Drop traffic to unallocated ClusterIPs")})
	}

	tx.Add(&knftables.Set{Name: SetNodePortIPs, Type: c.addrType(), Comment: knftables.PtrTo("IPs that accept NodePort traffic")})
	if len(c.NodePortIPs) == 0 {
		tx.Delete(&knftables.Set{Name: SetNodePortIPs})
	} else {
		tx.Flush(&knftables.Set{Name: SetNodePortIPs})
		for _, ip := range c.NodePortIPs {
			if ip.IsLoopback() {
				continue // kube-proxy refuses localhost node ports here
			}
			tx.Add(&knftables.Element{Set: SetNodePortIPs, Key: []string{ip.String()}})
		}
	}

	tx.Add(&knftables.Map{Name: MapNoEndpointServices, Type: c.addrType() + " . inet_proto . inet_service : verdict",
		Comment: knftables.PtrTo("vmap to drop or reject packets to services with no endpoints")})
	tx.Add(&knftables.Map{Name: MapNoEndpointNodePorts, Type: "inet_proto . inet_service : verdict",
		Comment: knftables.PtrTo("vmap to drop or reject packets to service nodeports with no endpoints")})
	tx.Add(&knftables.Chain{Name: ChainReject, Comment: knftables.PtrTo("helper for @no-endpoint-services / @no-endpoint-nodeports")})
	tx.Flush(&knftables.Chain{Name: ChainReject})
	tx.work.ChainsRewritten++
	tx.Add(&knftables.Rule{Chain: ChainReject, Rule: "reject"})
	tx.Add(&knftables.Rule{Chain: ChainServiceEndpointsCheck, Rule: knftables.Concat(
		ipX, "daddr", ".", "meta l4proto", ".", "th dport", "vmap", "@", MapNoEndpointServices)})
	if len(c.NodePortIPs) == 0 {
		tx.Add(&knftables.Rule{Chain: ChainNodePortEndpointsCheck, Rule: knftables.Concat(
			c.noLocalhost(), "meta l4proto . th dport", "vmap", "@", MapNoEndpointNodePorts)})
	} else {
		tx.Add(&knftables.Rule{Chain: ChainNodePortEndpointsCheck, Rule: knftables.Concat(
			ipX, "daddr", "@", SetNodePortIPs, "meta l4proto . th dport", "vmap", "@", MapNoEndpointNodePorts)})
	}

	tx.Add(&knftables.Map{Name: MapFirewallIPs, Type: c.addrType() + " . inet_proto . inet_service : verdict",
		Comment: knftables.PtrTo("destinations that are subject to LoadBalancerSourceRanges")})
	ensureChain(tx, ChainFirewallCheck, created, false)
	tx.Add(&knftables.Rule{Chain: ChainFirewallCheck, Rule: knftables.Concat(
		ipX, "daddr", ".", "meta l4proto", ".", "th dport", "vmap", "@", MapFirewallIPs)})

	tx.Add(&knftables.Map{Name: MapServiceIPs, Type: c.addrType() + " . inet_proto . inet_service : verdict",
		Comment: knftables.PtrTo("ClusterIP, ExternalIP and LoadBalancer IP traffic")})
	tx.Add(&knftables.Map{Name: MapServiceNodePorts, Type: "inet_proto . inet_service : verdict",
		Comment: knftables.PtrTo("NodePort traffic")})
	switch {
	case c.MasqueradeAll:
		tx.Add(&knftables.Rule{Chain: ChainServices, Rule: knftables.Concat(ipX, "daddr", "@", SetClusterIPs, c.masqueradeRule()),
			Comment: knftables.PtrTo("masquerade all clusterIP traffic")})
	case c.ClusterCIDR != "":
		tx.Add(&knftables.Rule{Chain: ChainServices, Rule: knftables.Concat(ipX, "daddr", "@", SetClusterIPs, ipX, "saddr", "!=", c.ClusterCIDR, c.masqueradeRule()),
			Comment: knftables.PtrTo("masquerade clusterIP traffic from outside cluster")})
	}
	tx.Add(&knftables.Rule{Chain: ChainServices, Rule: knftables.Concat(
		ipX, "daddr", ".", "meta l4proto", ".", "th dport", "vmap", "@", MapServiceIPs)})
	if len(c.NodePortIPs) == 0 {
		tx.Add(&knftables.Rule{Chain: ChainServices, Rule: knftables.Concat(
			"fib daddr type local", c.noLocalhost(), "meta l4proto . th dport", "vmap", "@", MapServiceNodePorts)})
	} else {
		tx.Add(&knftables.Rule{Chain: ChainServices, Rule: knftables.Concat(
			ipX, "daddr @nodeport-ips", "meta l4proto . th dport", "vmap", "@", MapServiceNodePorts)})
	}

	for _, e := range p.containers {
		e.readOrReset(ctx, tx, p.nft)
	}
}

// syncServicePort is the body of kube-proxy's per service-port loop: the
// elements of every service port, and the chains of those not skipped.
// It returns whether the port counts as having no local endpoints for
// internal and for external traffic (0 or 1 each).
func (p *Proxier) syncServicePort(tx *txn, st *proxy.SyncState, n proxy.ServicePortName, sp *proxy.ServicePort,
	skip bool, active, activeAffinity map[string]bool) (noLocalInternal, noLocalExternal int) {
	c := p.cfg
	ipX := c.ipX()
	proto := strings.ToLower(string(sp.Protocol))
	port := strconv.Itoa(int(sp.Port))
	nameString := n.String()
	sel := proxy.SelectEndpoints(sp, st.Endpoints[n], st.NodeName, st.Zone)
	hasEndpoints := sel.HasAnyEndpoints
	affinity := sp.SessionAffinityClientIP
	reachable := locallyReachable(sp, sel)

	for _, e := range reachable {
		if affinity {
			ensureChain(tx, EndpointChain(n, e.String()), active, skip)
			activeAffinity[AffinitySet(n, e.String())] = true
		}
		if e.IsLocal {
			p.hairpin.ensure(tx, &knftables.Element{Set: SetHairpinConnections,
				Key: []string{e.IP, e.IP, proto, strconv.Itoa(int(e.Port))}})
		}
	}

	clusterChain := p.serviceChain(PrefixService, n)
	usesCluster := len(sel.Cluster) > 0 && sp.UsesClusterEndpoints()
	if usesCluster {
		ensureChain(tx, clusterChain, active, skip)
	}
	localChain := p.serviceChain(PrefixLocal, n)
	usesLocal := len(sel.Local) > 0 && sp.UsesLocalEndpoints()
	if usesLocal {
		ensureChain(tx, localChain, active, skip)
	}

	internalChain, hasInternal := clusterChain, hasEndpoints
	if sp.InternalPolicyLocal {
		internalChain = localChain
		hasInternal = hasInternal && len(sel.Local) > 0
	}
	externalPolicyChain, hasExternal := clusterChain, hasEndpoints
	if sp.ExternalPolicyLocal {
		externalPolicyChain = localChain
		hasExternal = hasExternal && len(sel.Local) > 0
	}
	externalChain := p.serviceChain(PrefixExternal, n)
	usesExternal := hasEndpoints && sp.ExternallyAccessible()
	if usesExternal {
		ensureChain(tx, externalChain, active, skip)
	}

	var internalVerdict, externalVerdict string
	if !hasEndpoints {
		internalVerdict, externalVerdict = "goto "+ChainReject, "goto "+ChainReject
	} else {
		if !hasInternal {
			internalVerdict = "drop"
			noLocalInternal = 1
		}
		if !hasExternal {
			externalVerdict = "drop"
			noLocalExternal = 1
		}
	}

	comment := &nameString
	p.clusterIPs.ensure(tx, &knftables.Element{Set: SetClusterIPs, Key: []string{sp.ClusterIP.String()}})
	if hasInternal {
		p.serviceIPs.ensure(tx, &knftables.Element{Map: MapServiceIPs, Key: []string{sp.ClusterIP.String(), proto, port},
			Value: []string{"goto " + internalChain}})
	} else {
		p.noEndpointServices.ensure(tx, &knftables.Element{Map: MapNoEndpointServices, Key: []string{sp.ClusterIP.String(), proto, port},
			Value: []string{internalVerdict}, Comment: comment})
	}
	for _, ip := range sp.ExternalIPs {
		if hasEndpoints {
			p.serviceIPs.ensure(tx, &knftables.Element{Map: MapServiceIPs, Key: []string{ip, proto, port},
				Value: []string{"goto " + externalChain}})
		}
		if !hasExternal {
			p.noEndpointServices.ensure(tx, &knftables.Element{Map: MapNoEndpointServices, Key: []string{ip, proto, port},
				Value: []string{externalVerdict}, Comment: comment})
		}
	}
	// loadBalancerSourceRanges (syncProxyRules, "usesFWChain"): a port
	// with LoadBalancer IPs and ranges gets a firewall- chain, and each of
	// its LoadBalancer IPs a firewall-ips element that sends new
	// connections there before DNAT. Unlike iptables mode this does not
	// depend on the port having endpoints.
	firewallChain := p.serviceChain(PrefixFirewall, n)
	usesFirewall := len(sp.LoadBalancerIPs) > 0 && len(sp.LoadBalancerSourceRanges) > 0
	if usesFirewall {
		ensureChain(tx, firewallChain, active, skip)
	}
	for _, ip := range sp.LoadBalancerIPs {
		if hasEndpoints {
			p.serviceIPs.ensure(tx, &knftables.Element{Map: MapServiceIPs, Key: []string{ip, proto, port},
				Value: []string{"goto " + externalChain}})
		}
		if usesFirewall {
			p.firewallIPs.ensure(tx, &knftables.Element{Map: MapFirewallIPs, Key: []string{ip, proto, port},
				Value: []string{"goto " + firewallChain}})
		}
	}
	if !hasExternal {
		for _, ip := range sp.LoadBalancerIPs {
			p.noEndpointServices.ensure(tx, &knftables.Element{Map: MapNoEndpointServices, Key: []string{ip, proto, port},
				Value: []string{externalVerdict}, Comment: comment})
		}
	}
	if sp.NodePort != 0 {
		np := strconv.Itoa(int(sp.NodePort))
		if hasEndpoints {
			p.serviceNodePorts.ensure(tx, &knftables.Element{Map: MapServiceNodePorts, Key: []string{proto, np},
				Value: []string{"goto " + externalChain}})
		}
		if !hasExternal {
			p.noEndpointNodePorts.ensure(tx, &knftables.Element{Map: MapNoEndpointNodePorts, Key: []string{proto, np},
				Value: []string{externalVerdict}, Comment: comment})
		}
	}

	if skip {
		return
	}

	if usesExternal {
		if !sp.ExternalPolicyLocal {
			tx.Add(&knftables.Rule{Chain: externalChain, Rule: c.masqueradeRule(), Comment: knftables.PtrTo("masquerade")})
		} else {
			if c.ClusterCIDR != "" {
				tx.Add(&knftables.Rule{Chain: externalChain, Rule: knftables.Concat(ipX, "saddr", c.ClusterCIDR, "goto", clusterChain),
					Comment: knftables.PtrTo("short-circuit pod traffic")})
			}
			tx.Add(&knftables.Rule{Chain: externalChain, Rule: knftables.Concat("fib", "saddr", "type", "local", c.masqueradeRule()),
				Comment: knftables.PtrTo("masquerade local traffic")})
			tx.Add(&knftables.Rule{Chain: externalChain, Rule: knftables.Concat("fib", "saddr", "type", "local", "goto", clusterChain),
				Comment: knftables.PtrTo("short-circuit local traffic")})
		}
		if hasExternal {
			tx.Add(&knftables.Rule{Chain: externalChain, Rule: knftables.Concat("goto", externalPolicyChain)})
		}
	}

	if usesFirewall {
		p.writeFirewall(tx, firewallChain, sp)
	}

	if affinity {
		timeout := sp.StickyMaxAgeSeconds
		if timeout == 0 {
			timeout = proxy.DefaultAffinityTimeout
		}
		for _, e := range reachable {
			tx.Add(&knftables.Set{Name: AffinitySet(n, e.String()), Type: c.addrType(),
				Flags:   []knftables.SetFlag{knftables.DynamicFlag, knftables.TimeoutFlag},
				Timeout: knftables.PtrTo(time.Duration(timeout) * time.Second)})
		}
		if usesCluster {
			p.writeEndpointJumps(tx, n, clusterChain, sel.Cluster)
		}
		if usesLocal {
			p.writeEndpointJumps(tx, n, localChain, sel.Local)
		}
		for _, e := range reachable {
			ch := EndpointChain(n, e.String())
			tx.Add(&knftables.Rule{Chain: ch, Rule: knftables.Concat("update", "@", AffinitySet(n, e.String()), "{", ipX, "saddr", "}")})
			tx.Add(&knftables.Rule{Chain: ch, Rule: knftables.Concat("meta l4proto", proto, "dnat to", e.String())})
		}
		return
	}
	if usesCluster {
		p.writeEndpointDNATs(tx, proto, clusterChain, sel.Cluster)
	}
	if usesLocal {
		p.writeEndpointDNATs(tx, proto, localChain, sel.Local)
	}
	return
}

// writeFirewall fills a port's firewall- chain (syncProxyRules, the
// "usesFWChain" rule): one rule dropping every source outside the ranges.
// When a range holds the node's address, the LoadBalancer IPs are allowed
// as sources too: a node reaching a VIP it holds locally arrives with the
// VIP as its source.
func (p *Proxier) writeFirewall(tx *txn, chain string, sp *proxy.ServicePort) {
	var allowed []string
	fromNode := false
	for _, cidr := range sp.LoadBalancerSourceRanges {
		if len(allowed) > 0 {
			allowed = append(allowed, ",")
		}
		allowed = append(allowed, cidr)
		if _, n, err := net.ParseCIDR(cidr); err == nil && p.cfg.NodeIP != nil && n.Contains(p.cfg.NodeIP) {
			fromNode = true
		}
	}
	if fromNode {
		for _, ip := range sp.LoadBalancerIPs {
			allowed = append(allowed, ",", ip)
		}
	}
	tx.Add(&knftables.Rule{Chain: chain, Rule: knftables.Concat(p.cfg.ipX(), "saddr", "!=", "{", allowed, "}", "drop")})
}

// writeEndpointDNATs is kube-proxy's writeServiceToEndpointDNATs: one rule
// that picks endpoint i with `numgen random mod N` and DNATs through an
// anonymous map, 1/N each.
func (p *Proxier) writeEndpointDNATs(tx *txn, proto, chain string, eps []*proxy.Endpoint) {
	var elems []string
	for i, e := range eps {
		if i > 0 {
			elems = append(elems, ",")
		}
		elems = append(elems, strconv.Itoa(i), ":", e.IP, ".", strconv.Itoa(int(e.Port)))
	}
	tx.Add(&knftables.Rule{Chain: chain, Rule: knftables.Concat(
		"meta l4proto", proto, "dnat", p.cfg.ipX(), "addr . port to", "numgen random mod", len(eps), "map", "{", elems, "}")})
}

// writeEndpointJumps is kube-proxy's writeServiceToEndpointJumps: a client
// in an endpoint's affinity set goes back to it; any other is spread with
// `numgen random mod N` over the endpoint chains.
func (p *Proxier) writeEndpointJumps(tx *txn, n proxy.ServicePortName, chain string, eps []*proxy.Endpoint) {
	var elems []string
	for i, e := range eps {
		ch := EndpointChain(n, e.String())
		tx.Add(&knftables.Rule{Chain: chain, Rule: knftables.Concat(p.cfg.ipX(), "saddr", "@", AffinitySet(n, e.String()), "goto", ch)})
		if i > 0 {
			elems = append(elems, ",")
		}
		elems = append(elems, strconv.Itoa(i), ":", "goto", ch)
	}
	tx.Add(&knftables.Rule{Chain: chain, Rule: knftables.Concat("numgen random mod", len(eps), "vmap", "{", elems, "}")})
}

// serviceChain is ServiceChain through the proxier's cache.
func (p *Proxier) serviceChain(prefix string, n proxy.ServicePortName) string {
	b, ok := p.portBases[n]
	if !ok {
		if p.portBases == nil {
			p.portBases = map[proxy.ServicePortName]string{}
		}
		b = portBase(n)
		p.portBases[n] = b
	}
	return prefix + b
}

// locallyReachable is kube-proxy's allLocallyReachableEndpoints
// (proxy.CategorizeEndpoints): the cluster set, then the local endpoints
// not in it. kube-proxy merges through a Go map when both sets are used,
// so its order there is random; this one is fixed.
func locallyReachable(sp *proxy.ServicePort, sel proxy.Selection) []*proxy.Endpoint {
	var out []*proxy.Endpoint
	type hostPort struct {
		ip   string
		port int32
	}
	seen := map[hostPort]bool{}
	add := func(eps []*proxy.Endpoint) {
		for _, e := range eps {
			if k := (hostPort{e.IP, e.Port}); !seen[k] {
				seen[k] = true
				out = append(out, e)
			}
		}
	}
	if sp.UsesClusterEndpoints() {
		add(sel.Cluster)
	}
	if sp.UsesLocalEndpoints() {
		add(sel.Local)
	}
	return out
}

func toSet(l []string) map[string]bool {
	out := make(map[string]bool, len(l))
	for _, s := range l {
		out[s] = true
	}
	return out
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
