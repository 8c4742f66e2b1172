package iptables_test

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/proxysim/proxysim/fakes"
	"github.com/proxysim/proxysim/sim/iptables"
	"github.com/proxysim/proxysim/sim/proxy"
)

// epoch is a clock that stays where tests put it.
func epoch() *clocktesting.FakePassiveClock {
	return clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
}

// big is web with n endpoints plus a second service, small, with m.
func bigState(n, m int) *proxy.SyncState {
	st := state(n, nil)
	small := proxy.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "default", Name: "small"}, Port: "http", Protocol: v1.ProtocolTCP}
	st.Services[small] = &proxy.ServicePort{ClusterIP: net.ParseIP("10.96.0.11"), Port: 80, Protocol: v1.ProtocolTCP}
	var eps []*proxy.Endpoint
	for i := 1; i <= m; i++ {
		eps = append(eps, &proxy.Endpoint{IP: fmt.Sprintf("10.245.0.%d", i), Port: 8080, Ready: true, Serving: true})
	}
	st.Endpoints[small] = eps
	st.EndpointsChanges.Updated = append(st.EndpointsChanges.Updated, small.NamespacedName)
	return st
}

func TestLargeClusterModeDropsServiceComments(t *testing.T) {
	for _, c := range []struct {
		n     int
		large bool
	}{{999, false}, {1000, false}, {1001, true}} {
		st := bigState(c.n-1, 1)
		dp := fakes.NewIPTables()
		if err := iptables.New(iptables.Config{SyncPeriod: 30 * time.Second}, dp, epoch(), nil).Sync(st); err != nil {
			t.Fatal(err)
		}
		nat, _ := dp.Save("nat")
		if got := iptables.LargeCluster(st); got != c.large {
			t.Errorf("%d endpoints: LargeCluster %v", c.n, got)
		}
		svcComment := strings.Contains(nat, `-A KUBE-SVC-CDGGSHYLG3RE2FKL -m comment`)
		sepComment := strings.Contains(nat, "-m comment --comment default/web:http -s")
		if svcComment == c.large || sepComment == c.large {
			t.Errorf("%d endpoints: SVC comments %v, SEP comments %v", c.n, svcComment, sepComment)
		}
		if !strings.Contains(nat, `"default/web:http cluster IP"`) {
			t.Errorf("%d endpoints: the KUBE-SERVICES rule lost its comment", c.n)
		}
	}
}

// In large-cluster mode stale chains are cleaned up at most once per
// syncPeriod; below it, at every sync.
func TestLargeClusterModeThrottlesStaleChainCleanup(t *testing.T) {
	clk := epoch()
	dp := fakes.NewIPTables()
	p := iptables.New(iptables.Config{SyncPeriod: 30 * time.Second}, dp, clk, nil)
	sync := func(st *proxy.SyncState) int {
		t.Helper()
		if err := p.Sync(st); err != nil {
			t.Fatal(err)
		}
		nat, _ := dp.Save("nat")
		return strings.Count(nat, ":KUBE-SEP-")
	}
	if n := sync(bigState(1000, 2)); n != 1002 {
		t.Fatalf("%d SEP chains", n)
	}
	clk.SetTime(clk.Now().Add(10 * time.Second))
	if n := sync(bigState(1000, 1)); n != 1002 {
		t.Errorf("10s after a cleanup, large cluster: %d SEP chains, want the stale one kept", n)
	}
	clk.SetTime(clk.Now().Add(21 * time.Second))
	if n := sync(bigState(1000, 1)); n != 1001 {
		t.Errorf("31s after a cleanup: %d SEP chains, want the stale one deleted", n)
	}
	clk.SetTime(clk.Now().Add(time.Second))
	if n := sync(bigState(999, 1)); n != 1000 {
		t.Errorf("out of large-cluster mode: %d SEP chains, want cleanup at once", n)
	}
}
