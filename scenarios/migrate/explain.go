package migrate

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// Rule is why a connection's fate differs between two modes: one
// behaviour of kube-proxy's rules, in words, with where upstream does it.
type Rule struct {
	ID   string   `json:"id"`
	Text string   `json:"text"`
	Cite []string `json:"cite"`
}

// Upstream sources the rules cite (kubernetes v1.36).
const (
	citeNFTProxier   = "kubernetes pkg/proxy/nftables/proxier.go"
	citeIPTProxier   = "kubernetes pkg/proxy/iptables/proxier.go"
	citeIPVSProxier  = "kubernetes pkg/proxy/ipvs/proxier.go"
	citeKEP3866      = "KEP-3866 (nftables kube-proxy backend): kubernetes/enhancements keps/sig-network/3866-nftables-proxy"
	citeServerLinux  = "kubernetes cmd/kube-proxy/app/server_linux.go platformApplyDefaults"
	citeNodePortAddr = "kube-proxy configuration reference: nodePortAddresses (kubernetes.io/docs/reference/config-api/kube-proxy-config.v1alpha1)"
	citeVIPs         = "Virtual IPs and Service Proxies: kubernetes.io/docs/reference/networking/virtual-ips"
)

// modeSays is what one mode does for a difference's kind: its sentence and
// where upstream does it.
type modeSays struct {
	text string
	cite string
}

