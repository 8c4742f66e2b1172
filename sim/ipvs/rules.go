package ipvs

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/proxysim/proxysim/sim"
	"github.com/proxysim/proxysim/sim/proxy"
)

// The ipsets kube-proxy's IPVS proxier keeps (pkg/proxy/ipvs/ipset.go, the
// kube*Set constants), by their IPv4 names; an IPv6 proxier's names start
// KUBE-6- instead of KUBE- (NewIPSet).
const (
	SetLoopBack               = "KUBE-LOOP-BACK"
	SetClusterIP              = "KUBE-CLUSTER-IP"
	SetExternalIP             = "KUBE-EXTERNAL-IP"
	SetExternalIPLocal        = "KUBE-EXTERNAL-IP-LOCAL"
	SetLoadBalancer           = "KUBE-LOAD-BALANCER"
	SetLoadBalancerLocal      = "KUBE-LOAD-BALANCER-LOCAL"
	SetLoadBalancerFW         = "KUBE-LOAD-BALANCER-FW"
	SetLoadBalancerSourceIP   = "KUBE-LOAD-BALANCER-SOURCE-IP"
	SetLoadBalancerSourceCIDR = "KUBE-LOAD-BALANCER-SOURCE-CIDR"
	SetNodePortTCP            = "KUBE-NODE-PORT-TCP"
	SetNodePortLocalTCP       = "KUBE-NODE-PORT-LOCAL-TCP"
	SetNodePortUDP            = "KUBE-NODE-PORT-UDP"
	SetNodePortLocalUDP       = "KUBE-NODE-PORT-LOCAL-UDP"
	SetNodePortSCTP           = "KUBE-NODE-PORT-SCTP-HASH"
	SetNodePortLocalSCTP      = "KUBE-NODE-PORT-LOCAL-SCTP-HASH"
	SetHealthCheckNodePort    = "KUBE-HEALTH-CHECK-NODE-PORT"
	SetIPVSIPs                = "KUBE-IPVS-IPS"
)

// The chains it writes (pkg/proxy/ipvs/proxier.go, iptablesChains).
const (
	ChainServices       = "KUBE-SERVICES"
	ChainPostrouting    = "KUBE-POSTROUTING"
	ChainNodePort       = "KUBE-NODE-PORT"
	ChainLoadBalancer   = "KUBE-LOAD-BALANCER"
	ChainMarkMasq       = "KUBE-MARK-MASQ"
	ChainForward        = "KUBE-FORWARD"
	ChainProxyFirewall  = "KUBE-PROXY-FIREWALL"
	ChainSourceRangesFW = "KUBE-SOURCE-RANGES-FIREWALL"
	ChainIPVSFilter     = "KUBE-IPVS-FILTER"
	ChainIPVSOutFilter  = "KUBE-IPVS-OUT-FILTER"
)

// DefaultMasqueradeBit is kube-proxy's --iptables-masquerade-bit default.
const DefaultMasqueradeBit = 14

// ipsetInfo is every set, its type and comment, in kube-proxy's order
// (proxier.go ipsetInfo).
var ipsetInfo = []struct {
	name    string
	typ     IPSetType
	comment string
}{
	{SetLoopBack, HashIPPortIP, "Kubernetes endpoints dst ip:port, source ip for solving hairpin purpose"},
	{SetClusterIP, HashIPPort, "Kubernetes service cluster ip + port for masquerade purpose"},
	{SetExternalIP, HashIPPort, "Kubernetes service external ip + port for masquerade and filter purpose"},
	{SetExternalIPLocal, HashIPPort, "Kubernetes service external ip + port with externalTrafficPolicy=local"},
	{SetLoadBalancer, HashIPPort, "Kubernetes service lb portal"},
	{SetLoadBalancerFW, HashIPPort, "Kubernetes service load balancer ip + port for load balancer with sourceRange"},
	{SetLoadBalancerLocal, HashIPPort, "Kubernetes service load balancer ip + port with externalTrafficPolicy=local"},
	{SetLoadBalancerSourceIP, HashIPPortIP, "Kubernetes service load balancer ip + port + source IP for packet filter purpose"},
	{SetLoadBalancerSourceCIDR, HashIPPortNet, "Kubernetes service load balancer ip + port + source cidr for packet filter purpose"},
	{SetNodePortTCP, BitmapPort, "Kubernetes nodeport TCP port for masquerade purpose"},
	{SetNodePortLocalTCP, BitmapPort, "Kubernetes nodeport TCP port with externalTrafficPolicy=local"},
	{SetNodePortUDP, BitmapPort, "Kubernetes nodeport UDP port for masquerade purpose"},
	{SetNodePortLocalUDP, BitmapPort, "Kubernetes nodeport UDP port with externalTrafficPolicy=local"},
	{SetNodePortSCTP, HashIPPort, "Kubernetes nodeport SCTP port for masquerade purpose with type 'hash ip:port'"},
	{SetNodePortLocalSCTP, HashIPPort, "Kubernetes nodeport SCTP port with externalTrafficPolicy=local with type 'hash ip:port'"},
	{SetHealthCheckNodePort, BitmapPort, "Kubernetes health check node port"},
	{SetIPVSIPs, HashIP, "Addresses on the ipvs interface"},
}

