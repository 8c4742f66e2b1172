package iptables_test

import (
	"fmt"
	"net"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/proxysim/proxysim/fakes"
	"github.com/proxysim/proxysim/sim/iptables"
	"github.com/proxysim/proxysim/sim/proxy"
)

// The Tracer, which meets only the rules its index offers a packet, routes
// every packet as RouteMasquerade does over every rule: services of every
// kind (ClusterIP, NodePort, external and LoadBalancer IPs, source ranges,
// Local policies, affinity, none or some endpoints, TCP and UDP, ports
// shared), from pods, the node, loopback and off the cluster, to every
// address and port in play and some that are not.
func TestTracerRoutesAsEveryRule(t *testing.T) {
	st := &proxy.SyncState{Services: proxy.ServiceMap{}, Endpoints: proxy.EndpointsMap{}, NodeName: "node-1"}
	var dsts []net.IP
	ports := map[int]bool{81: true, 30999: true}
	for i := range 40 {
		spn := proxy.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("svc%d", i)}, Port: "p", Protocol: v1.ProtocolTCP}
		sp := &proxy.ServicePort{ClusterIP: net.IPv4(10, 96, 0, byte(10+i)), Port: int32(80 + i%3), Protocol: v1.ProtocolTCP}
		if i%7 == 3 {
			sp.Protocol, spn.Protocol = v1.ProtocolUDP, v1.ProtocolUDP
		}
		if i%4 == 1 {
			sp.NodePort = int32(30000 + i)
		}
		if i%5 == 2 {
			sp.ExternalIPs = []string{fmt.Sprintf("198.51.100.%d", i)}
		}
		if i%6 == 0 {
			sp.NodePort = int32(30000 + i)
			sp.LoadBalancerIPs = []string{fmt.Sprintf("203.0.113.%d", i)}
			if i%12 == 0 {
				sp.LoadBalancerSourceRanges = []string{"192.0.2.0/24"}
			}
		}
		sp.ExternalPolicyLocal = i%8 == 1
		sp.InternalPolicyLocal = i%9 == 4
		sp.SessionAffinityClientIP, sp.StickyMaxAgeSeconds = i%10 == 5, 10800
		st.Services[spn] = sp
		var eps []*proxy.Endpoint
		for e := range i % 4 {
			eps = append(eps, &proxy.Endpoint{IP: fmt.Sprintf("10.244.%d.%d", i, e+1), Port: 8080, Ready: true, Serving: true, IsLocal: e == 1})
		}
		st.Endpoints[spn] = eps
		st.ServiceChanges.Updated = append(st.ServiceChanges.Updated, spn.NamespacedName)
		dsts = append(dsts, sp.ClusterIP)
		ports[int(sp.Port)], ports[int(sp.NodePort)] = true, true
		for _, a := range append(append([]string(nil), sp.ExternalIPs...), sp.LoadBalancerIPs...) {
			dsts = append(dsts, net.ParseIP(a))
		}
	}
	delete(ports, 0)
	dp := fakes.NewIPTables()
	if err := iptables.New(iptables.Config{ClusterCIDR: "10.244.0.0/16"}, dp, epoch(), nil).Sync(st); err != nil {
		t.Fatal(err)
	}
	rs := dp.Ruleset()
	local := []net.IP{node}
	tr := iptables.NewTracer(rs, local)
	dsts = append(dsts, node, net.ParseIP("127.0.0.1"), net.ParseIP("10.96.0.200"))
	srcs := []net.IP{pod, node, net.ParseIP("127.0.0.1"), client, net.ParseIP("192.0.2.7")}
	n, dnat := 0, 0
	for _, src := range srcs {
		for _, dst := range dsts {
			for port := range ports {
				for _, proto := range []string{"tcp", "udp"} {
					pkt := iptables.Packet{Src: src, Dst: dst, DPort: port, Protocol: proto}
					w1, m1, err1 := iptables.RouteMasquerade(rs, local, pkt)
					w2, m2, err2 := tr.RouteMasquerade(pkt)
					if fmt.Sprint(err1) != fmt.Sprint(err2) || w1.String() != w2.String() || m1.String() != m2.String() {
						t.Fatalf("%v: every rule %v %v %v, the Tracer %v %v %v", pkt, w1, m1, err1, w2, m2, err2)
					}
					n++
					if len(w1) > 0 && w1[iptables.VerdictAccept] == nil && w1[iptables.VerdictDrop] == nil && w1[iptables.VerdictReject] == nil {
						dnat++
					}
				}
			}
		}
	}
	if dnat < 250 {
		t.Fatalf("of %d packets only %d reached endpoints", n, dnat)
	}
}
