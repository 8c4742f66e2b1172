package iptables

import (
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/proxysim/proxysim/sim"
	"github.com/proxysim/proxysim/sim/proxy"
)

// Config is what the proxier renders with, beyond the cluster state. The
// zero value is kube-proxy's defaults for IPv4 without a local-traffic
// detector.
type Config struct {
	// Family is the proxier's IP family; empty means IPv4.
	Family v1.IPFamily
	// MasqueradeBit is the bit of the packet mark that asks for SNAT
	// (kube-proxy's --iptables-masquerade-bit, default 14).
	MasqueradeBit int
	// ClusterCIDR is the pod CIDR of kube-proxy's ClusterCIDR local-traffic
	// detector; empty means no detector, so no "off-cluster traffic"
	// masquerade rules.
	ClusterCIDR string
	// MasqueradeAll masquerades all traffic to ClusterIPs.
	MasqueradeAll bool
	// NodeIP is the node's address of this family: a loadBalancerSourceRange
	// that contains it lets the node reach its own LoadBalancer IPs.
	NodeIP net.IP
	// NoLocalhostNodePorts turns off kube-proxy's --iptables-localhost-nodeports
	// (on by default, IPv4 only): node ports then refuse 127.0.0.0/8 and the
	// KUBE-FIREWALL localnet guard is not written.
	NoLocalhostNodePorts bool
	// ConntrackTCPLiberal is net/netfilter/nf_conntrack_tcp_be_liberal set on
	// the node: kube-proxy then writes no INVALID-drop rule.
	ConntrackTCPLiberal bool
	// NoRandomFully is an iptables without MASQUERADE --random-fully
	// (before 1.6.2).
	NoRandomFully bool
	// SyncPeriod is kube-proxy's --iptables-sync-period: in large-cluster
	// mode, stale chains are cleaned up at most this often.
	SyncPeriod time.Duration
}

func (c Config) ipv6() bool { return c.Family == v1.IPv6Protocol }

// localhostNodePorts is whether node ports answer on 127.0.0.0/8: only for
// IPv4 (kube-proxy's NewDualStackProxier turns it off for IPv6, and
// NewProxier for any family whose node-port addresses miss loopback).
func (c Config) localhostNodePorts() bool { return !c.ipv6() && !c.NoLocalhostNodePorts }

// LargeClusterEndpoints is kube-proxy's largeClusterEndpointsThreshold:
// with more endpoints than this over all service ports, the proxier drops
// the comments of its per-service and per-endpoint rules and cleans up
// stale chains at most once per SyncPeriod.
const LargeClusterEndpoints = 1000

// FullSyncPeriod is kube-proxy's proxyutil.FullSyncPeriod: outside
// large-cluster mode, a sync more than this long after the last full one
// is full.
const FullSyncPeriod = time.Hour

// LargeCluster reports whether a sync state puts kube-proxy in
// large-cluster mode: endpoints of every service port, counted before
// selection, as kube-proxy counts them.
func LargeCluster(st *proxy.SyncState) bool {
	total := 0
	for n := range st.Services {
		total += len(st.Endpoints[n])
	}
	return total > LargeClusterEndpoints
}

// DefaultMasqueradeBit is kube-proxy's default.
const DefaultMasqueradeBit = 14

// mark is the masquerade mark as kube-proxy prints it (`%#08x`).
func (c Config) mark() string {
	bit := c.MasqueradeBit
	if bit == 0 {
		bit = DefaultMasqueradeBit
	}
	return fmt.Sprintf("%#08x", uint32(1)<<bit)
}

// lines is one of kube-proxy's line buffers: words joined by spaces, one
// line each, counted. A discarding one only counts, for the rules of
// services a partial sync leaves alone (their count still feeds the
// rules-total metric).
type lines struct {
	b       []byte
	n       int
	discard bool
}

func (l *lines) add(words ...string) {
	l.n++
	if l.discard {
		return
	}
	for i, w := range words {
		if i > 0 {
			l.b = append(l.b, ' ')
		}
		l.b = append(l.b, w...)
	}
	l.b = append(l.b, '\n')
}