// setJumps are the rules that match one set and jump, written only when
// the set has members, in kube-proxy's order (proxier.go
// ipsetWithIptablesChain): a Local set's RETURN comes before its
// masquerading twin.
var setJumps = []struct {
	set, table, from, to, flags, proto string
}{
	{SetLoopBack, "nat", ChainPostrouting, "MASQUERADE", "dst,dst,src", ""},
	{SetLoadBalancer, "nat", ChainServices, ChainLoadBalancer, "dst,dst", ""},
	{SetLoadBalancerLocal, "nat", ChainLoadBalancer, "RETURN", "dst,dst", ""},
	{SetNodePortLocalTCP, "nat", ChainNodePort, "RETURN", "dst", "tcp"},
	{SetNodePortTCP, "nat", ChainNodePort, ChainMarkMasq, "dst", "tcp"},
	{SetNodePortLocalUDP, "nat", ChainNodePort, "RETURN", "dst", "udp"},
	{SetNodePortUDP, "nat", ChainNodePort, ChainMarkMasq, "dst", "udp"},
	{SetNodePortLocalSCTP, "nat", ChainNodePort, "RETURN", "dst,dst", "sctp"},
	{SetNodePortSCTP, "nat", ChainNodePort, ChainMarkMasq, "dst,dst", "sctp"},
	{SetLoadBalancerFW, "filter", ChainProxyFirewall, ChainSourceRangesFW, "dst,dst", ""},
	{SetLoadBalancerSourceCIDR, "filter", ChainSourceRangesFW, "RETURN", "dst,dst,src", ""},
	{SetLoadBalancerSourceIP, "filter", ChainSourceRangesFW, "RETURN", "dst,dst,src", ""},
}

// kubeChains are the chains every sync writes, by table, in kube-proxy's
// order (iptablesChains).
var kubeChains = []struct{ table, chain string }{
	{"nat", ChainServices}, {"nat", ChainPostrouting}, {"nat", ChainNodePort}, {"nat", ChainLoadBalancer}, {"nat", ChainMarkMasq},
	{"filter", ChainForward}, {"filter", ChainNodePort}, {"filter", ChainProxyFirewall}, {"filter", ChainSourceRangesFW},
	{"filter", ChainIPVSFilter}, {"filter", ChainIPVSOutFilter},
}

// kubeJumps are the jumps from the built-in chains, each ensured at the
// head of its chain on every sync (iptablesJumpChain, EnsureRule with
// Prepend): the last of a chain's ends up first.
var kubeJumps = []struct{ table, from, to, comment string }{
	{"nat", "OUTPUT", ChainServices, "kubernetes service portals"},
	{"nat", "PREROUTING", ChainServices, "kubernetes service portals"},
	{"nat", "POSTROUTING", ChainPostrouting, "kubernetes postrouting rules"},
	{"filter", "FORWARD", ChainForward, "kubernetes forwarding rules"},
	{"filter", "INPUT", ChainNodePort, "kubernetes health check rules"},
	{"filter", "INPUT", ChainProxyFirewall, "kube-proxy firewall rules"},
	{"filter", "FORWARD", ChainProxyFirewall, "kube-proxy firewall rules"},
	{"filter", "INPUT", ChainIPVSFilter, "kubernetes ipvs access filter"},
	{"filter", "OUTPUT", ChainIPVSOutFilter, "kubernetes ipvs access filter"},
}

