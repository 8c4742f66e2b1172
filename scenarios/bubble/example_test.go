package bubble_test

import (
	"context"
	"testing"

	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/knftables"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/bubble"
)

// Replay a scenario against your own proxy in a testing/synctest bubble,
// compared with proxysim's model of kube-proxy at every step. It needs the
// *testing.T of a test, so this example is compiled but not run;
// examples/naiveproxy's tests run the same calls.
func ExampleReplay() {
	testMyProxy := func(t *testing.T) {
		s, err := scenarios.LoadLibrary("nftables-clusterip-spread")
		if err != nil {
			t.Fatal(err)
		}
		res, err := bubble.Replay(t, s, func(ctx context.Context, env bubble.ProxyEnv) error {
			return runMyProxy(ctx, env.Client, env.NFTables) // until ctx is cancelled
		}, bubble.Options{Compare: bubble.CompareKubeProxy})
		if err != nil {
			t.Fatal(err) // the scenario asks for something a bubble cannot honour
		}
		if !res.Passed() {
			t.Fatal(res.Report())
		}
	}
	_ = testMyProxy
}

// runMyProxy stands for your proxy's main loop in ExampleReplay.
func runMyProxy(ctx context.Context, client kubernetes.Interface, nft knftables.Interface) error {
	_, _ = client, nft
	<-ctx.Done()
	return nil
}
