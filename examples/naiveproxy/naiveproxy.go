// Package naiveproxy is a small service proxy written from scratch, to
// show how to test your own proxy with proxysim (scenarios/bubble.Replay,
// see naiveproxy_test.go). It is deliberately naive:
//
//   - an endpoint gets traffic when its ready condition is true (or unset);
//     serving and terminating are ignored, so when every endpoint of a
//     Service is terminating it sends nothing to the ones still serving,
//     where kube-proxy falls back to them;
//   - every change rewrites the whole nftables table at once: no rate
//     limiting (no minimum interval between syncs), no partial syncs;
//   - no traffic policies, session affinity, node ports, load balancers or
//     masquerading.
//
// It is built like a real one: client-go shared informers, a workqueue
// holding one key ("sync"), one worker, and a resync every ResyncPeriod on a
// time.Ticker, all on the real time package.
package naiveproxy

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/knftables"
)

// ResyncPeriod is how often the proxy rewrites its table with nothing new.
const ResyncPeriod = 30 * time.Second

const (
	syncKey  = "sync"
	services = "services"
)

// Proxy programs one nftables table from the cluster's Services and
// EndpointSlices.
type Proxy struct {
	client kubernetes.Interface
	nft    knftables.Interface
	queue  workqueue.TypedInterface[string]

	services corelisters.ServiceLister
	slices   discoverylisters.EndpointSliceLister
}

// New returns a proxy reading the cluster through client and programming
// nft's table.
func New(client kubernetes.Interface, nft knftables.Interface) *Proxy {
	return &Proxy{client: client, nft: nft}
}

// Run runs the proxy until ctx is cancelled; it returns once its
// informers, queue, worker and ticker have stopped.
func (p *Proxy) Run(ctx context.Context) error {
	p.queue = workqueue.NewTyped[string]()
	factory := informers.NewSharedInformerFactory(p.client, 0)
	svcInf := factory.Core().V1().Services()
	sliceInf := factory.Discovery().V1().EndpointSlices()
	p.services, p.slices = svcInf.Lister(), sliceInf.Lister()
	enqueue := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { p.queue.Add(syncKey) },
		UpdateFunc: func(any, any) { p.queue.Add(syncKey) },
		DeleteFunc: func(any) { p.queue.Add(syncKey) },
	}
	for _, inf := range []cache.SharedIndexInformer{svcInf.Informer(), sliceInf.Informer()} {
		if _, err := inf.AddEventHandler(enqueue); err != nil {
			return err
		}
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	defer p.queue.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), svcInf.Informer().HasSynced, sliceInf.Informer().HasSynced) {
		return nil // cancelled while syncing
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for p.work(ctx) {
		}
	}()
	tick := time.NewTicker(ResyncPeriod)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			p.queue.ShutDown()
			<-done
			return nil
		case <-tick.C:
			p.queue.Add(syncKey)
		}
	}
}

// work takes one key off the queue and syncs; false once the queue is shut
// down. Naive again: a failed transaction is not retried before the next
// event or resync.
func (p *Proxy) work(ctx context.Context) bool {
	key, quit := p.queue.Get()
	if quit {
		return false
	}
	defer p.queue.Done(key)
	_ = p.sync(ctx)
	return true
}

// sync rewrites the whole table in one transaction.
func (p *Proxy) sync(ctx context.Context) error {
	svcs, err := p.services.List(labels.Everything())
	if err != nil {
		return err
	}
	sort.Slice(svcs, func(i, j int) bool {
		return svcs[i].Namespace+"/"+svcs[i].Name < svcs[j].Namespace+"/"+svcs[j].Name
	})
	tx := p.nft.NewTransaction()
	tx.Destroy(&knftables.Table{})
	tx.Add(&knftables.Table{Comment: knftables.PtrTo("naiveproxy")})
	base := []struct {
		name     string
		typ      knftables.BaseChainType
		hook     knftables.BaseChainHook
		priority knftables.BaseChainPriority
		jump     string
	}{
		// Before DNAT: a ClusterIP answers only on its Service's ports.
		{"filter-prerouting", knftables.FilterType, knftables.PreroutingHook, knftables.DNATPriority + "-10", "cluster-ips"},
		{"filter-output", knftables.FilterType, knftables.OutputHook, knftables.DNATPriority + "-10", "cluster-ips"},
		{"nat-prerouting", knftables.NATType, knftables.PreroutingHook, knftables.DNATPriority, services},
		{"nat-output", knftables.NATType, knftables.OutputHook, knftables.DNATPriority, services},
	}
	for _, c := range base {
		tx.Add(&knftables.Chain{Name: c.name, Type: &c.typ, Hook: &c.hook, Priority: &c.priority})
	}
	tx.Add(&knftables.Chain{Name: "cluster-ips"})
	tx.Add(&knftables.Chain{Name: services})
	for _, c := range base {
		tx.Add(&knftables.Rule{Chain: c.name, Rule: "jump " + c.jump})
	}
	for _, svc := range svcs {
		ip := net.ParseIP(svc.Spec.ClusterIP)
		if ip == nil || ip.To4() == nil || svc.Spec.Type == v1.ServiceTypeExternalName {
			continue
		}
		check := "ports-" + svc.Namespace + "-" + svc.Name
		tx.Add(&knftables.Chain{Name: check})
		tx.Add(&knftables.Rule{Chain: "cluster-ips", Rule: knftables.Concat("ip daddr", ip, "jump", check)})
		slices, err := p.slices.EndpointSlices(svc.Namespace).List(labels.SelectorFromSet(labels.Set{discovery.LabelServiceName: svc.Name}))
		if err != nil {
			return err
		}
		for _, port := range svc.Spec.Ports {
			proto := strings.ToLower(string(port.Protocol))
			if proto == "" {
				proto = "tcp"
			}
			tx.Add(&knftables.Rule{Chain: check, Rule: knftables.Concat("meta l4proto", proto, "th dport", port.Port, "return")})
			eps := readyEndpoints(slices, port.Name)
			if len(eps) == 0 {
				continue // naive: the packet goes on to the ClusterIP, unanswered
			}
			var elems []string
			for i, ep := range eps {
				elems = append(elems, fmt.Sprintf("%d : %s", i, ep))
			}
			tx.Add(&knftables.Rule{Chain: services, Rule: knftables.Concat(
				"ip daddr", ip, "meta l4proto", proto, "th dport", port.Port,
				"dnat ip addr . port to numgen random mod", len(eps), "map {", strings.Join(elems, " , "), "}")})
		}
		tx.Add(&knftables.Rule{Chain: check, Rule: "reject"})
	}
	return p.nft.Run(ctx, tx)
}

// readyEndpoints are the "IP . port" of every endpoint whose ready
// condition is true or unset, for the Service port named portName, sorted
// and without duplicates. Serving and terminating are ignored: that is the
// naivety the example's divergence scenario catches.
func readyEndpoints(slices []*discovery.EndpointSlice, portName string) []string {
	seen := map[string]bool{}
	var out []string
	for _, sl := range slices {
		if sl.AddressType != discovery.AddressTypeIPv4 {
			continue
		}
		port := -1
		for _, sp := range sl.Ports {
			if sp.Port != nil && (sp.Name == nil && portName == "" || sp.Name != nil && *sp.Name == portName) {
				port = int(*sp.Port)
			}
		}
		if port < 0 {
			continue
		}
		for _, ep := range sl.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue
			}
			for _, a := range ep.Addresses {
				k := a + " . " + strconv.Itoa(port)
				if !seen[k] {
					seen[k] = true
					out = append(out, k)
				}
			}
		}
	}
	sort.Strings(out)
	return out
}
