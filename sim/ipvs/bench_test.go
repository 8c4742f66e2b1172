package ipvs_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/proxysim/proxysim/fakes"
	"github.com/proxysim/proxysim/sim/ipvs"
	"github.com/proxysim/proxysim/sim/proxy"
	"github.com/proxysim/proxysim/sim/vclock"
)

// benchProxier builds a proxier over n services with perService endpoints
// each, programmed once, with the handlers fed directly (no informers): the
// benchmarks measure the sync itself.
func benchProxier(b *testing.B, n, perService int, full time.Duration) (*proxy.Proxier, *vclock.Clock) {
	return benchProxierPath(b, n, perService, full, false)
}

// benchProxierPath is benchProxier, with the ipsets and iptables rules
// written too when packetPath is set.
func benchProxierPath(b *testing.B, n, perService int, full time.Duration, packetPath bool) (*proxy.Proxier, *vclock.Clock) {
	b.Helper()
	clk := vclock.New(vclock.Epoch)
	dp, _, _, _ := fakes.Dataplane("6.1.0", clk)
	if packetPath {
		dp.IPSets, dp.IPTables = fakes.NewIPSets(), fakes.NewIPTables()
	}
	backend, err := ipvs.New(ipvs.Config{FullSyncPeriod: full}, dp, clk, nil)
	if err != nil {
		b.Fatal(err)
	}
	p := proxy.NewProxier("IPv4", "node-a", "", backend, proxy.EndpointSliceTrackerOptions{})
	svcs, slices := fakes.Cluster(n, perService)
	for i := range svcs {
		p.OnServiceAdd(svcs[i])
		if err := p.OnEndpointSliceAdd(slices[i]); err != nil {
			b.Fatal(err)
		}
	}
	if err := p.OnServicesSynced(); err != nil {
		b.Fatal(err)
	}
	if err := p.OnEndpointSlicesSynced(); err != nil {
		b.Fatal(err)
	}
	return p, clk
}

// BenchmarkFullSync reconciles 10,000 services x 10 endpoints with the
// kernel, as kube-proxy's IPVS proxier does on every sync.
func BenchmarkFullSync(b *testing.B) {
	p, clk := benchProxier(b, 10000, 10, time.Nanosecond)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		clk.Advance(time.Second) // past FullSyncPeriod: every sync is full
		if err := p.SyncProxyRules(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSyncOneChangedService is a sync after one service's endpoints
// changed, in the same 10,000 x 10 world.
func BenchmarkSyncOneChangedService(b *testing.B) {
	p, _ := benchProxier(b, 10000, 10, 0)
	_, slices := fakes.Cluster(10000, 10)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s := slices[i%len(slices)].DeepCopy()
		s.Endpoints = s.Endpoints[:len(s.Endpoints)-1-i%2] // a real change every time
		s.ResourceVersion = fmt.Sprint(i)
		if err := p.OnEndpointSliceUpdate(nil, s); err != nil {
			b.Fatal(err)
		}
		if err := p.SyncProxyRules(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSyncOneChangedServiceWithPacketPath is the same sync with the
// ipsets and iptables rules written too: kube-proxy recomputes every set
// from every service port at each sync, and so does proxysim, so the
// change costs in proportion to the cluster.
func BenchmarkSyncOneChangedServiceWithPacketPath(b *testing.B) {
	p, _ := benchProxierPath(b, 10000, 10, 0, true)
	_, slices := fakes.Cluster(10000, 10)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s := slices[i%len(slices)].DeepCopy()
		s.Endpoints = s.Endpoints[:len(s.Endpoints)-1-i%2]
		s.ResourceVersion = fmt.Sprint(i)
		if err := p.OnEndpointSliceUpdate(nil, s); err != nil {
			b.Fatal(err)
		}
		if err := p.SyncProxyRules(); err != nil {
			b.Fatal(err)
		}
	}
}
