package nftablesmode_test

import (
	"errors"
	"strings"
	"testing"

	"sigs.k8s.io/knftables"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/nftablesmode"
	"github.com/proxysim/proxysim/scenarios/replay"
	"github.com/proxysim/proxysim/sim/nftables"
	"github.com/proxysim/proxysim/sim/route"
)

// kernel is a stand-in for a real kernel: a knftables.Fake that can hold
// another table than was written, or measure routes that disagree.
type kernel struct {
	*knftables.Fake
	verifyErr error
	routeErr  error
	verified  int
	probes    []nftables.Probe
	routes    []route.Shares
	closed    int
}

func (k *kernel) Name() string { return "test kernel" }

func (k *kernel) Verify(dump string) error {
	k.verified++
	if k.verifyErr != nil {
		return k.verifyErr
	}
	if k.Dump() != dump {
		return errors.New("kernel differs")
	}
	return nil
}

func (k *kernel) CheckRoute(_ route.Packet, predicted route.Shares, p nftables.Probe) error {
	k.routes = append(k.routes, predicted)
	k.probes = append(k.probes, p)
	return k.routeErr
}

func (k *kernel) Close() error { k.closed++; return nil }

func replayOnKernel(t *testing.T, name string, k *kernel) *replay.Result {
	t.Helper()
	s, err := scenarios.LoadLibrary(name)
	if err != nil {
		t.Fatal(err)
	}
	res, err := replay.Replay(s, replay.Options{Dataplane: nftablesmode.OnKernel(func([]string) (nftablesmode.Kernel, error) {
		return k, nil
	})})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func newKernel() *kernel {
	return &kernel{Fake: knftables.NewFake(knftables.IPv4Family, nftables.Table)}
}

// On a kernel that holds the fake's table and agrees with the tracer, the
// scenario passes: every golden and route first verifies the kernel, and
// every route is measured with the probe the tracer's state asks for.
func TestOnKernelVerifiesAndMeasuresEveryRoute(t *testing.T) {
	k := newKernel()
	res := replayOnKernel(t, "nftables-session-affinity", k)
	if !res.Passed() || res.Env != "test kernel" {
		var b strings.Builder
		replay.Report(&b, res, false)
		t.Fatalf("env %q:\n%s", res.Env, b.String())
	}
	// two goldens and four routes
	if k.verified != 6 || len(k.routes) != 4 || k.closed != 1 {
		t.Fatalf("verified %d, routes %d, closed %d", k.verified, len(k.routes), k.closed)
	}
	want := []struct {
		forget, expire int
		again          bool
	}{{2, 0, false}, {2, 0, true}, {2, 2, true}, {0, 0, true}}
	for i, w := range want {
		p := k.probes[i]
		if len(p.Forget) != w.forget || len(p.Expire) != w.expire || p.Again != w.again {
			t.Errorf("route %d: probe %+v", i, p)
		}
	}
}

// A table the kernel does not hold fails the golden; connections that go
// elsewhere than traced fail the route, each with the kernel's words.
func TestOnKernelFailsWhatTheKernelDisagreesWith(t *testing.T) {
	k := newKernel()
	k.verifyErr = errors.New("chain services differs")
	res := replayOnKernel(t, "nftables-clusterip-spread", k)
	if res.Passed() || !strings.Contains(res.Failures[0].Got, "chain services differs") {
		t.Fatalf("failures %v", res.Failures)
	}
	k = newKernel()
	k.routeErr = errors.New("the spread is off")
	res = replayOnKernel(t, "nftables-clusterip-spread", k)
	if res.Passed() || !strings.Contains(res.Failures[0].Got, "the kernel disagrees: the spread is off") {
		t.Fatalf("failures %v", res.Failures)
	}
}
