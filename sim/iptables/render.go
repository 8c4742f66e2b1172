package iptables

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/proxysim/proxysim/sim/proxy"
)

// Config is what the proxier renders with, beyond the cluster state.
type Config struct {
	// MasqueradeBit is the bit of the packet mark that asks for SNAT
	// (kube-proxy's --iptables-masquerade-bit, default 14).
	MasqueradeBit int
	// ClusterCIDR is the pod CIDR of kube-proxy's ClusterCIDR local-traffic
	// detector; empty means no detector, so no "off-cluster traffic"
	// masquerade rules.
	ClusterCIDR string
	// MasqueradeAll masquerades all traffic to ClusterIPs.
	MasqueradeAll bool
	// SyncPeriod is kube-proxy's --iptables-sync-period: in large-cluster
	// mode, stale chains are cleaned up at most this often.
	SyncPeriod time.Duration
}

// LargeClusterEndpoints is kube-proxy's largeClusterEndpointsThreshold:
// with more endpoints than this over all service ports, the proxier drops
// the comments of its per-service and per-endpoint rules and cleans up
// stale chains at most once per SyncPeriod.
const LargeClusterEndpoints = 1000

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

// payload accumulates restore lines the way kube-proxy's line buffers do:
// chain declarations and rules of each table apart, concatenated at the end.
type payload struct {
	filterChains, filterRules, natChains, natRules []string
	// large drops the comments of SVC, SVL and SEP rules (kube-proxy's
	// appendServiceCommentLocked in large-cluster mode).
	large bool
}

// comment appends a service comment to words unless in large-cluster mode.
func (p *payload) comment(words []string, text string) []string {
	if p.large {
		return words
	}
	return append(words, "-m", "comment", "--comment", text)
}

// line joins words with spaces: the caller quotes a comment with spaces.
func line(words ...string) string { return strings.Join(words, " ") }

func chainDecl(name string) string { return ":" + name + " - [0:0]" }

func quote(s string) string { return `"` + s + `"` }

// Render returns the restore payload of a full sync. existingNAT lists the
// nat chains the dataplane has now, so that stale service chains are
// flushed and deleted, as kube-proxy does after an iptables-save of the nat
// table; nil skips the cleanup (large-cluster mode between cleanups).
//
// The order of lines follows kube-proxy v1.36's syncProxyRules
// (pkg/proxy/iptables/proxier.go); where kube-proxy iterates a Go map
// (service ports), services are taken in name order so that the payload is
// deterministic.
func Render(cfg Config, st *proxy.SyncState, existingNAT []string) string {
	return render(cfg, st, existingNAT, LargeCluster(st))
}

