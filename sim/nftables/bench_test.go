package nftables

import (
	"fmt"
	"net"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/knftables"

	"github.com/proxysim/proxysim/sim/proxy"
)

// bigState is n services of 10 endpoints each, every one marked changed.
func bigState(n int) *proxy.SyncState {
	st := &proxy.SyncState{Services: proxy.ServiceMap{}, Endpoints: proxy.EndpointsMap{}, NodeName: "node-1"}
	for i := range n {
		nn := types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("svc%d", i)}
		spn := proxy.ServicePortName{NamespacedName: nn, Port: "p", Protocol: v1.ProtocolTCP}
		st.Services[spn] = &proxy.ServicePort{ClusterIP: net.IPv4(10, 96, byte(i/250), byte(1+i%250)), Port: 80, Protocol: v1.ProtocolTCP}
		for e := range 10 {
			st.Endpoints[spn] = append(st.Endpoints[spn], &proxy.Endpoint{IP: fmt.Sprintf("10.%d.%d.%d", 100+i/250, i%250, e+1), Port: 8080, Ready: true, Serving: true})
		}
		st.ServiceChanges.Updated = append(st.ServiceChanges.Updated, nn)
	}
	return st
}

// A full sync of 1,000 services × 10 endpoints into a knftables.Fake.
func BenchmarkFullSync(b *testing.B) {
	st := bigState(1000)
	b.ReportAllocs()
	for b.Loop() {
		nft := knftables.NewFake(knftables.IPv4Family, Table)
		p := New(testConfig, nft, clocktesting.NewFakeClock(time.Unix(0, 0)), nil)
		if err := p.Sync(st); err != nil {
			b.Fatal(err)
		}
	}
}

// A partial sync after one service's endpoints changed, same world.
func BenchmarkPartialSyncOneService(b *testing.B) {
	st := bigState(1000)
	nft := knftables.NewFake(knftables.IPv4Family, Table)
	p := New(testConfig, nft, clocktesting.NewFakeClock(time.Unix(0, 0)), nil)
	if err := p.Sync(st); err != nil {
		b.Fatal(err)
	}
	one := types.NamespacedName{Namespace: "ns", Name: "svc7"}
	spn := proxy.ServicePortName{NamespacedName: one, Port: "p", Protocol: v1.ProtocolTCP}
	st.ServiceChanges.Updated = []types.NamespacedName{one}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		st.Endpoints[spn][0].Ready = i%2 == 0
		if err := p.Sync(st); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFullSync's sync into an IndexedFake: the same table, without
// the Fake's linear element lookup.
func BenchmarkFullSyncIndexedFake(b *testing.B) {
	st := bigState(1000)
	b.ReportAllocs()
	for b.Loop() {
		nft := NewIndexedFake(knftables.IPv4Family, Table)
		p := New(testConfig, WithFaults(nft), clocktesting.NewFakeClock(time.Unix(0, 0)), nil)
		if err := p.Sync(st); err != nil {
			b.Fatal(err)
		}
	}
}