// chain writes a chain line: it creates the chain, or flushes it.
func (l *lines) chain(name string) {
	l.n++
	if l.discard {
		return
	}
	l.b = append(l.b, ':')
	l.b = append(l.b, name...)
	l.b = append(l.b, " - [0:0]\n"...)
}

// rule writes "-A chain", the comment match unless comment is empty, then
// the rest of the words.
func (l *lines) rule(chain, comment string, words ...string) {
	l.n++
	if l.discard {
		return
	}
	l.b = append(l.b, "-A "...)
	l.b = append(l.b, chain...)
	if comment != "" {
		l.b = append(l.b, " -m comment --comment "...)
		l.b = append(l.b, comment...)
	}
	for _, w := range words {
		l.b = append(l.b, ' ')
		l.b = append(l.b, w...)
	}
	l.b = append(l.b, '\n')
}

// payload accumulates a restore the way kube-proxy's syncProxyRules does:
// chain lines and rules of each table apart, concatenated at the end.
type payload struct {
	filterChains, filterRules, natChains, natRules lines
	// skipChains and skipRules take the per-service nat chains of services
	// a partial sync does not rewrite.
	skipChains, skipRules lines
	// large drops the comments of SVC, SVL and SEP rules (kube-proxy's
	// appendServiceCommentLocked in large-cluster mode).
	large bool
	names *names
	// noLocalInternal and noLocalExternal count service ports whose Local
	// policy finds endpoints elsewhere but none on this node.
	noLocalInternal, noLocalExternal int
}

// comment is a per-service or per-endpoint rule's comment, none in
// large-cluster mode.
func (p *payload) comment(text string) string {
	if p.large {
		return ""
	}
	return text
}

func quote(s string) string { return `"` + s + `"` }

// plan is what one sync renders: all of it, or only the services that
// changed, and whether it looks for stale chains.
type plan struct {
	// full rewrites every service's chains; otherwise only those of changed.
	full    bool
	changed map[types.NamespacedName]bool
	// existingNAT lists the nat chains the dataplane has now, so that stale
	// service chains are flushed and deleted; nil skips the cleanup.
	existingNAT []string
	cleanup     bool
	large       bool
	// names is the proxier's cache; nil for a throwaway one.
	names *names
}

// rendered is a restore payload and the counts kube-proxy's metrics take
// from it.
type rendered struct {
	payload string
	// filterRules and natRules are the rule lines written (a chain
	// deletion counts as a nat rule line, as kube-proxy counts it);
	// skippedNATRules those of unchanged services left out of a partial
	// sync; deletedChains the stale chains deleted.
	filterRules, natRules, skippedNATRules, deletedChains int
	noLocalInternal, noLocalExternal                      int
	// filter and nat are the payload's sections as a sync's work counts
	// them (sim.RestoreSection), from the line buffers' own counts.
	filter, nat sim.RestoreSection
}

// Render returns the restore payload of a full sync. existingNAT lists the
// nat chains the dataplane has now, so that stale service chains are
// flushed and deleted, as kube-proxy does after an iptables-save of the nat
// table; nil skips the cleanup (large-cluster mode between cleanups).
func Render(cfg Config, st *proxy.SyncState, existingNAT []string) string {
	return render(cfg, st, plan{full: true, existingNAT: existingNAT, cleanup: existingNAT != nil, large: LargeCluster(st)}).payload
}

