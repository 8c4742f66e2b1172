package iptables

import (
	"crypto/sha256"
	"encoding/base32"
	"strconv"
	"strings"

	"github.com/proxysim/proxysim/sim/proxy"
)

// Chain name prefixes, as kube-proxy v1.36 uses them
// (pkg/proxy/iptables/proxier.go: servicePortPolicyClusterChain and
// friends).
const (
	PrefixSVC = "KUBE-SVC-" // a service port's Cluster-policy endpoints
	PrefixSVL = "KUBE-SVL-" // its Local-policy endpoints
	PrefixEXT = "KUBE-EXT-" // its external entry point
	PrefixFW  = "KUBE-FW-"  // its loadBalancerSourceRanges firewall
	PrefixSEP = "KUBE-SEP-" // one endpoint
)

// The fixed chains every full sync writes.
const (
	ChainServices         = "KUBE-SERVICES"
	ChainExternalServices = "KUBE-EXTERNAL-SERVICES"
	ChainForward          = "KUBE-FORWARD"
	ChainNodePorts        = "KUBE-NODEPORTS"
	ChainProxyFirewall    = "KUBE-PROXY-FIREWALL"
	ChainPostrouting      = "KUBE-POSTROUTING"
	ChainMarkMasq         = "KUBE-MARK-MASQ"
)

// hash16 is the first 16 characters of the standard base32 encoding of the
// SHA-256 of s: 16 keeps every per-service chain name under iptables'
// 28-character limit. This is kube-proxy's portProtoHash
// (pkg/proxy/iptables/proxier.go at v1.36), reimplemented.
func hash16(s string) string {
	sum := sha256.Sum256([]byte(s))
	return base32.StdEncoding.EncodeToString(sum[:])[:16]
}

// portKey is what kube-proxy hashes for a service port: its
// "ns/name:port" string followed by the lower-case protocol.
func portKey(n proxy.ServicePortName) string {
	return n.String() + strings.ToLower(string(n.Protocol))
}

// ServiceChain is a service port's chain with the given prefix (PrefixSVC,
// PrefixSVL, PrefixEXT, PrefixFW), as kube-proxy's servicePortPolicyClusterChain,
// servicePortPolicyLocalChainName, externalTrafficChainName and
// serviceFirewallChainName compute it.
func ServiceChain(prefix string, n proxy.ServicePortName) string {
	return prefix + hash16(portKey(n))
}

// EndpointChain is the KUBE-SEP chain of one endpoint ("ip:port") of a
// service port, as kube-proxy's servicePortEndpointChainName computes it.
func EndpointChain(n proxy.ServicePortName, endpoint string) string {
	return PrefixSEP + hash16(portKey(n)+endpoint)
}

// isServiceChain reports whether a nat chain is one kube-proxy owns per
// service or endpoint: the ones a full sync deletes when stale.
func isServiceChain(name string) bool {
	for _, p := range []string{PrefixSVC, PrefixSVL, PrefixEXT, PrefixFW, PrefixSEP} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// Probability is the text of the --probability of the first of n
// remaining endpoints: 1/n printed with ten decimals, as kube-proxy's
// computeProbability does (`%0.10f`). The last endpoint's rule has no
// statistic match at all.
func Probability(n int) string {
	return strconv.FormatFloat(1/float64(n), 'f', 10, 64)
}