// IPSetName is a set's name for a family: KUBE-6-... for IPv6, cut to
// ipset's 31 characters (NewIPSet).
func IPSetName(name string, family v1.IPFamily) string {
	if family != v1.IPv6Protocol {
		return name
	}
	name = strings.Replace(name, "KUBE-", "KUBE-6-", 1)
	if len(name) > 31 {
		name = name[:31]
	}
	return name
}

// IPSets are every set the proxier keeps, for its family.
func IPSets(family v1.IPFamily) []IPSet {
	fam := "inet"
	if family == v1.IPv6Protocol {
		fam = "inet6"
	}
	out := make([]IPSet, 0, len(ipsetInfo))
	for _, s := range ipsetInfo {
		out = append(out, IPSet{Name: IPSetName(s.name, family), Type: s.typ, Family: fam, Comment: s.comment})
	}
	return out
}

// ruleSets is what one sync wants in the sets, by the sets' IPv4 names,
// and the load-balancer entry points the node itself may not reach.
type ruleSets struct {
	entries      map[string]map[string]bool
	noNodeAccess []IPSetEntry // IP, Protocol, Port
}

func (r ruleSets) add(set string, typ IPSetType, e IPSetEntry) {
	if r.entries[set] == nil {
		r.entries[set] = map[string]bool{}
	}
	r.entries[set][e.String(typ)] = true
}

// desiredSets computes the members of every set from the state, as
// kube-proxy's syncProxyRules does service port by service port: local
// endpoints for hairpin masquerade, cluster IPs, external IPs (Local
// policy apart), load-balancer IPs with their Local and firewall sets,
// node ports by protocol, health check node ports, and the addresses
// bound to kube-ipvs0.
func (p *Proxier) desiredSets(s *proxy.SyncState) ruleSets {
	out := ruleSets{entries: map[string]map[string]bool{}}
	nodeIP := p.primaryNodeIP()
	bound := map[string]bool{}
	// Members go to sets, so the service ports' order does not matter;
	// the rules of noNodeAccess are sorted below.
	for n, sp := range s.Services {
		proto := strings.ToLower(string(sp.Protocol))
		for _, e := range s.Endpoints[n] {
			if e.IsLocal && e.IP != "" && e.Port != 0 {
				out.add(SetLoopBack, HashIPPortIP, IPSetEntry{IP: e.IP, Protocol: proto, Port: int(e.Port), IP2: e.IP})
			}
		}
		port := int(sp.Port)
		cip := p.clusterIPText(sp.ClusterIP)
		out.add(SetClusterIP, HashIPPort, IPSetEntry{IP: cip, Protocol: proto, Port: port})
		bound[cip] = true
		for _, ip := range sp.ExternalIPs {
			set := SetExternalIP
			if sp.ExternalPolicyLocal {
				set = SetExternalIPLocal
			}
			out.add(set, HashIPPort, IPSetEntry{IP: ip, Protocol: proto, Port: port})
			if !p.isNodeIP(ip) {
				bound[ip] = true
			}
		}
		for _, ip := range sp.LoadBalancerIPs {
			e := IPSetEntry{IP: ip, Protocol: proto, Port: port}
			out.add(SetLoadBalancer, HashIPPort, e)
			if sp.ExternalPolicyLocal {
				out.add(SetLoadBalancerLocal, HashIPPort, e)
			}
			if len(sp.LoadBalancerSourceRanges) > 0 {
				out.add(SetLoadBalancerFW, HashIPPort, e)
				fromNode := false
				for _, cidr := range sp.LoadBalancerSourceRanges {
					out.add(SetLoadBalancerSourceCIDR, HashIPPortNet, IPSetEntry{IP: ip, Protocol: proto, Port: port, Net: cidr})
					if _, n, err := net.ParseCIDR(cidr); err == nil && nodeIP != nil && n.Contains(nodeIP) {
						fromNode = true
					}
				}
				// A range holding the node's IP lets the node reach the
				// LB IP (whose packets leave with the LB IP as source);
				// otherwise an OUTPUT rule drops them.
				if fromNode {
					out.add(SetLoadBalancerSourceIP, HashIPPortIP, IPSetEntry{IP: ip, Protocol: proto, Port: port, IP2: ip})
				} else {
					out.noNodeAccess = append(out.noNodeAccess, e)
				}
			}
			if !p.isNodeIP(ip) {
				bound[ip] = true
			}
		}
		if sp.NodePort != 0 && len(p.cfg.NodeIPs) > 0 {
			np := int(sp.NodePort)
			set, local := SetNodePortTCP, SetNodePortLocalTCP
			switch proto {
			case "udp":
				set, local = SetNodePortUDP, SetNodePortLocalUDP
			case "sctp":
				set, local = SetNodePortSCTP, SetNodePortLocalSCTP
			}
			var es []IPSetEntry
			typ := BitmapPort
			if proto == "sctp" {
				typ = HashIPPort
				for _, ip := range p.cfg.NodeIPs {
					es = append(es, IPSetEntry{IP: ip, Protocol: proto, Port: np})
				}
			} else {
				es = []IPSetEntry{{Protocol: proto, Port: np}}
			}
			for _, e := range es {
				out.add(set, typ, e)
				if sp.ExternalPolicyLocal {
					out.add(local, typ, e)
				}
			}
		}
		if sp.HealthCheckNodePort != 0 {
			out.add(SetHealthCheckNodePort, BitmapPort, IPSetEntry{Protocol: "tcp", Port: int(sp.HealthCheckNodePort)})
		}
	}
	for a := range bound {
		out.add(SetIPVSIPs, HashIP, IPSetEntry{IP: a})
	}
	slices.SortFunc(out.noNodeAccess, func(a, b IPSetEntry) int {
		return strings.Compare(a.String(HashIPPort), b.String(HashIPPort))
	})
	out.noNodeAccess = slices.CompactFunc(out.noNodeAccess, func(a, b IPSetEntry) bool { return a == b })
	return out
}

