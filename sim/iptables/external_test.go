package iptables_test

import (
	"net"
	"strings"
	"testing"

	"github.com/proxysim/proxysim/fakes"
	"github.com/proxysim/proxysim/sim/iptables"
	"github.com/proxysim/proxysim/sim/proxy"
)

var client = net.ParseIP("203.0.113.5") // off the cluster

func routeTo(t *testing.T, dp *fakes.IPTables, from, dst net.IP, port int) string {
	t.Helper()
	sh, err := iptables.Route(dp.Ruleset(), []net.IP{node}, iptables.Packet{Src: from, Dst: dst, DPort: port, Protocol: "tcp"})
	if err != nil {
		t.Fatal(err)
	}
	return sh.String()
}

// External entry points (NodePort on any local address, external IPs,
// LoadBalancer IPs) go through the EXT chain to the same endpoints.
func TestExternalEntryPointsReachTheEndpoints(t *testing.T) {
	ext := func(sp *proxy.ServicePort) {
		sp.NodePort = 30080
		sp.ExternalIPs = []string{"198.51.100.7"}
		sp.LoadBalancerIPs = []string{"198.51.100.8"}
	}
	dp := synced(t, state(2, ext))
	want := "{10.244.0.1:8080: 1/2, 10.244.0.2:8080: 1/2}"
	for _, c := range []struct {
		dst  net.IP
		port int
	}{{node, 30080}, {net.ParseIP("198.51.100.7"), 80}, {net.ParseIP("198.51.100.8"), 80}, {vip, 80}} {
		if got := routeTo(t, dp, client, c.dst, c.port); got != want {
			t.Errorf("%s:%d: %s, want %s", c.dst, c.port, got, want)
		}
	}
	if !strings.Contains(dp.SaveAll(), "masquerade traffic for default/web:http external destinations") {
		t.Errorf("no EXT masquerade rule:\n%s", dp.SaveAll())
	}
}

// externalTrafficPolicy Local: with no endpoint on this node, outside
// clients are dropped at the node port, pods still reach every endpoint
// (kube-proxy's short-circuit for pod traffic); with a local endpoint,
// outside clients reach only it.
func TestExternalPolicyLocal(t *testing.T) {
	local := func(sp *proxy.ServicePort) { sp.NodePort = 30080; sp.ExternalPolicyLocal = true }
	dp := synced(t, state(2, local))
	if got := routeTo(t, dp, client, node, 30080); got != "{DROP: 1}" {
		t.Errorf("no local endpoint, outside client: %s", got)
	}
	if got := routeTo(t, dp, pod, node, 30080); got != "{10.244.0.1:8080: 1/2, 10.244.0.2:8080: 1/2}" {
		t.Errorf("no local endpoint, pod: %s", got)
	}
	st := state(2, local)
	st.Endpoints[web][1].IsLocal = true
	dp = synced(t, st)
	if got := routeTo(t, dp, client, node, 30080); got != "{10.244.0.2:8080: 1}" {
		t.Errorf("one local endpoint, outside client: %s", got)
	}
}