// render follows kube-proxy v1.36's syncProxyRules
// (pkg/proxy/iptables/proxier.go) line for line in what it writes and in
// which buffer. Where kube-proxy ranges over a Go map (service ports, and
// the merged reachable endpoints), this takes names in order so that the
// payload is deterministic; the restore's effect is the same.
func render(cfg Config, st *proxy.SyncState, pl plan) rendered {
	if pl.names == nil {
		pl.names = newNames()
	}
	pl.names.gen++
	pl.names.used, pl.names.activeUsed = 0, 0
	defer pl.names.sweep()
	p := &payload{large: pl.large, names: pl.names}
	// The line buffers of the last sync are reused, as kube-proxy's are.
	bufs := &pl.names.bufs
	p.filterChains.b, p.filterRules.b, p.natChains.b, p.natRules.b = bufs[0][:0], bufs[1][:0], bufs[2][:0], bufs[3][:0]
	defer func() {
		bufs[0], bufs[1], bufs[2], bufs[3] = p.filterChains.b, p.filterRules.b, p.natChains.b, p.natRules.b
	}()
	p.skipChains.discard, p.skipRules.discard = true, true
	mark := cfg.mark()
	for _, c := range []string{ChainServices, ChainExternalServices, ChainForward, ChainNodePorts, ChainProxyFirewall} {
		p.filterChains.chain(c)
	}
	for _, c := range []string{ChainServices, ChainNodePorts, ChainPostrouting, ChainMarkMasq} {
		p.natChains.chain(c)
	}
	p.natRules.add("-A", ChainPostrouting, "-m", "mark", "!", "--mark", mark+"/"+mark, "-j", "RETURN")
	p.natRules.add("-A", ChainPostrouting, "-j", "MARK", "--xor-mark", mark)
	if cfg.NoRandomFully {
		p.natRules.add("-A", ChainPostrouting, "-m", "comment", "--comment", quote("kubernetes service traffic requiring SNAT"), "-j", "MASQUERADE")
	} else {
		p.natRules.add("-A", ChainPostrouting, "-m", "comment", "--comment", quote("kubernetes service traffic requiring SNAT"), "-j", "MASQUERADE", "--random-fully")
	}
	p.natRules.add("-A", ChainMarkMasq, "-j", "MARK", "--or-mark", mark)
	if cfg.localhostNodePorts() {
		// The localnet guard that comes with route_localnet.
		p.filterChains.chain(ChainKubeletFirewall)
		p.filterRules.add("-A", ChainKubeletFirewall, "-m", "comment", "--comment", quote("block incoming localnet connections"),
			"-d", "127.0.0.0/8", "!", "-s", "127.0.0.0/8", "-m", "conntrack", "!", "--ctstate", "RELATED,ESTABLISHED,DNAT", "-j", "DROP")
	}

	for _, n := range st.Services.SortedNames() {
		renderServicePort(p, cfg, st, pl, n, st.Services[n])
	}

	deleted := 0
	if pl.cleanup {
		var stale []string
		for _, c := range pl.existingNAT {
			if isServiceChain(c) && !pl.names.kept(c) {
				stale = append(stale, c)
			}
		}
		sort.Strings(stale)
		for _, c := range stale {
			p.natChains.chain(c)
			p.natRules.add("-X", c)
			deleted++
		}
	}

	// Node-port addresses are "all" (kube-proxy's default): node ports
	// answer on every local address, loopback only where localhost node
	// ports are on.
	switch {
	case cfg.ipv6():
		p.natRules.add("-A", ChainServices, "-m", "comment", "--comment",
			quote("kubernetes service nodeports; NOTE: this must be the last rule in this chain"),
			"-m", "addrtype", "--dst-type", "LOCAL", "!", "-d", "::1/128", "-j", ChainNodePorts)
	case !cfg.localhostNodePorts():
		p.natRules.add("-A", ChainServices, "-m", "comment", "--comment",
			quote("kubernetes service nodeports; NOTE: this must be the last rule in this chain"),
			"-m", "addrtype", "--dst-type", "LOCAL", "!", "-d", "127.0.0.0/8", "-j", ChainNodePorts)
	default:
		p.natRules.add("-A", ChainServices, "-m", "comment", "--comment",
			quote("kubernetes service nodeports; NOTE: this must be the last rule in this chain"),
			"-m", "addrtype", "--dst-type", "LOCAL", "-j", ChainNodePorts)
	}
	// No nfacct counters in a simulation: kube-proxy adds -m nfacct to the
	// INVALID drop only when the kernel has them.
	if !cfg.ConntrackTCPLiberal {
		p.filterRules.add("-A", ChainForward, "-m", "conntrack", "--ctstate", "INVALID", "-j", "DROP")
	}
	p.filterRules.add("-A", ChainForward, "-m", "comment", "--comment", quote("kubernetes forwarding rules"), "-m", "mark", "--mark", mark+"/"+mark, "-j", "ACCEPT")
	p.filterRules.add("-A", ChainForward, "-m", "comment", "--comment", quote("kubernetes forwarding conntrack rule"), "-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-j", "ACCEPT")

	var b strings.Builder
	b.Grow(len(p.filterChains.b) + len(p.filterRules.b) + len(p.natChains.b) + len(p.natRules.b) + 32)
	b.WriteString("*filter\n")
	b.Write(p.filterChains.b)
	b.Write(p.filterRules.b)
	b.WriteString("COMMIT\n*nat\n")
	b.Write(p.natChains.b)
	b.Write(p.natRules.b)
	b.WriteString("COMMIT\n")
	return rendered{
		payload:         b.String(),
		filterRules:     p.filterRules.n,
		natRules:        p.natRules.n,
		skippedNATRules: p.skipRules.n,
		deletedChains:   deleted,
		noLocalInternal: p.noLocalInternal,
		noLocalExternal: p.noLocalExternal,
		// Each section adds its `*table` and COMMIT lines to its buffers.
		filter: sim.RestoreSection{
			Lines: 2 + p.filterChains.n + p.filterRules.n, Bytes: len("*filter\nCOMMIT\n") + len(p.filterChains.b) + len(p.filterRules.b),
			Chains: p.filterChains.n, Rules: p.filterRules.n,
		},
		nat: sim.RestoreSection{
			Lines: 2 + p.natChains.n + p.natRules.n, Bytes: len("*nat\nCOMMIT\n") + len(p.natChains.b) + len(p.natRules.b),
			Chains: p.natChains.n, Rules: p.natRules.n - deleted, DeletedChains: deleted,
		},
	}
}