// explain names the rule behind a difference between before (mode from)
// and after (mode to) for probe p. primary is the primary address of the
// node p is addressed to, when the nftables side serves node ports on it
// alone ("" otherwise).
func explain(p probe, from, to string, before, after Outcome, primary string) Rule {
	spec := p.Service.Svc.Spec
	host := strings.Split(p.To, ":")[0]
	onlyMasq := before.Shares.Within(after.Shares, tolerance)
	switch {
	case p.Entry == EntryLoopback:
		says := map[string]modeSays{
			"nftables": {"the nftables mode never serves NodePorts on 127.0.0.1: its node-port rules carry `ip daddr != 127.0.0.0/8` and it does not set route_localnet", citeNFTProxier + " setupNFTables (noLocalhost)"},
			"iptables": {"the iptables mode serves NodePorts on 127.0.0.1 (--iptables-localhost-nodeports, default true): KUBE-NODEPORTS is reached for any LOCAL destination, route_localnet is set, and such connections are masqueraded", citeIPTProxier + " (localhostNodePorts)"},
			"ipvs":     {"the IPVS mode puts NodePort virtual servers on the node's addresses but not on loopback, and KUBE-SERVICES returns at once for `-s 127.0.0.0/8`", citeIPVSProxier + " (ipGetter.NodeIPs, writeIptablesRules)"},
		}
		return twoSided("localhost-nodeport", "A NodePort reached through localhost", from, to, says, citeKEP3866)
	case p.Entry == EntryNodePort && to == "nftables" && primary != "" && host != primary && before.answers() && !after.answers():
		return Rule{ID: "nodeport-addresses", Text: fmt.Sprintf("kube-proxy's nftables mode defaults --nodeport-addresses to `primary`: node ports answer on the node's primary IP (%s) only, no longer on %s. Give nodePortAddresses in the configuration (for example the node's CIDRs) to keep them.", primary, host),
			Cite: []string{citeServerLinux, citeKEP3866, citeNodePortAddr}}
	case p.Entry == EntryNodePort && from == "nftables" && primary != "" && host != primary && !before.answers() && after.answers():
		return Rule{ID: "nodeport-addresses", Text: fmt.Sprintf("the nftables mode served node ports on the node's primary IP (%s) only (--nodeport-addresses defaults to `primary` there); the %s mode serves them on every node address, %s too.", primary, to, host),
			Cite: []string{citeServerLinux, citeNodePortAddr}}
	case p.Entry == EntryLoadBalancer && len(spec.LoadBalancerSourceRanges) > 0:
		says := map[string]modeSays{
			"iptables": {"the iptables mode checks loadBalancerSourceRanges in a KUBE-FW-* chain on the LoadBalancer IP, in nat PREROUTING and OUTPUT: sources outside the ranges are marked for drop (KUBE-MARK-DROP)", citeIPTProxier + " (KUBE-FW chains)"},
			"nftables": {"the nftables mode checks loadBalancerSourceRanges in the firewall-ips map, from filter chains before DNAT (filter-prerouting-pre-dnat, filter-output-pre-dnat): sources outside the ranges are dropped", citeNFTProxier + " (firewall-check, firewall- chains)"},
			"ipvs":     {"the IPVS mode checks loadBalancerSourceRanges with ipsets (KUBE-LOAD-BALANCER-FW, KUBE-LOAD-BALANCER-SOURCE-CIDR and -SOURCE-IP) in nat KUBE-FIREWALL, marking the rest for drop", citeIPVSProxier + " (writeIptablesRules, KUBE-FIREWALL)"},
		}
		return twoSided("source-ranges", "loadBalancerSourceRanges", from, to, says, citeVIPs)
	case (p.Entry == EntryNodePort || p.Entry == EntryLoadBalancer || p.Entry == EntryExternalIP) && spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal:
		says := map[string]modeSays{
			"iptables": {"the iptables mode sends external traffic of an externalTrafficPolicy: Local Service to this node's endpoints only (KUBE-XLB / KUBE-EXT-*), keeping its source, but sends pods' traffic (the ClusterCIDR detector) and the node's own traffic to a LoadBalancer or external IP to every endpoint, masqueraded", citeIPTProxier + " (KUBE-EXT chains, short-circuit of local traffic)"},
			"nftables": {"the nftables mode sends external traffic of an externalTrafficPolicy: Local Service to this node's endpoints only (external- chain), keeping its source, but short-circuits pods' traffic and `fib saddr type local` traffic to every endpoint (service- chain)", citeNFTProxier + " (external- chains)"},
			"ipvs":     {"the IPVS mode gives an externalTrafficPolicy: Local Service's NodePort and LoadBalancer virtual servers this node's endpoints only (falling back to every endpoint when it has none), and lets KUBE-NODE-PORT-LOCAL-* and KUBE-LOAD-BALANCER-LOCAL skip the masquerade mark", citeIPVSProxier + " (syncEndpoint onlyNodeLocalEndpoints, KUBE-NODE-PORT-LOCAL-TCP)"},
		}
		return twoSided("external-traffic-policy-local", "externalTrafficPolicy: Local", from, to, says, citeVIPs)
	case p.Entry == EntryClusterIP && spec.InternalTrafficPolicy != nil && *spec.InternalTrafficPolicy == v1.ServiceInternalTrafficPolicyLocal:
		return Rule{ID: "internal-traffic-policy-local", Text: fmt.Sprintf("internalTrafficPolicy: Local: a ClusterIP connection goes to endpoints on the client's node only; the %s and %s modes treat a node without one differently (iptables and nftables drop; IPVS falls back to every endpoint).", from, to),
			Cite: []string{citeIPTProxier, citeNFTProxier, citeIPVSProxier + " (syncEndpoint)"}}
	case p.Client == ClientHairpin && onlyMasq:
		says := map[string]modeSays{
			"iptables": {"the iptables mode masquerades a pod reaching itself through its Service in each endpoint chain (KUBE-SEP-*: `-s <endpoint> -j KUBE-MARK-MASQ`)", citeIPTProxier + " (writeServiceToEndpointRules)"},
			"nftables": {"the nftables mode masquerades hairpin connections of local endpoints through the hairpin-connections set in nat-postrouting", citeNFTProxier + " (hairpin-connections)"},
			"ipvs":     {"the IPVS mode masquerades hairpin connections through the KUBE-LOOP-BACK ipset (endpoint,port,endpoint) in KUBE-POSTROUTING", citeIPVSProxier + " (KUBE-LOOP-BACK)"},
		}
		return twoSided("hairpin", "A pod reaching itself through its Service (hairpin)", from, to, says)
	case (from == "ipvs" || to == "ipvs") && (p.Client == ClientNode || p.Client == ClientOffCluster) && p.Entry != EntryNodePort:
		return Rule{ID: "ipvs-binds-vips", Text: "the IPVS mode binds every ClusterIP, external IP and LoadBalancer IP to the dummy device kube-ipvs0, so they are the node's own addresses: the node's connections and arriving ones meet IPVS at LOCAL_IN/LOCAL_OUT and the KUBE-CLUSTER-IP / KUBE-EXTERNAL-IP ipsets decide masquerade; the iptables and nftables modes DNAT them in nat PREROUTING/OUTPUT instead.",
			Cite: []string{citeIPVSProxier + " (kube-ipvs0, syncService)", citeVIPs}}
	case onlyMasq:
		says := map[string]modeSays{
			"iptables": {"the iptables mode masquerades ClusterIP traffic from outside the pod network (the ClusterCIDR detector, or all of it with masqueradeAll) and external traffic of Cluster-policy Services (KUBE-EXT-*: KUBE-MARK-MASQ)", citeIPTProxier + " (KUBE-SVC and KUBE-EXT chains)"},
			"nftables": {"the nftables mode marks for masquerade ClusterIP traffic from outside the pod network and external traffic of Cluster-policy Services (mark-for-masquerade)", citeNFTProxier + " (services, external- chains)"},
			"ipvs":     {"the IPVS mode marks for masquerade ClusterIP traffic whose source is outside the cluster CIDR (KUBE-CLUSTER-IP ipset) and all NodePort, LoadBalancer and external-IP traffic of Cluster-policy Services (KUBE-NODE-PORT-*, KUBE-LOAD-BALANCER, KUBE-EXTERNAL-IP)", citeIPVSProxier + " (writeIptablesRules)"},
		}
		return twoSided("masquerade", "Masquerade", from, to, says)
	case spec.SessionAffinity == v1.ServiceAffinityClientIP:
		says := map[string]modeSays{
			"iptables": {"the iptables mode keeps ClientIP affinity with `recent` lists per endpoint chain", citeIPTProxier + " (KUBE-SEP recent)"},
			"nftables": {"the nftables mode keeps ClientIP affinity with an affinity- set per endpoint", citeNFTProxier + " (affinity- sets)"},
			"ipvs":     {"the IPVS mode keeps ClientIP affinity with a persistent virtual server (persistence templates)", citeIPVSProxier + " (syncService: Flags persistent)"},
		}
		return twoSided("session-affinity", "sessionAffinity: ClientIP", from, to, says)
	}
	return Rule{ID: "rules-differ", Text: fmt.Sprintf("the %s and %s modes' rules send this connection differently; proxysim names no single rule for it: compare the two modes' rules for this Service (proxysim import shows them).", from, to),
		Cite: []string{proxierCite(from), proxierCite(to)}}
}

func proxierCite(mode string) string {
	switch mode {
	case "iptables":
		return citeIPTProxier
	case "nftables":
		return citeNFTProxier
	}
	return citeIPVSProxier
}

// twoSided is a rule told from both modes' sides.
func twoSided(id, title, from, to string, says map[string]modeSays, extra ...string) Rule {
	a, b := says[from], says[to]
	r := Rule{ID: id, Text: fmt.Sprintf("%s: before, %s; after, %s.", title, a.text, b.text)}
	r.Cite = append(r.Cite, a.cite, b.cite)
	r.Cite = append(r.Cite, extra...)
	return r
}
