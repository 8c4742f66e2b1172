package nftables

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/knftables"

	"github.com/proxysim/proxysim/sim/proxy"
)

var (
	webName = types.NamespacedName{Namespace: "default", Name: "web"}
	web     = proxy.ServicePortName{NamespacedName: webName, Port: "http", Protocol: v1.ProtocolTCP}
	vip     = net.ParseIP("10.96.0.10")
	node    = net.ParseIP("192.168.0.2")
	pod     = net.ParseIP("10.244.9.9")
	outside = net.ParseIP("203.0.113.5")
)

// state is one service port web with n ready endpoints 10.244.0.1..n.
func state(n int, mutate func(*proxy.ServicePort)) *proxy.SyncState {
	sp := &proxy.ServicePort{ClusterIP: vip, Port: 80, Protocol: v1.ProtocolTCP}
	if mutate != nil {
		mutate(sp)
	}
	var eps []*proxy.Endpoint
	for i := 1; i <= n; i++ {
		eps = append(eps, &proxy.Endpoint{IP: fmt.Sprintf("10.244.%d.%d", i/256, i%256), Port: 8080, Ready: true, Serving: true})
	}
	return &proxy.SyncState{
		Services:  proxy.ServiceMap{web: sp},
		Endpoints: proxy.EndpointsMap{web: eps},
		NodeName:  "node-1",
		// Every sync of a test state says web changed, unless cleared.
		ServiceChanges: proxy.ServiceMapResult{Updated: []types.NamespacedName{webName}},
	}
}

var testConfig = Config{ClusterCIDR: "10.244.0.0/16", NodePortIPs: []net.IP{node}}

func newTest(t *testing.T) (*Proxier, *knftables.Fake, *clocktesting.FakeClock) {
	t.Helper()
	nft := knftables.NewFake(knftables.IPv4Family, Table)
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	return New(testConfig, nft, clk, nil), nft, clk
}

func mustSync(t *testing.T, p *Proxier, st *proxy.SyncState) {
	t.Helper()
	if err := p.Sync(st); err != nil {
		t.Fatal(err)
	}
}

func TestDumpOfOneService(t *testing.T) {
	p, nft, _ := newTest(t)
	mustSync(t, p, state(3, nil))
	t.Log(nft.Dump())
	t.Log(p.nft.(*knftables.Fake).LastTransaction.String())
	_ = strings.Contains
}
