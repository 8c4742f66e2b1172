package upstream

// kube-proxy's own compute beside proxysim's: one sync of kube-proxy
// v1.36.3's iptables and nftables proxiers and of proxysim's, over the
// same generated cluster (sim/clustergen), with the dataplane write
// discarded on both sides (the restore payload or the nft transaction is
// built, then dropped), so that each figure is the proxier building its
// rules in Go. docs/cost-profiles.md has the figures.
//
// The nftables proxier's NewProxier runs nft: run the nftables half in a
// user+network namespace (go test -c, then
// `unshare -rn ./upstream.test -test.run '^$' -test.bench ProxierCompute`);
// elsewhere it is skipped.

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	kproxynft "k8s.io/kubernetes/pkg/proxy/nftables"
	proxyutil "k8s.io/kubernetes/pkg/proxy/util"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/knftables"

	"github.com/proxysim/proxysim/sim"
	"github.com/proxysim/proxysim/sim/clustergen"
	"github.com/proxysim/proxysim/sim/costprofile"
	"github.com/proxysim/proxysim/sim/nftables"
	"github.com/proxysim/proxysim/sim/proxy"
	"github.com/proxysim/proxysim/sim/vclock"
)

// computeCluster is the benchmark's cluster: n Services of 5 endpoints
// on 10 nodes (none of them the proxy's, node-a), a fifth of the Services
// NodePorts.
func computeCluster(b *testing.B, n int) *clustergen.Cluster {
	c, err := clustergen.Generate(clustergen.Spec{
		Seed: 1, Services: n, Nodes: 10,
		EndpointsPerService: clustergen.Mix[int]{5: 1},
		Types:               clustergen.Mix[v1.ServiceType]{v1.ServiceTypeClusterIP: 4, v1.ServiceTypeNodePort: 1},
	})
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// computeSide is one proxier of a benchmark, loaded with the cluster.
type computeSide interface {
	add(svcs []*v1.Service, slices []*discovery.EndpointSlice)
	// sync syncs once, full or after the slice changed.
	sync(full bool, changed *discovery.EndpointSlice)
}

// BenchmarkProxierCompute is one sync, full or partial (one slice's
// endpoint flipped between ready and not), of 1,000, 5,000 and 10,000
// generated Services, by kube-proxy's proxier and by proxysim's.
func BenchmarkProxierCompute(b *testing.B) {
	for _, mode := range []string{"iptables", "nftables"} {
		for _, n := range []int{1000, 5000, 10000} {
			for _, kind := range []string{"full", "partial"} {
				for _, impl := range []string{"kube-proxy", "proxysim"} {
					b.Run(fmt.Sprintf("%s/%d/%s/%s", mode, n, kind, impl), func(b *testing.B) {
						benchCompute(b, mode, n, kind == "full", impl == "kube-proxy")
					})
				}
			}
		}
	}
}

func benchCompute(b *testing.B, mode string, n int, full, upstream bool) {
	c := computeCluster(b, n)
	var side computeSide
	switch {
	case mode == "iptables":
		side = newIPTCompute(b, upstream)
	case upstream:
		side = newKubeNFTCompute(b)
	default:
		side = newOurNFTCompute()
	}
	side.add(c.Services, c.Slices)
	alt := c.Slices[0].DeepCopy()
	alt.Endpoints[0].Conditions.Ready = ptrTo(!ptrOr(alt.Endpoints[0].Conditions.Ready, true))
	versions := []*discovery.EndpointSlice{alt, c.Slices[0]}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU(b)
	for i := 0; i < b.N; i++ {
		side.sync(full, versions[i%2])
	}
	// The process's CPU time (the sync and its garbage collection): on a
	// shared machine it moves less with the load than the wall time does.
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N)/1e6, "cpu-ms/op")
	// The project's model of the same sync: the default cost profile
	// evaluated on the work proxysim's proxier reported for its last one.
	// The writes were discarded, so its reads found empty tables: the
	// model is that of a node whose tables are empty (the listing term
	// reads nothing, a full sync is a new one).
	if r, ok := side.(sim.WorkReporter); ok && !upstream {
		work, ok := r.TakeSyncWork()
		if !ok {
			b.Fatal("proxysim's proxier reported no work")
		}
		part := costprofile.IPTablesNFT
		if mode == "nftables" {
			part = costprofile.NFTables
		}
		prof, err := costprofile.Named("default")
		if err != nil {
			b.Fatal(err)
		}
		m, err := prof.Mode(part)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(m.KernelSeconds(work)*1e3, "model-kernel-ms")
		b.ReportMetric(m.ComputeSeconds(work)*1e3, "model-compute-ms")
	}
}