// ChainKubeletFirewall is the kubelet-compatible localnet firewall chain.
const ChainKubeletFirewall = "KUBE-FIREWALL"

// renderServicePort writes one service port's rules, following the body
// of kube-proxy's service loop in syncProxyRules.
func renderServicePort(p *payload, cfg Config, st *proxy.SyncState, pl plan, n proxy.ServicePortName, sp *proxy.ServicePort) {
	proto := strings.ToLower(string(sp.Protocol))
	name := n.String()
	sel := proxy.SelectEndpoints(sp, st.Endpoints[n], st.NodeName, st.Zone)
	hasEndpoints := sel.HasAnyEndpoints

	pn := p.names.port(n)
	svc, svl, ext, fw := pn.svc, pn.svl, pn.ext, pn.fw
	usesCluster := len(sel.Cluster) > 0 && sp.UsesClusterEndpoints()
	usesLocal := len(sel.Local) > 0 && sp.UsesLocalEndpoints()

	internalChain, hasInternal := svc, hasEndpoints
	if sp.InternalPolicyLocal {
		internalChain = svl
		hasInternal = hasInternal && len(sel.Local) > 0
	}
	externalPolicy, hasExternal := svc, hasEndpoints
	if sp.ExternalPolicyLocal {
		externalPolicy = svl
		hasExternal = hasExternal && len(sel.Local) > 0
	}
	usesExt := hasEndpoints && sp.ExternallyAccessible()
	lbChain := ext
	usesFW := hasEndpoints && len(sp.LoadBalancerIPs) > 0 && len(sp.LoadBalancerSourceRanges) > 0
	if usesFW {
		lbChain = fw
	}

	var intTarget, intComment, extTarget, extComment string
	if !hasEndpoints {
		intTarget, extTarget = "REJECT", "REJECT"
		intComment = quote(name + " has no endpoints")
		extComment = intComment
	} else {
		if !hasInternal {
			intTarget, intComment = "DROP", quote(name+" has no local endpoints")
			p.noLocalInternal++
		}
		if !hasExternal {
			extTarget, extComment = "DROP", quote(name+" has no local endpoints")
			p.noLocalExternal++
		}
	}
	port := strconv.Itoa(int(sp.Port))
	clusterIP := sp.ClusterIP.String()

	if hasInternal {
		p.natRules.add("-A", ChainServices, "-m", "comment", "--comment", quote(name+" cluster IP"),
			"-m", proto, "-p", proto, "-d", clusterIP, "--dport", port, "-j", internalChain)
	} else {
		p.filterRules.add("-A", ChainServices, "-m", "comment", "--comment", intComment,
			"-m", proto, "-p", proto, "-d", clusterIP, "--dport", port, "-j", intTarget)
	}
	for _, ip := range sp.ExternalIPs {
		if hasEndpoints {
			p.natRules.add("-A", ChainServices, "-m", "comment", "--comment", quote(name+" external IP"),
				"-m", proto, "-p", proto, "-d", ip, "--dport", port, "-j", ext)
		}
		if !hasExternal {
			p.filterRules.add("-A", ChainExternalServices, "-m", "comment", "--comment", extComment,
				"-m", proto, "-p", proto, "-d", ip, "--dport", port, "-j", extTarget)
		}
	}
	for _, ip := range sp.LoadBalancerIPs {
		if hasEndpoints {
			p.natRules.add("-A", ChainServices, "-m", "comment", "--comment", quote(name+" loadbalancer IP"),
				"-m", proto, "-p", proto, "-d", ip, "--dport", port, "-j", lbChain)
		}
		if usesFW {
			p.filterRules.add("-A", ChainProxyFirewall, "-m", "comment", "--comment", quote(name+" traffic not accepted by "+fw),
				"-m", proto, "-p", proto, "-d", ip, "--dport", port, "-j", "DROP")
		}
	}
	if !hasExternal {
		for _, ip := range sp.LoadBalancerIPs {
			p.filterRules.add("-A", ChainExternalServices, "-m", "comment", "--comment", extComment,
				"-m", proto, "-p", proto, "-d", ip, "--dport", port, "-j", extTarget)
		}
	}
	if sp.NodePort != 0 {
		np := strconv.Itoa(int(sp.NodePort))
		if hasEndpoints {
			// No localhost nfacct counter in a simulation, so no extra
			// 127.0.0.0/8 rule (kube-proxy writes it only when the counter
			// exists).
			p.natRules.add("-A", ChainNodePorts, "-m", "comment", "--comment", name, "-m", proto, "-p", proto, "--dport", np, "-j", ext)
		}
		if !hasExternal {
			p.filterRules.add("-A", ChainExternalServices, "-m", "comment", "--comment", extComment,
				"-m", "addrtype", "--dst-type", "LOCAL", "-m", proto, "-p", proto, "--dport", np, "-j", extTarget)
		}
	}
	if sp.HealthCheckNodePort != 0 {
		p.filterRules.add("-A", ChainNodePorts, "-m", "comment", "--comment", quote(name+" health check node port"),
			"-m", "tcp", "-p", "tcp", "--dport", strconv.Itoa(int(sp.HealthCheckNodePort)), "-j", "ACCEPT")
	}

	// A partial sync leaves the chains of unchanged services as they are,
	// but still walks them: their chains stay active and their rules count.
	natChains, natRules := &p.natChains, &p.natRules
	if !pl.full && !pl.changed[n.NamespacedName] {
		natChains, natRules = &p.skipChains, &p.skipRules
	}

	if hasInternal {
		switch {
		case cfg.MasqueradeAll:
			natRules.rule(internalChain, quote(name+" cluster IP"), "-m", proto, "-p", proto, "-d", clusterIP, "--dport", port, "-j", ChainMarkMasq)
		case cfg.ClusterCIDR != "":
			natRules.rule(internalChain, quote(name+" cluster IP"), "-m", proto, "-p", proto, "-d", clusterIP, "--dport", port, "!", "-s", cfg.ClusterCIDR, "-j", ChainMarkMasq)
		}
	}
	if usesExt {
		natChains.chain(ext)
		p.names.keep(ext)
		if !sp.ExternalPolicyLocal {
			natRules.add("-A", ext, "-m", "comment", "--comment", quote("masquerade traffic for "+name+" external destinations"), "-j", ChainMarkMasq)
		} else {
			if cfg.ClusterCIDR != "" {
				natRules.add("-A", ext, "-m", "comment", "--comment", quote("pod traffic for "+name+" external destinations"), "-s", cfg.ClusterCIDR, "-j", svc)
			}
			natRules.add("-A", ext, "-m", "comment", "--comment", quote("masquerade LOCAL traffic for "+name+" external destinations"), "-m", "addrtype", "--src-type", "LOCAL", "-j", ChainMarkMasq)
			natRules.add("-A", ext, "-m", "comment", "--comment", quote("route LOCAL traffic for "+name+" external destinations"), "-m", "addrtype", "--src-type", "LOCAL", "-j", svc)
		}
		if hasExternal {
			natRules.add("-A", ext, "-j", externalPolicy)
		}
	}
	if usesFW {
		// loadBalancerSourceRanges: sources in a range go on to the EXT
		// chain; the rest fall off the end undNATed and meet the DROP in
		// filter KUBE-PROXY-FIREWALL. When a range holds the node's own
		// address, the node reaching the LB IP (source = the LB IP itself)
		// is let through too.
		natChains.chain(fw)
		p.names.keep(fw)
		lbComment := quote(name + " loadbalancer IP")
		fromNode := false
		for _, cidr := range sp.LoadBalancerSourceRanges {
			natRules.add("-A", fw, "-m", "comment", "--comment", lbComment, "-s", cidr, "-j", ext)
			if cfg.NodeIP != nil {
				if _, n, err := net.ParseCIDR(cidr); err == nil && n.Contains(cfg.NodeIP) {
					fromNode = true
				}
			}
		}
		if fromNode {
			for _, ip := range sp.LoadBalancerIPs {
				natRules.add("-A", fw, "-m", "comment", "--comment", lbComment, "-s", ip, "-j", ext)
			}
		}
		natRules.add("-A", fw, "-m", "comment", "--comment", quote("other traffic to "+name+" will be dropped by KUBE-PROXY-FIREWALL"))
	}
	if usesCluster {
		natChains.chain(svc)
		p.names.keep(svc)
		writeEndpointRules(p, natRules, pn, n, sp, svc, sel.Cluster)
	}
	if usesLocal {
		natChains.chain(svl)
		p.names.keep(svl)
		writeEndpointRules(p, natRules, pn, n, sp, svl, sel.Local)
	}
	// The endpoint chains: those of the cluster set, then the local ones
	// not already written (kube-proxy's allLocallyReachableEndpoints; the
	// same set, in a fixed order).
	reachable := sel.Cluster
	if !sp.UsesClusterEndpoints() {
		reachable = nil
	}
	if sp.UsesLocalEndpoints() && len(sel.Local) > 0 {
		if len(reachable) == 0 {
			reachable = sel.Local
		} else {
			seen := make(map[string]bool, len(reachable))
			for _, e := range reachable {
				seen[e.String()] = true
			}
			reachable = append([]*proxy.Endpoint(nil), reachable...)
			for _, e := range sel.Local {
				if !seen[e.String()] {
					reachable = append(reachable, e)
				}
			}
		}
	}
	comment := p.comment(name)
	for _, e := range reachable {
		en := p.names.endpoint(pn, n, e)
		natChains.chain(en.chain)
		p.names.keep(en.chain)
		natRules.rule(en.chain, comment, "-s", e.IP, "-j", ChainMarkMasq)
		if sp.SessionAffinityClientIP {
			natRules.rule(en.chain, comment, "-m", "recent", "--name", en.chain, "--set", "-m", proto, "-p", proto, "-j", "DNAT", "--to-destination", en.ep)
		} else {
			natRules.rule(en.chain, comment, "-m", proto, "-p", proto, "-j", "DNAT", "--to-destination", en.ep)
		}
	}
}