// primaryNodeIP is kube-proxy's node IP: the first of Config.NodeIPs of
// the proxier's family (IPv4 when it has none).
func (p *Proxier) primaryNodeIP() net.IP {
	for _, s := range p.cfg.NodeIPs {
		ip := net.ParseIP(s)
		if ip != nil && (ip.To4() != nil) == (p.cfg.Family != v1.IPv6Protocol) {
			return ip
		}
	}
	return nil
}

func (p *Proxier) mark() string {
	bit := p.cfg.MasqueradeBit
	if bit == 0 {
		bit = DefaultMasqueradeBit
	}
	return fmt.Sprintf("%#08x", uint32(1)<<bit)
}

// renderRules is the iptables-restore --noflush payload of one sync
// (proxier.go createAndLinkKubeChain's chain lines, then
// writeIptablesRules): nat chains and rules, then filter chains and
// rules. Only the sets' emptiness and the load-balancer entry points the
// node may not reach depend on the services; the members live in the
// sets.
func (p *Proxier) renderRules(rs ruleSets) string {
	var nat, filter []string
	name := func(set string) string { return IPSetName(set, p.cfg.Family) }
	has := func(set string) bool { return len(rs.entries[set]) > 0 }
	comment := func(set string) string {
		for _, s := range ipsetInfo {
			if s.name == set {
				return `"` + s.comment + `"`
			}
		}
		return ""
	}
	natRule := func(w ...string) { nat = append(nat, strings.Join(w, " ")) }
	filterRule := func(w ...string) { filter = append(filter, strings.Join(w, " ")) }
	lo := "127.0.0.0/8"
	if p.cfg.Family == v1.IPv6Protocol {
		lo = "::1/128"
	}
	natRule("-A", ChainServices, "-s", lo, "-j", "RETURN")
	for _, j := range setJumps {
		if !has(j.set) {
			continue
		}
		w := []string{"-A", j.from}
		if j.proto != "" {
			w = append(w, "-p", j.proto)
		}
		w = append(w, "-m", "comment", "--comment", comment(j.set), "-m", "set", "--match-set", name(j.set), j.flags, "-j", j.to)
		if j.table == "filter" {
			filterRule(w...)
		} else {
			natRule(w...)
		}
	}
	if has(SetClusterIP) {
		w := []string{"-A", ChainServices, "-m", "comment", "--comment", comment(SetClusterIP), "-m", "set", "--match-set", name(SetClusterIP)}
		switch {
		case p.cfg.MasqueradeAll:
			natRule(append(w, "dst,dst", "-j", ChainMarkMasq)...)
		case p.cfg.ClusterCIDR != "":
			natRule(append(w, "dst,dst", "!", "-s", p.cfg.ClusterCIDR, "-j", ChainMarkMasq)...)
		default:
			// Without a local-traffic detector, only the node's own
			// connections, which leave from a VIP, are masqueraded.
			natRule(append(w, "src,dst", "-j", ChainMarkMasq)...)
		}
	}
	externalAccept := func(w []string) {
		natRule(append(slices.Clone(w), "-m", "physdev", "!", "--physdev-is-in", "-m", "addrtype", "!", "--src-type", "LOCAL", "-j", "ACCEPT")...)
		natRule(append(slices.Clone(w), "-m", "addrtype", "--dst-type", "LOCAL", "-j", "ACCEPT")...)
	}
	if has(SetExternalIP) {
		w := []string{"-A", ChainServices, "-m", "comment", "--comment", comment(SetExternalIP), "-m", "set", "--match-set", name(SetExternalIP), "dst,dst"}
		natRule(append(slices.Clone(w), "-j", ChainMarkMasq)...)
		externalAccept(w)
	}
	if has(SetExternalIPLocal) {
		externalAccept([]string{"-A", ChainServices, "-m", "comment", "--comment", comment(SetExternalIPLocal), "-m", "set", "--match-set", name(SetExternalIPLocal), "dst,dst"})
	}
	natRule("-A", ChainServices, "-m", "addrtype", "--dst-type", "LOCAL", "-j", ChainNodePort)
	natRule("-A", ChainLoadBalancer, "-j", ChainMarkMasq)
	filterRule("-A", ChainSourceRangesFW, "-j", "DROP")
	for _, e := range rs.noNodeAccess {
		filterRule("-A", ChainIPVSOutFilter, "-s", e.IP, "-m", "ipvs", "--vaddr", e.IP, "--vproto", e.Protocol, "--vport", strconv.Itoa(e.Port), "-j", "DROP")
	}
	for _, set := range []string{SetClusterIP, SetLoadBalancer} { // acceptIPVSTraffic
		if has(set) {
			natRule("-A", ChainServices, "-m", "set", "--match-set", name(set), "dst,dst", "-j", "ACCEPT")
		}
	}
	m := p.mark()
	filterRule("-A", ChainForward, "-m", "comment", "--comment", `"kubernetes forwarding rules"`, "-m", "mark", "--mark", m+"/"+m, "-j", "ACCEPT")
	filterRule("-A", ChainForward, "-m", "comment", "--comment", `"kubernetes forwarding conntrack rule"`, "-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-j", "ACCEPT")
	filterRule("-A", ChainNodePort, "-m", "comment", "--comment", comment(SetHealthCheckNodePort), "-m", "set", "--match-set", name(SetHealthCheckNodePort), "dst", "-j", "ACCEPT")
	// Connections to a VIP on a port no service has are refused
	// (kubernetes#72236).
	for _, set := range []string{SetLoadBalancer, SetClusterIP, SetExternalIP, SetExternalIPLocal} {
		filterRule("-A", ChainIPVSFilter, "-m", "set", "--match-set", name(set), "dst,dst", "-j", "RETURN")
	}
	filterRule("-A", ChainIPVSFilter, "-m", "set", "--match-set", name(SetHealthCheckNodePort), "dst", "-j", "RETURN")
	filterRule("-A", ChainIPVSFilter, "-m", "conntrack", "--ctstate", "NEW", "-m", "set", "--match-set", name(SetIPVSIPs), "dst", "-j", "REJECT")
	natRule("-A", ChainPostrouting, "-m", "mark", "!", "--mark", m+"/"+m, "-j", "RETURN")
	natRule("-A", ChainPostrouting, "-j", "MARK", "--xor-mark", m)
	masq := []string{"-A", ChainPostrouting, "-m", "comment", "--comment", `"kubernetes service traffic requiring SNAT"`, "-j", "MASQUERADE"}
	if !p.cfg.NoRandomFully {
		masq = append(masq, "--random-fully")
	}
	natRule(masq...)
	natRule("-A", ChainMarkMasq, "-j", "MARK", "--or-mark", m)

	var b strings.Builder
	for _, table := range []string{"nat", "filter"} {
		b.WriteString("*" + table + "\n")
		for _, c := range kubeChains {
			if c.table == table {
				b.WriteString(":" + c.chain + " - [0:0]\n")
			}
		}
		rules := nat
		if table == "filter" {
			rules = filter
		}
		for _, r := range rules {
			b.WriteString(r + "\n")
		}
		b.WriteString("COMMIT\n")
	}
	return b.String()
}

