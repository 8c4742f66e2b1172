package nftables

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/proxysim/proxysim/sim/proxy"
)

// Names as kube-proxy v1.36 computes them, checked against values printed
// by its own proxier (FACTS §3.3).
func TestNamesAreKubeProxys(t *testing.T) {
	n := proxy.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "ns1", Name: "svc1"}, Port: "p80", Protocol: v1.ProtocolTCP}
	if got := ServiceChain(PrefixService, n); got != "service-ULMVA6XW-ns1/svc1/tcp/p80" {
		t.Errorf("service chain %q", got)
	}
	if got := EndpointChain(n, "10.180.0.1:80"); got != "endpoint-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80" {
		t.Errorf("endpoint chain %q", got)
	}
	if got := AffinitySet(n, "[fd00::1]:80"); got[len(got)-len("__fd00..1/80"):] != "__fd00..1/80" {
		t.Errorf("IPv6 affinity set %q: colons must become dots", got)
	}
	if !isServiceChain("local-ULMVA6XW-ns1/svc1/tcp/p80") || isServiceChain(ChainServices) {
		t.Error("service chains are those with a slash")
	}
	long := make([]byte, 300)
	for i := range long {
		long[i] = 'a'
	}
	if got := hashName(string(long)); len(got) != nameMax || got[len(got)-3:] != "..." {
		t.Errorf("long name not cut to %d with ...: %d %q", nameMax, len(got), got[len(got)-5:])
	}
}