// render is Render for a sync that knows already whether the cluster is
// large (counting endpoints walks every service).
func render(cfg Config, st *proxy.SyncState, existingNAT []string, large bool) string {
	p := &payload{large: large}
	mark := cfg.mark()
	for _, c := range []string{ChainServices, ChainExternalServices, ChainForward, ChainNodePorts, ChainProxyFirewall} {
		p.filterChains = append(p.filterChains, chainDecl(c))
	}
	for _, c := range []string{ChainServices, ChainNodePorts, ChainPostrouting, ChainMarkMasq} {
		p.natChains = append(p.natChains, chainDecl(c))
	}
	p.natRules = append(p.natRules,
		line("-A", ChainPostrouting, "-m", "mark", "!", "--mark", mark+"/"+mark, "-j", "RETURN"),
		line("-A", ChainPostrouting, "-j", "MARK", "--xor-mark", mark),
		// Every iptables this models (>= 1.6.2) has --random-fully.
		line("-A", ChainPostrouting, "-m", "comment", "--comment", quote("kubernetes service traffic requiring SNAT"), "-j", "MASQUERADE", "--random-fully"),
		line("-A", ChainMarkMasq, "-j", "MARK", "--or-mark", mark),
	)
	// localhost node ports are on (kube-proxy's default) for IPv4: the
	// kubelet-compatible localnet firewall comes with them.
	p.filterChains = append(p.filterChains, chainDecl(ChainKubeletFirewall))
	p.filterRules = append(p.filterRules,
		line("-A", ChainKubeletFirewall, "-m", "comment", "--comment", quote("block incoming localnet connections"),
			"-d", "127.0.0.0/8", "!", "-s", "127.0.0.0/8", "-m", "conntrack", "!", "--ctstate", "RELATED,ESTABLISHED,DNAT", "-j", "DROP"))

	active := map[string]bool{}
	names := make([]proxy.ServicePortName, 0, len(st.Services))
	for n := range st.Services {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return lessPort(names[i], names[j]) })
	for _, n := range names {
		renderServicePort(p, cfg, st, n, st.Services[n], active)
	}

	var stale []string
	for _, c := range existingNAT {
		if isServiceChain(c) && !active[c] {
			stale = append(stale, c)
		}
	}
	sort.Strings(stale)
	for _, c := range stale {
		p.natChains = append(p.natChains, chainDecl(c))
		p.natRules = append(p.natRules, line("-X", c))
	}

	// node-port addresses are "all" (kube-proxy's default) and localhost
	// node ports are on, so no "! -d 127.0.0.0/8".
	p.natRules = append(p.natRules, line("-A", ChainServices, "-m", "comment", "--comment",
		quote("kubernetes service nodeports; NOTE: this must be the last rule in this chain"),
		"-m", "addrtype", "--dst-type", "LOCAL", "-j", ChainNodePorts))
	// nf_conntrack_tcp_be_liberal is off and there are no nfacct counters
	// in a simulation (kube-proxy adds -m nfacct only when the kernel has
	// them).
	p.filterRules = append(p.filterRules,
		line("-A", ChainForward, "-m", "conntrack", "--ctstate", "INVALID", "-j", "DROP"),
		line("-A", ChainForward, "-m", "comment", "--comment", quote("kubernetes forwarding rules"), "-m", "mark", "--mark", mark+"/"+mark, "-j", "ACCEPT"),
		line("-A", ChainForward, "-m", "comment", "--comment", quote("kubernetes forwarding conntrack rule"), "-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-j", "ACCEPT"),
	)

	var b strings.Builder
	lines := func(ls []string) {
		for _, l := range ls {
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	b.WriteString("*filter\n")
	lines(p.filterChains)
	lines(p.filterRules)
	b.WriteString("COMMIT\n*nat\n")
	lines(p.natChains)
	lines(p.natRules)
	b.WriteString("COMMIT\n")
	return b.String()
}

// ChainKubeletFirewall is the kubelet-compatible localnet firewall chain.
const ChainKubeletFirewall = "KUBE-FIREWALL"

func lessPort(a, b proxy.ServicePortName) bool {
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	if a.Name != b.Name {
		return a.Name < b.Name
	}
	if a.Port != b.Port {
		return a.Port < b.Port
	}
	return a.Protocol < b.Protocol
}

// renderServicePort writes one service port's rules, following
// kube-proxy's syncProxyRules loop body.
func renderServicePort(p *payload, cfg Config, st *proxy.SyncState, n proxy.ServicePortName, sp *proxy.ServicePort, active map[string]bool) {
	proto := strings.ToLower(string(sp.Protocol))
	name := n.String()
	sel := proxy.SelectEndpoints(sp, st.Endpoints[n], st.NodeName, st.Zone)
	hasEndpoints := sel.HasAnyEndpoints

	svc := ServiceChain(PrefixSVC, n)
	svl := ServiceChain(PrefixSVL, n)
	ext := ServiceChain(PrefixEXT, n)
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

	var intTarget, intComment, extTarget, extComment string
	if !hasEndpoints {
		intTarget, extTarget = "REJECT", "REJECT"
		intComment = quote(name + " has no endpoints")
		extComment = intComment
	} else {
		if !hasInternal {
			intTarget, intComment = "DROP", quote(name+" has no local endpoints")
		}
		if !hasExternal {
			extTarget, extComment = "DROP", quote(name+" has no local endpoints")
		}
	}
	port := strconv.Itoa(int(sp.Port))
	match := func(dst, dport string) []string {
		return []string{"-m", proto, "-p", proto, "-d", dst, "--dport", dport}
	}
	clusterIP := sp.ClusterIP.String()

	if hasInternal {
		p.natRules = append(p.natRules, line(append(append([]string{"-A", ChainServices, "-m", "comment", "--comment", quote(name + " cluster IP")}, match(clusterIP, port)...), "-j", internalChain)...))
	} else {
		p.filterRules = append(p.filterRules, line(append(append([]string{"-A", ChainServices, "-m", "comment", "--comment", intComment}, match(clusterIP, port)...), "-j", intTarget)...))
	}
	for _, ip := range sp.ExternalIPs {
		if hasEndpoints {
			p.natRules = append(p.natRules, line(append(append([]string{"-A", ChainServices, "-m", "comment", "--comment", quote(name + " external IP")}, match(ip, port)...), "-j", ext)...))
		}
		if !hasExternal {
			p.filterRules = append(p.filterRules, line(append(append([]string{"-A", ChainExternalServices, "-m", "comment", "--comment", extComment}, match(ip, port)...), "-j", extTarget)...))
		}
	}
	for _, ip := range sp.LoadBalancerIPs {
		if hasEndpoints {
			p.natRules = append(p.natRules, line(append(append([]string{"-A", ChainServices, "-m", "comment", "--comment", quote(name + " loadbalancer IP")}, match(ip, port)...), "-j", ext)...))
		}
	}
	if !hasExternal {
		for _, ip := range sp.LoadBalancerIPs {
			p.filterRules = append(p.filterRules, line(append(append([]string{"-A", ChainExternalServices, "-m", "comment", "--comment", extComment}, match(ip, port)...), "-j", extTarget)...))
		}
	}
	if sp.NodePort != 0 {
		np := strconv.Itoa(int(sp.NodePort))
		if hasEndpoints {
			// No localhost nfacct counter in a simulation, so no extra
			// 127.0.0.0/8 rule (kube-proxy writes it only when the counter
			// exists).
			p.natRules = append(p.natRules, line("-A", ChainNodePorts, "-m", "comment", "--comment", name, "-m", proto, "-p", proto, "--dport", np, "-j", ext))
		}
		if !hasExternal {
			p.filterRules = append(p.filterRules, line("-A", ChainExternalServices, "-m", "comment", "--comment", extComment,
				"-m", "addrtype", "--dst-type", "LOCAL", "-m", proto, "-p", proto, "--dport", np, "-j", extTarget))
		}
	}
	if sp.HealthCheckNodePort != 0 {
		p.filterRules = append(p.filterRules, line("-A", ChainNodePorts, "-m", "comment", "--comment", quote(name+" health check node port"),
			"-m", "tcp", "-p", "tcp", "--dport", strconv.Itoa(int(sp.HealthCheckNodePort)), "-j", "ACCEPT"))
	}

	if hasInternal {
		args := append([]string{"-A", internalChain, "-m", "comment", "--comment", quote(name + " cluster IP")}, match(clusterIP, port)...)
		switch {
		case cfg.MasqueradeAll:
			p.natRules = append(p.natRules, line(append(args, "-j", ChainMarkMasq)...))
		case cfg.ClusterCIDR != "":
			p.natRules = append(p.natRules, line(append(args, "!", "-s", cfg.ClusterCIDR, "-j", ChainMarkMasq)...))
		}
	}
	if usesExt {
		p.natChains = append(p.natChains, chainDecl(ext))
		active[ext] = true
		if !sp.ExternalPolicyLocal {
			p.natRules = append(p.natRules, line("-A", ext, "-m", "comment", "--comment", quote("masquerade traffic for "+name+" external destinations"), "-j", ChainMarkMasq))
		} else {
			if cfg.ClusterCIDR != "" {
				p.natRules = append(p.natRules, line("-A", ext, "-m", "comment", "--comment", quote("pod traffic for "+name+" external destinations"), "-s", cfg.ClusterCIDR, "-j", svc))
			}
			p.natRules = append(p.natRules,
				line("-A", ext, "-m", "comment", "--comment", quote("masquerade LOCAL traffic for "+name+" external destinations"), "-m", "addrtype", "--src-type", "LOCAL", "-j", ChainMarkMasq),
				line("-A", ext, "-m", "comment", "--comment", quote("route LOCAL traffic for "+name+" external destinations"), "-m", "addrtype", "--src-type", "LOCAL", "-j", svc))
		}
		if hasExternal {
			p.natRules = append(p.natRules, line("-A", ext, "-j", externalPolicy))
		}
	}
	if usesCluster {
		p.natChains = append(p.natChains, chainDecl(svc))
		active[svc] = true
		writeEndpointRules(p, n, sp, svc, sel.Cluster)
	}
	if usesLocal {
		p.natChains = append(p.natChains, chainDecl(svl))
		active[svl] = true
		writeEndpointRules(p, n, sp, svl, sel.Local)
	}
	// The endpoint chains: those of the cluster set, then the local ones
	// not already written (kube-proxy's allLocallyReachableEndpoints).
	seen := map[string]bool{}
	var reachable []*proxy.Endpoint
	if usesCluster {
		reachable = append(reachable, sel.Cluster...)
	}
	if usesLocal {
		reachable = append(reachable, sel.Local...)
	}
	for _, e := range reachable {
		ep := e.String()
		if seen[ep] {
			continue
		}
		seen[ep] = true
		sep := EndpointChain(n, ep)
		p.natChains = append(p.natChains, chainDecl(sep))
		active[sep] = true
		args := p.comment([]string{"-A", sep}, name)
		p.natRules = append(p.natRules, line(append(args, "-s", e.IP, "-j", ChainMarkMasq)...))
		if sp.SessionAffinityClientIP {
			args = append(args, "-m", "recent", "--name", sep, "--set")
		}
		p.natRules = append(p.natRules, line(append(args, "-m", proto, "-p", proto, "-j", "DNAT", "--to-destination", ep)...))
	}
}

// writeEndpointRules fills a SVC or SVL chain: affinity checks first, then
// one rule per endpoint where endpoint i of n is taken with probability
// 1/(n-i) of what reaches it and the last one unconditionally, so each gets
// 1/n (kube-proxy's writeServiceToEndpointRules).
func writeEndpointRules(p *payload, n proxy.ServicePortName, sp *proxy.ServicePort, chain string, eps []*proxy.Endpoint) {
	name := n.String()
	if sp.SessionAffinityClientIP {
		secs := sp.StickyMaxAgeSeconds
		if secs == 0 {
			secs = proxy.DefaultAffinityTimeout
		}
		for _, e := range eps {
			sep := EndpointChain(n, e.String())
			args := p.comment([]string{"-A", chain}, quote(name+" -> "+e.String()))
			p.natRules = append(p.natRules, line(append(args, "-m", "recent", "--name", sep, "--rcheck", "--seconds", strconv.Itoa(int(secs)), "--reap", "-j", sep)...))
		}
	}
	for i, e := range eps {
		args := p.comment([]string{"-A", chain}, quote(name+" -> "+e.String()))
		if i < len(eps)-1 {
			args = append(args, "-m", "statistic", "--mode", "random", "--probability", Probability(len(eps)-i))
		}
		p.natRules = append(p.natRules, line(append(args, "-j", EndpointChain(n, e.String()))...))
	}
}
