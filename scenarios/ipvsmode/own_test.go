package ipvsmode_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"

	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/bubble"
	"github.com/proxysim/proxysim/sim/ipvs"
)

// tinyIPVS is a proxy under test for the IPVS dataplane: at every informer
// event it makes one rr virtual server per Service port with a real server
// per ready endpoint, or, when none is ready, per serving one. It is the
// smallest thing that passes terminating-fallback.yaml.
func tinyIPVS(ctx context.Context, env bubble.ProxyEnv) error {
	f := informers.NewSharedInformerFactory(env.Client, 0)
	svcs, slices := f.Core().V1().Services(), f.Discovery().V1().EndpointSlices()
	var mu sync.Mutex
	synced := false
	sync := func() {
		mu.Lock()
		defer mu.Unlock()
		if !synced {
			return
		}
		list, _ := svcs.Lister().List(labels.Everything())
		for _, svc := range list {
			sl, _ := slices.Lister().EndpointSlices(svc.Namespace).List(labels.SelectorFromSet(labels.Set{discovery.LabelServiceName: svc.Name}))
			for _, p := range svc.Spec.Ports {
				vs := ipvs.VirtualServer{Address: svc.Spec.ClusterIP, Protocol: string(p.Protocol), Port: uint16(p.Port), Scheduler: "rr"}
				reconcile(env.IPVS.IPVS, vs, pick(sl, p.Name))
			}
		}
	}
	h := cache.ResourceEventHandlerFuncs{AddFunc: func(any) { sync() }, UpdateFunc: func(any, any) { sync() }, DeleteFunc: func(any) { sync() }}
	if _, err := svcs.Informer().AddEventHandler(h); err != nil {
		return err
	}
	if _, err := slices.Informer().AddEventHandler(h); err != nil {
		return err
	}
	f.Start(ctx.Done())
	defer f.Shutdown()
	if cache.WaitForCacheSync(ctx.Done(), svcs.Informer().HasSynced, slices.Informer().HasSynced) {
		mu.Lock()
		synced = true
		mu.Unlock()
		sync()
	}
	<-ctx.Done()
	return nil
}

func pick(slices []*discovery.EndpointSlice, port string) []ipvs.RealServer {
	var ready, serving []ipvs.RealServer
	for _, sl := range slices {
		for _, sp := range sl.Ports {
			if sp.Name == nil || *sp.Name != port || sp.Port == nil {
				continue
			}
			for _, ep := range sl.Endpoints {
				rs := ipvs.RealServer{Address: ep.Addresses[0], Port: uint16(*sp.Port), Weight: 1}
				c := ep.Conditions
				switch {
				case c.Ready == nil || *c.Ready:
					ready = append(ready, rs)
				case c.Serving == nil || *c.Serving:
					serving = append(serving, rs)
				}
			}
		}
	}
	if len(ready) == 0 {
		ready = serving
	}
	sort.Slice(ready, func(i, j int) bool { return ready[i].Address < ready[j].Address })
	return ready
}

func reconcile(h ipvs.Handle, vs ipvs.VirtualServer, want []ipvs.RealServer) {
	have, err := h.RealServers(vs)
	if err != nil {
		_ = h.AddVirtualServer(vs)
	}
	keep := map[string]bool{}
	for _, rs := range want {
		keep[rs.Key()] = true
	}
	for _, rs := range have {
		if !keep[rs.Key()] {
			_ = h.DeleteRealServer(vs, rs)
		}
		delete(keep, rs.Key())
	}
	for _, rs := range want {
		if keep[rs.Key()] {
			_ = h.AddRealServer(vs, rs)
		}
	}
}

// A proxy under test programs the fake kernel's IPVS through the handle it
// is given; the library's ipvs goldens are checked against what it
// programmed, and the comparison with kube-proxy compares the ipvsadm
// tables step by step.
func TestOwnProxyOnIPVS(t *testing.T) {
	s, err := scenarios.Load("../library/terminating-fallback.yaml")
	if err != nil {
		t.Fatal(err)
	}
	res, err := bubble.Replay(t, s, tinyIPVS, bubble.Options{Compare: bubble.CompareKubeProxy})
	if err != nil {
		t.Fatal(err)
	}
	report := res.Report()
	if !res.Passed() || res.Checks != 3 || len(res.Writes) == 0 {
		t.Fatalf("want 3 passing checks:\n%s", report)
	}
	// kube-proxy's minSyncPeriod (1s) holds the changes at 1.1s and 1.2s
	// until 2s; the proxy under test applies them at once.
	if c := res.Compare; len(c.Steps) != 2 || c.Steps[0].Step != 1 || c.Steps[1].Step != 2 ||
		!strings.Contains(report, "programming dataplane table: proxy +0s, kube-proxy unchanged before the next step") {
		t.Fatalf("want timeline[1] and [2] to differ in programming latency:\n%s", report)
	}
	// A proxy that forgets the fallback fails the golden at 2s, and the
	// comparison shows both tables.
	forgetful := func(ctx context.Context, env bubble.ProxyEnv) error {
		env.IPVS.IPVS = &noFallback{Handle: env.IPVS.IPVS}
		return tinyIPVS(ctx, env)
	}
	res, err = bubble.Replay(t, s, forgetful, bubble.Options{Compare: bubble.CompareKubeProxy})
	if err != nil {
		t.Fatal(err)
	}
	report = res.Report()
	if res.Passed() || !strings.Contains(report, "timeline[3].expect.ipvs at 2s") || !strings.Contains(report, "dataplane table: proxy:") {
		t.Fatalf("want the golden at timeline[3] to fail, with both tables:\n%s", report)
	}
}

// noFallback drops real servers added while no ready endpoint is left:
// with tinyIPVS, the three added at 1.2s (all serving, none ready).
type noFallback struct {
	ipvs.Handle
	adds int
}

func (n *noFallback) AddRealServer(vs ipvs.VirtualServer, rs ipvs.RealServer) error {
	n.adds++
	if n.adds > 3 {
		return fmt.Errorf("dropped")
	}
	return n.Handle.AddRealServer(vs, rs)
}

// Connections reach the proxy under test's kernel only, so a comparison of
// ipvsadm tables leaves the connection counters out: a connect step alone
// makes no difference. What the proxy lacks still fails: without graceful
// termination it deletes a real server that has a connection.
func TestOwnProxyComparisonIgnoresConnectionCounters(t *testing.T) {
	s, err := scenarios.Load("../library/graceful-termination.yaml")
	if err != nil {
		t.Fatal(err)
	}
	res, err := bubble.Replay(t, s, tinyIPVS, bubble.Options{Compare: bubble.CompareKubeProxy, SkipUnsupported: true})
	if err != nil {
		t.Fatal(err)
	}
	report := res.Report()
	for _, sc := range res.Compare.Steps {
		if sc.Step == 0 {
			t.Errorf("the connect step at 5s differs from kube-proxy:\n%s", report)
		}
	}
	if res.Passed() || res.Failures[0].Pos.Path != "timeline[1].expect.ipvs" || !strings.Contains(report, "timeline[1].expect.draining: reads proxysim's own engine") {
		t.Errorf("want the golden at timeline[1] to fail and draining to be skipped:\n%s", report)
	}
}