// syncRules brings the ipsets and iptables rules in line with the state,
// as every kube-proxy IPVS sync does after programming IPVS: ensure the
// chains and jumps, create the sets, add and delete members, restore the
// rules. It does nothing on a dataplane without ipsets and iptables.
// Failures are recorded through do; a failed chain or set creation ends
// the sync's rule work there, as in kube-proxy.
func (p *Proxier) syncRules(s *proxy.SyncState, do func(string, string, error)) {
	if p.dp.IPSets == nil || p.dp.IPTables == nil {
		return
	}
	sw, tw := &sim.IPSetWork{}, &sim.IPTablesWork{}
	if p.cur != nil {
		p.cur.IPSets, p.cur.IPTables = sw, tw
	}
	for _, c := range kubeChains {
		tw.EnsureChains++
		if err := p.dp.IPTables.EnsureChain(c.table, c.chain); err != nil {
			do("ensure-chain", c.table+" "+c.chain, err)
			return
		}
	}
	for _, j := range kubeJumps {
		rule := "-m comment --comment " + `"` + j.comment + `"` + " -j " + j.to
		tw.EnsureRules++
		if err := p.dp.IPTables.EnsureRule(j.table, j.from, rule); err != nil {
			do("ensure-rule", j.table+" "+j.from+" "+rule, err)
		}
	}
	want := p.desiredSets(s)
	for _, set := range IPSets(p.cfg.Family) {
		if err := p.dp.IPSets.CreateSet(set); err != nil {
			do("ipset-create", set.Name, err)
			return
		}
	}
	for _, info := range ipsetInfo {
		set := IPSetName(info.name, p.cfg.Family)
		have, err := p.dp.IPSets.ListEntries(set)
		sw.Listings++
		sw.EntriesListed += len(have)
		if err != nil {
			do("ipset-list", set, err)
			continue
		}
		wanted := want.entries[info.name]
		slices.Sort(have)
		for _, e := range have {
			if !wanted[e] {
				sw.EntriesDeleted++
				do("ipset-del", set+" "+e, p.dp.IPSets.DelEntry(set, e))
			}
		}
		in := map[string]bool{}
		for _, e := range have {
			in[e] = true
		}
		add := make([]string, 0)
		for e := range wanted {
			if !in[e] {
				add = append(add, e)
			}
		}
		slices.Sort(add)
		for _, e := range add {
			sw.EntriesAdded++
			do("ipset-add", set+" "+e, p.dp.IPSets.AddEntry(set, e))
		}
	}
	payload := p.renderRules(want)
	tw.Restores = 1
	tw.NAT, tw.Filter = restoreSection(payload, "nat"), restoreSection(payload, "filter")
	do("iptables-restore", fmt.Sprintf("%d lines", strings.Count(payload, "\n")), p.dp.IPTables.Restore(payload))
}

// restoreSection counts one table's section of a restore payload.
func restoreSection(payload, table string) sim.RestoreSection {
	var rs sim.RestoreSection
	in := false
	for _, l := range strings.SplitAfter(payload, "\n") {
		switch {
		case l == "":
			continue
		case strings.HasPrefix(l, "*"):
			in = strings.TrimSpace(l) == "*"+table
		}
		if !in {
			continue
		}
		rs.Lines++
		rs.Bytes += len(l)
		switch {
		case strings.HasPrefix(l, ":"):
			rs.Chains++
		case strings.HasPrefix(l, "-A "):
			rs.Rules++
		case strings.HasPrefix(l, "-X "):
			rs.DeletedChains++
		case strings.TrimSpace(l) == "COMMIT":
			in = false
		}
	}
	return rs
}
