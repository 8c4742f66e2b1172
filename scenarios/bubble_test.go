package scenarios_test

import (
	"context"
	"strings"
	"testing"

	"github.com/proxysim/proxysim/scenarios"
)

// A mode that cannot host a proxy under test says so, and names those
// that can; an unknown comparison is refused. Neither runs the proxy.
func TestReplayInBubbleRefusesWhatItCannotDo(t *testing.T) {
	s, err := scenarios.Load(portsScenario)
	if err != nil {
		t.Fatal(err)
	}
	ran := false
	proxy := func(ctx context.Context, env scenarios.ProxyEnv) error { ran = true; <-ctx.Done(); return nil }
	_, err = scenarios.ReplayInBubble(t, s, proxy, scenarios.BubbleOptions{})
	if err == nil || !strings.Contains(err.Error(), "mode ports cannot host a proxy under test (modes that can: iptables, ipvs, nftables)") {
		t.Errorf("got %v", err)
	}
	s, err = scenarios.LoadLibrary("nftables-clusterip-spread")
	if err != nil {
		t.Fatal(err)
	}
	_, err = scenarios.ReplayInBubble(t, s, proxy, scenarios.BubbleOptions{Compare: "kube-proxy-v1.33"})
	if err == nil || !strings.Contains(err.Error(), `compare: want "kube-proxy", got "kube-proxy-v1.33"`) {
		t.Errorf("got %v", err)
	}
	if ran {
		t.Error("the proxy ran")
	}
}