// processCPU is the process's user and system time so far.
func processCPU(b *testing.B) time.Duration {
	d, err := cpuTime()
	if err != nil {
		b.Fatal(err)
	}
	return d
}

func cpuTime() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

func ptrOr[T any](p *T, d T) T {
	if p == nil {
		return d
	}
	return *p
}

// --- iptables: the pair of iptables_test.go, restores discarded ---

type iptCompute struct {
	p        *iptPair
	upstream bool
}

func newIPTCompute(tb testing.TB, upstream bool) *iptCompute {
	p, err := newIPTPair(iptConfig{family: v1.IPv4Protocol, masqueradeBit: 14, localhostNodePorts: true, randomFully: true,
		syncPeriod: time.Hour, clusterCIDR: "10.128.0.0/9", nodeIP: "192.168.0.2"})
	if err != nil {
		tb.Fatal(err)
	}
	p.kIPT.discard, p.oIPT.discard = true, true
	return &iptCompute{p: p, upstream: upstream}
}

func (s *iptCompute) add(svcs []*v1.Service, slices []*discovery.EndpointSlice) {
	for _, o := range svcs {
		if s.upstream {
			s.p.k.OnServiceAdd(o)
		} else {
			s.p.o.OnServiceAdd(o)
		}
	}
	for _, o := range slices {
		if s.upstream {
			s.p.k.OnEndpointSliceAdd(o)
		} else {
			_ = s.p.o.OnEndpointSliceAdd(o)
		}
	}
	if s.upstream {
		s.p.k.OnServiceSynced()
		s.p.k.OnEndpointSlicesSynced()
	} else {
		_ = s.p.o.OnServicesSynced()
		_ = s.p.o.OnEndpointSlicesSynced()
	}
}

// TakeSyncWork is proxysim's side's work (sim.WorkReporter).
// The size is the world's to fill (proxyConsumer.takeWork): here the
// proxier's, as there.
func (s *iptCompute) TakeSyncWork() (sim.SyncWork, bool) {
	if s.upstream {
		return sim.SyncWork{}, false
	}
	w, ok := s.p.oBack.TakeSyncWork()
	w.ServicePorts, w.Endpoints = s.p.o.Size()
	return w, ok
}

func (s *iptCompute) sync(full bool, changed *discovery.EndpointSlice) {
	if s.upstream {
		if full {
			s.p.k.OnTopologyChange(nil)
		} else {
			s.p.k.OnEndpointSliceUpdate(nil, changed)
		}
		s.p.k.OnServiceSynced() // syncs directly
		return
	}
	if full {
		s.p.oBack.ForceFullSync()
	} else {
		_ = s.p.o.OnEndpointSliceUpdate(nil, changed)
	}
	_ = s.p.o.SyncProxyRules()
}

func (s *iptCompute) changeService(old, cur *v1.Service) {
	if s.upstream {
		s.p.k.OnServiceUpdate(old, cur)
		s.p.k.OnServiceSynced() // syncs directly
		return
	}
	s.p.o.OnServiceUpdate(old, cur)
	_ = s.p.o.SyncProxyRules()
}

// --- nftables ---

