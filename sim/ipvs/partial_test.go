package ipvs_test

import (
	"fmt"
	"math/rand"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/proxysim/proxysim/fakes"
	"github.com/proxysim/proxysim/sim"
	"github.com/proxysim/proxysim/sim/ipvs"
	"github.com/proxysim/proxysim/sim/runner"
	"github.com/proxysim/proxysim/sim/vclock"
)

// Partial syncs must leave the kernel exactly as full syncs (kube-proxy's way)
// would: the same random changes go to a proxier that reconciles in full on
// every sync and to one that touches only what changed, and the IPVS tables
// and bound addresses must match after every sync.
func TestPartialSyncsMatchFullSyncs(t *testing.T) {
	for seed := int64(1); seed <= 60; seed++ {
		r := rand.New(rand.NewSource(seed))
		type side struct {
			w    *sim.World
			h    *fakes.IPVS
			addr *fakes.Dummy
		}
		mk := func(full time.Duration) side {
			clk := vclock.New(vclock.Epoch)
			dp, h, _, d := fakes.Dataplane("6.1.0", clk)
			w := sim.New(t, sim.Config{
				Runner:     runner.Config{Generation: runner.Cooldown, MinInterval: 0, MaxInterval: time.Hour},
				Clock:      clk,
				NodeName:   "node-a",
				NewBackend: ipvs.Backend(ipvs.Config{NodeIPs: []string{"192.168.0.10"}, FullSyncPeriod: full}, dp),
			})
			if err := w.Start(); err != nil {
				t.Fatal(err)
			}
			return side{w, h, d}
		}
		full, partial := mk(time.Nanosecond), mk(0)
		for step := 0; step < 40; step++ {
			obj, del := randomChange(r)
			for _, s := range []side{full, partial} {
				s.w.Advance(time.Second)
				var err error
				if del != "" {
					_, err = s.w.Get(del, [2]string{"default", obj.(metav1.Object).GetName()})
					if err == nil {
						err = s.w.Delete(del, "default", obj.(metav1.Object).GetName())
					} else {
						err = nil
					}
				} else {
					err = s.w.Apply(obj)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			a, _ := ipvs.Table(full.h)
			b, _ := ipvs.Table(partial.h)
			if a != b {
				t.Fatalf("seed %d step %d: tables differ\nfull:\n%s\npartial:\n%s", seed, step, a, b)
			}
			aa, _ := full.addr.Addresses(ipvs.DummyDevice)
			ba, _ := partial.addr.Addresses(ipvs.DummyDevice)
			if fmt.Sprint(aa) != fmt.Sprint(ba) {
				t.Fatalf("seed %d step %d: addresses differ: full %v, partial %v", seed, step, aa, ba)
			}
		}
	}
}

// randomChange returns an object to apply, or one to delete (del names its
// kind).
func randomChange(r *rand.Rand) (obj runtime.Object, del string) {
	n := r.Intn(4)
	name := fmt.Sprintf("s%d", n)
	if r.Intn(3) > 0 {
		if r.Intn(8) == 0 {
			return fakes.Service("default", name, "", 80), "Service"
		}
		svc := fakes.Service("default", name, fmt.Sprintf("10.96.0.%d", 10+n), int32(80+r.Intn(2)))
		switch r.Intn(3) {
		case 1:
			svc.Spec.Type = v1.ServiceTypeNodePort
			svc.Spec.Ports[0].NodePort = int32(30000 + n)
		case 2:
			svc.Spec.Type = v1.ServiceTypeLoadBalancer
			svc.Spec.Ports[0].NodePort = int32(30000 + n)
			svc.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: fmt.Sprintf("203.0.113.%d", 1+r.Intn(3))}}
		}
		if r.Intn(3) == 0 {
			// shared external IPs make two services want one address
			svc.Spec.ExternalIPs = []string{fmt.Sprintf("198.51.100.%d", 1+r.Intn(2))}
		}
		if r.Intn(3) == 0 {
			svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		}
		if r.Intn(4) == 0 {
			svc.Spec.SessionAffinity = v1.ServiceAffinityClientIP
		}
		return svc, ""
	}
	if r.Intn(8) == 0 {
		return fakes.EndpointSlice("default", name+"-x", name, 8080), "EndpointSlice"
	}
	var addrs []string
	for i := r.Intn(4); i > 0; i-- {
		addrs = append(addrs, fmt.Sprintf("10.244.%d.%d", n, 1+r.Intn(4)))
	}
	s := fakes.EndpointSlice("default", name+"-x", name, 8080, addrs...)
	for i := range s.Endpoints {
		if r.Intn(2) == 0 {
			s.Endpoints[i].NodeName = ptr.To("node-a")
		}
		if r.Intn(4) == 0 {
			s.Endpoints[i].Conditions.Ready = ptr.To(false)
		}
	}
	return s, ""
}
