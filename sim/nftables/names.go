package nftables

import (
	"crypto/sha256"
	"encoding/base32"
	"net"
	"strings"

	"sigs.k8s.io/knftables"

	"github.com/proxysim/proxysim/sim/proxy"
)

// Table is the table kube-proxy owns, one per family.
const Table = "kube-proxy"

// The fixed chains, sets and maps of kube-proxy v1.36's nftables proxier
// (pkg/proxy/nftables/proxier.go, its constants block).
const (
	ChainFilterPreroutingPreDNAT = "filter-prerouting-pre-dnat"
	ChainFilterOutputPreDNAT     = "filter-output-pre-dnat"
	ChainFilterInput             = "filter-input"
	ChainFilterForward           = "filter-forward"
	ChainFilterOutput            = "filter-output"
	ChainNATPrerouting           = "nat-prerouting"
	ChainNATOutput               = "nat-output"
	ChainNATPostrouting          = "nat-postrouting"

	ChainServices               = "services"
	ChainServiceEndpointsCheck  = "service-endpoints-check"
	ChainNodePortEndpointsCheck = "nodeport-endpoints-check"
	ChainReject                 = "reject-chain"
	ChainClusterIPsCheck        = "cluster-ips-check"
	ChainFirewallCheck          = "firewall-check"
	ChainMasquerading           = "masquerading"

	MapServiceIPs          = "service-ips"
	MapServiceNodePorts    = "service-nodeports"
	MapNoEndpointServices  = "no-endpoint-services"
	MapNoEndpointNodePorts = "no-endpoint-nodeports"
	MapFirewallIPs         = "firewall-ips"
	SetNodePortIPs         = "nodeport-ips"
	SetClusterIPs          = "cluster-ips"
	SetHairpinConnections  = "hairpin-connections"
)

// Prefixes of the per service-port and per endpoint objects.
const (
	PrefixService  = "service-"  // Cluster-policy endpoints
	PrefixLocal    = "local-"    // Local-policy endpoints
	PrefixExternal = "external-" // external entry point
	PrefixFirewall = "firewall-" // loadBalancerSourceRanges
	PrefixEndpoint = "endpoint-" // one endpoint (ClientIP affinity only)
	PrefixAffinity = "affinity-" // one endpoint's affinity set
)

// baseChain is one chain hooked into netfilter.
type baseChain struct {
	name     string
	typ      knftables.BaseChainType
	hook     knftables.BaseChainHook
	priority knftables.BaseChainPriority
}

// baseChains are kube-proxy's nftablesBaseChains: the two pre-DNAT filter
// chains sit 10 before dstnat so that they see the destination the client
// asked for.
var baseChains = []baseChain{
	{ChainFilterPreroutingPreDNAT, knftables.FilterType, knftables.PreroutingHook, knftables.DNATPriority + "-10"},
	{ChainFilterOutputPreDNAT, knftables.FilterType, knftables.OutputHook, knftables.DNATPriority + "-10"},
	{ChainFilterInput, knftables.FilterType, knftables.InputHook, knftables.FilterPriority},
	{ChainFilterForward, knftables.FilterType, knftables.ForwardHook, knftables.FilterPriority},
	{ChainFilterOutput, knftables.FilterType, knftables.OutputHook, knftables.FilterPriority},
	{ChainNATPrerouting, knftables.NATType, knftables.PreroutingHook, knftables.DNATPriority},
	{ChainNATOutput, knftables.NATType, knftables.OutputHook, knftables.DNATPriority},
	{ChainNATPostrouting, knftables.NATType, knftables.PostroutingHook, knftables.SNATPriority},
}

// jumpChain is a regular chain jumped to from a base chain.
type jumpChain struct{ to, from, match string }

// jumpChains are kube-proxy's nftablesJumpChains, in its order.
var jumpChains = []jumpChain{
	{ChainNodePortEndpointsCheck, ChainFilterInput, "ct state new"},
	{ChainServiceEndpointsCheck, ChainFilterInput, "ct state new"},
	{ChainServiceEndpointsCheck, ChainFilterForward, "ct state new"},
	{ChainServiceEndpointsCheck, ChainFilterOutput, "ct state new"},
	{ChainFirewallCheck, ChainFilterPreroutingPreDNAT, "ct state new"},
	{ChainFirewallCheck, ChainFilterOutputPreDNAT, "ct state new"},
	{ChainServices, ChainNATOutput, ""},
	{ChainServices, ChainNATPrerouting, ""},
	{ChainMasquerading, ChainNATPostrouting, ""},
	{ChainClusterIPsCheck, ChainFilterForward, "ct state new"},
	{ChainClusterIPsCheck, ChainFilterOutput, "ct state new"},
}

// nameMax is the longest per-service name part: knftables' 256-character
// limit less the longest prefix kube-proxy reserves (16).
const nameMax = knftables.NameLengthMax - 16

// hashName is kube-proxy's hashAndTruncate, reimplemented: the first 8
// characters of the standard base32 SHA-256 of s, a dash, then s, cut with
// "..." past nameMax.
func hashName(s string) string {
	sum := sha256.Sum256([]byte(s))
	out := base32.StdEncoding.EncodeToString(sum[:])[:8] + "-" + s
	if len(out) > nameMax {
		out = out[:nameMax-3] + "..."
	}
	return out
}

// portBase is a service port's name part, "ns/name/proto/port"
// (kube-proxy's servicePortChainNameBase).
func portBase(n proxy.ServicePortName) string {
	return hashName(n.Namespace + "/" + n.Name + "/" + strings.ToLower(string(n.Protocol)) + "/" + n.Port)
}

// endpointBase is an endpoint's name part, "ns/name/proto/port__IP/port",
// with an IPv6 address's colons turned into dots
// (servicePortEndpointChainNameBase).
func endpointBase(n proxy.ServicePortName, endpoint string) string {
	ip, port, _ := net.SplitHostPort(endpoint)
	ip = strings.ReplaceAll(ip, ":", ".")
	return hashName(n.Namespace + "/" + n.Name + "/" + strings.ToLower(string(n.Protocol)) + "/" + n.Port + "__" + ip + "/" + port)
}

// ServiceChain is a service port's chain with one of the Prefix* prefixes
// of a service port.
func ServiceChain(prefix string, n proxy.ServicePortName) string { return prefix + portBase(n) }

// EndpointChain is the endpoint- chain of one endpoint ("ip:port").
func EndpointChain(n proxy.ServicePortName, endpoint string) string {
	return PrefixEndpoint + endpointBase(n, endpoint)
}

// AffinitySet is the affinity- set of one endpoint.
func AffinitySet(n proxy.ServicePortName, endpoint string) string {
	return PrefixAffinity + endpointBase(n, endpoint)
}

// isServiceChain is kube-proxy's isServiceChainName: its per-service
// chains, and only those, have a "/" in their names.
func isServiceChain(name string) bool { return strings.Contains(name, "/") }