// discardNFT builds nothing: its transactions are dropped, and listing
// finds the empty table of its Fake.
type discardNFT struct{ *knftables.Fake }

func (discardNFT) Run(context.Context, *knftables.Transaction) error { return nil }

type kubeNFTCompute struct{ p *kproxynft.Proxier }

func newKubeNFTCompute(b *testing.B) *kubeNFTCompute {
	s, err := newKubeNFT()
	if err != nil {
		b.Skipf("kube-proxy's nftables NewProxier (run the benchmark under unshare -rn): %v", err)
	}
	return s
}

// newKubeNFT is kube-proxy's nftables proxier with its transactions
// discarded. Its NewProxier runs nft (a namespace of one's own, please).
func newKubeNFT() (*kubeNFTCompute, error) {
	p, err := kproxynft.NewProxier(context.Background(), v1.IPv4Protocol, time.Hour, time.Second, false, 14,
		proxyutil.NewDetectLocalByCIDR("10.128.0.0/9"), nodeName, nodeIP4, nil, nil, nil, false)
	if err != nil {
		return nil, err
	}
	setUnexported(p, "nftables", knftables.Interface(discardNFT{knftables.NewFake(knftables.IPv4Family, nftables.Table)}))
	return &kubeNFTCompute{p: p}, nil
}

func (s *kubeNFTCompute) add(svcs []*v1.Service, slices []*discovery.EndpointSlice) {
	for _, o := range svcs {
		s.p.OnServiceAdd(o)
	}
	for _, o := range slices {
		s.p.OnEndpointSliceAdd(o)
	}
	s.p.OnServiceSynced()
	s.p.OnEndpointSlicesSynced()
}

func (s *kubeNFTCompute) sync(full bool, changed *discovery.EndpointSlice) {
	if full {
		s.p.OnTopologyChange(nil)
	} else {
		s.p.OnEndpointSliceUpdate(nil, changed)
	}
	s.p.OnServiceSynced() // syncs directly
}

func (s *kubeNFTCompute) changeService(old, cur *v1.Service) {
	s.p.OnServiceUpdate(old, cur)
	s.p.OnServiceSynced() // syncs directly
}

type ourNFTCompute struct {
	back *nftables.Proxier
	p    *proxy.Proxier
}

func newOurNFTCompute() *ourNFTCompute {
	nft := discardNFT{knftables.NewFake(knftables.IPv4Family, nftables.Table)}
	back := nftables.New(nftables.Config{ClusterCIDR: "10.128.0.0/9", NodeIP: nodeIP4}, nft, clocktesting.NewFakeClock(vclock.Epoch), nil)
	return &ourNFTCompute{back: back, p: proxy.NewProxier(v1.IPv4Protocol, nodeName, "", back, proxy.EndpointSliceTrackerOptions{})}
}

func (s *ourNFTCompute) add(svcs []*v1.Service, slices []*discovery.EndpointSlice) {
	for _, o := range svcs {
		s.p.OnServiceAdd(o)
	}
	for _, o := range slices {
		_ = s.p.OnEndpointSliceAdd(o)
	}
	_ = s.p.OnServicesSynced()
	_ = s.p.OnEndpointSlicesSynced()
}

func (s *ourNFTCompute) TakeSyncWork() (sim.SyncWork, bool) {
	w, ok := s.back.TakeSyncWork()
	w.ServicePorts, w.Endpoints = s.p.Size()
	return w, ok
}

func (s *ourNFTCompute) sync(full bool, changed *discovery.EndpointSlice) {
	if full {
		s.back.ForceFullSync()
	} else {
		_ = s.p.OnEndpointSliceUpdate(nil, changed)
	}
	_ = s.p.SyncProxyRules()
}

func (s *ourNFTCompute) changeService(old, cur *v1.Service) {
	s.p.OnServiceUpdate(old, cur)
	_ = s.p.SyncProxyRules()
}