// writeEndpointRules fills a SVC or SVL chain: affinity checks first, then
// one rule per endpoint where endpoint i of n is taken with probability
// 1/(n-i) of what reaches it and the last one unconditionally, so each gets
// 1/n (kube-proxy's writeServiceToEndpointRules).
func writeEndpointRules(p *payload, out *lines, pn *portNames, n proxy.ServicePortName, sp *proxy.ServicePort, chain string, eps []*proxy.Endpoint) {
	if sp.SessionAffinityClientIP {
		timeout := sp.StickyMaxAgeSeconds
		if timeout == 0 {
			timeout = proxy.DefaultAffinityTimeout
		}
		secs := strconv.Itoa(int(timeout))
		for _, e := range eps {
			en := p.names.endpoint(pn, n, e)
			out.rule(chain, p.comment(en.arrow), "-m", "recent", "--name", en.chain, "--rcheck", "--seconds", secs, "--reap", "-j", en.chain)
		}
	}
	for i, e := range eps {
		en := p.names.endpoint(pn, n, e)
		if i < len(eps)-1 {
			out.rule(chain, p.comment(en.arrow), "-m", "statistic", "--mode", "random", "--probability", p.names.probability(len(eps)-i), "-j", en.chain)
		} else {
			out.rule(chain, p.comment(en.arrow), "-j", en.chain)
		}
	}
}

// names caches what kube-proxy caches in its service and endpoint infos:
// chain names (a SHA-256 each) and the texts built from them, kept across
// syncs; and the probability texts, as its precomputedProbabilities.
type names struct {
	gen  int
	used int // entries the render of gen used so far
	// active holds the per-service nat chains a render keeps, with the
	// render's gen; kept says those of this one.
	active     map[string]int
	activeUsed int
	ports      map[proxy.ServicePortName]*portNames
	seps       map[sepKey]*sepNames
	probs      []string
	bufs       [4][]byte
}

type portNames struct {
	gen                    int
	key, svc, svl, ext, fw string
}

// sepKey is an endpoint of a service port, both by pointer (cheaper to
// hash than their text): a port's names are one while they are cached,
// and an endpoint is never changed once converted (proxy.Endpoint), so
// the same pointer always has the same address and port.
type sepKey struct {
	port *portNames
	ep   *proxy.Endpoint
}

type sepNames struct {
	gen int
	// ep is "ip:port", chain its KUBE-SEP chain, arrow the comment of the
	// service chain's rules for it.
	ep, chain, arrow string
}

func newNames() *names {
	return &names{ports: map[proxy.ServicePortName]*portNames{}, seps: map[sepKey]*sepNames{}, active: map[string]int{}}
}

// keep notes that this render keeps a per-service nat chain.
func (c *names) keep(chain string) {
	if c.active[chain] != c.gen {
		c.active[chain] = c.gen
		c.activeUsed++
	}
}

// kept reports whether this render keeps the chain.
func (c *names) kept(chain string) bool { return c.active[chain] == c.gen }

func (c *names) port(n proxy.ServicePortName) *portNames {
	pn := c.ports[n]
	if pn == nil {
		h := hash16(portKey(n))
		pn = &portNames{key: portKey(n), svc: PrefixSVC + h, svl: PrefixSVL + h, ext: PrefixEXT + h, fw: PrefixFW + h}
		c.ports[n] = pn
	}
	if pn.gen != c.gen {
		pn.gen = c.gen
		c.used++
	}
	return pn
}

func (c *names) endpoint(pn *portNames, n proxy.ServicePortName, e *proxy.Endpoint) *sepNames {
	k := sepKey{pn, e}
	en := c.seps[k]
	if en == nil {
		ep := e.String()
		en = &sepNames{ep: ep, chain: PrefixSEP + hash16(pn.key+ep), arrow: quote(n.String() + " -> " + ep)}
		c.seps[k] = en
	}
	if en.gen != c.gen {
		en.gen = c.gen
		c.used++
	}
	return en
}

func (c *names) probability(n int) string {
	for len(c.probs) <= n {
		c.probs = append(c.probs, Probability(max(len(c.probs), 1)))
	}
	return c.probs[n]
}

// sweep forgets what the last render did not use, once the cache holds
// more than twice that.
func (c *names) sweep() {
	if len(c.active) > 2*c.activeUsed+64 {
		for k, g := range c.active {
			if g != c.gen {
				delete(c.active, k)
			}
		}
	}
	if len(c.ports)+len(c.seps) <= 2*c.used+64 {
		return
	}
	for k, pn := range c.ports {
		if pn.gen != c.gen {
			delete(c.ports, k)
		}
	}
	for k, en := range c.seps {
		if en.gen != c.gen {
			delete(c.seps, k)
		}
	}
}
