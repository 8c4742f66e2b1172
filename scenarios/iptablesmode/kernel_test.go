package iptablesmode_test

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/proxysim/proxysim/fakes"
	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/iptablesmode"
	"github.com/proxysim/proxysim/sim/iptables"

	// The library has scenarios of every mode; these load them.
	_ "github.com/proxysim/proxysim/scenarios/controllers"
	_ "github.com/proxysim/proxysim/scenarios/ingressnginx"
	_ "github.com/proxysim/proxysim/scenarios/ipvsmode"
	_ "github.com/proxysim/proxysim/scenarios/nftablesmode"
	"github.com/proxysim/proxysim/scenarios/replay"
)

// kernel is a stand-in for a real kernel: an in-memory iptables that can
// refuse restores, hold other rules than were written, or measure routes
// that disagree.
type kernel struct {
	*fakes.IPTables
	refuse    bool
	verifyErr error
	routeErr  error
	verified  []string
	routes    []iptables.Shares
	pkts      []string // "PROTOCOL FROM -> TO" of each route checked
	closed    int
}

func (k *kernel) Name() string { return "test kernel" }

func (k *kernel) Restore(payload string) error {
	if k.refuse {
		return errors.New("kernel says no")
	}
	return k.IPTables.Restore(payload)
}

func (k *kernel) Verify(want string) error {
	k.verified = append(k.verified, want)
	if k.verifyErr != nil {
		return k.verifyErr
	}
	if got := k.SaveAll(); got != want {
		return errors.New("kernel differs")
	}
	return nil
}

func (k *kernel) CheckRouteWith(pkt iptables.Packet, predicted iptables.Shares, _ map[string][]string) error {
	k.routes = append(k.routes, predicted)
	k.pkts = append(k.pkts, fmt.Sprintf("%s %s -> %s", strings.ToUpper(pkt.Protocol), pkt.Src, net.JoinHostPort(pkt.Dst.String(), strconv.Itoa(pkt.DPort))))
	return k.routeErr
}

func (k *kernel) Close() error { k.closed++; return nil }

func replayOn(t *testing.T, file string, k *kernel) *replay.Result {
	t.Helper()
	s, err := scenarios.Load(filepath.Join(testdata, file))
	if err != nil {
		t.Fatal(err)
	}
	var nodeIPs []string
	res, err := replay.Replay(s, replay.Options{Dataplane: iptablesmode.OnKernel(func(ips []string) (iptablesmode.Kernel, error) {
		nodeIPs = ips
		return k, nil
	})})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(nodeIPs, ",") != "192.168.0.2" {
		t.Errorf("the kernel was opened with node IPs %v", nodeIPs)
	}
	return res
}

// On a kernel that holds what was written and agrees with the tracer, a
// scenario passes as on the fake: every golden and route first verifies
// the kernel, every route is checked with the tracer's shares, and the
// kernel is closed once.
func TestOnKernelChecksTheKernelAtEveryExpectation(t *testing.T) {
	k := &kernel{IPTables: fakes.NewIPTables()}
	res := replayOn(t, "clusterip-spread.yaml", k)
	if !res.Passed() || res.Env != "test kernel" {
		var b strings.Builder
		replay.Report(&b, res, false)
		t.Fatalf("env %q:\n%s", res.Env, b.String())
	}
	// two goldens and four routes
	if len(k.verified) != 6 || len(k.routes) != 4 || k.closed != 1 {
		t.Fatalf("verified %d, routes %d, closed %d", len(k.verified), len(k.routes), k.closed)
	}
	if len(k.routes[2]) != 5 {
		t.Errorf("the route after the update is checked with %s, want five endpoints", k.routes[2])
	}
}

// A kernel that refuses what the fake takes fails the sync, and says so.
func TestOnKernelReportsARestoreTheKernelRefuses(t *testing.T) {
	res := replayOn(t, "clusterip-spread.yaml", &kernel{IPTables: fakes.NewIPTables(), refuse: true})
	if res.Passed() {
		t.Fatal("passed on a kernel that refuses every restore")
	}
	if !strings.Contains(string(res.Trace.JSONL()), "the kernel refused a restore the fake takes: kernel says no") {
		t.Fatalf("the trace does not say why:\n%s", res.Trace.JSONL())
	}
}

// Rules the kernel does not hold fail the golden; connections that go
// elsewhere than traced fail the route, each with the kernel's words.
func TestOnKernelFailsGoldensAndRoutesTheKernelDisagreesWith(t *testing.T) {
	res := replayOn(t, "clusterip-spread.yaml", &kernel{IPTables: fakes.NewIPTables(), verifyErr: errors.New("rule 3 differs")})
	if res.Passed() || !strings.Contains(res.Failures[0].Got, "rule 3 differs") {
		t.Fatalf("failures %v", res.Failures)
	}
	res = replayOn(t, "clusterip-spread.yaml", &kernel{IPTables: fakes.NewIPTables(), routeErr: errors.New("the spread is off")})
	if res.Passed() || !strings.Contains(res.Failures[0].Got, "the kernel disagrees: the spread is off") {
		t.Fatalf("failures %v", res.Failures)
	}
}

// KernelRoutes lists exactly the connections a kernel replay checks, in
// order: every route expectation and connection step of every library
// scenario of the mode (the canary flush, which empties the kernel's
// tables, included), replayed on a stand-in kernel.
func TestKernelRoutesAreWhatAKernelReplayChecks(t *testing.T) {
	n := 0
	for _, name := range scenarios.TestedLibraryNames() {
		s, err := scenarios.LoadLibrary(name)
		if err != nil {
			t.Fatal(err)
		}
		if s.Proxy.Mode != iptablesmode.Name {
			continue
		}
		k := &kernel{IPTables: fakes.NewIPTables()}
		res, err := replay.Replay(s, replay.Options{Dataplane: iptablesmode.OnKernel(func([]string) (iptablesmode.Kernel, error) { return k, nil })})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Passed() {
			var b strings.Builder
			replay.Report(&b, res, false)
			t.Errorf("%s fails on a kernel that agrees:\n%s", name, b.String())
		}
		var want []string
		for _, r := range iptablesmode.KernelRoutes(s) {
			want = append(want, r.Key())
		}
		if strings.Join(want, "\n") != strings.Join(k.pkts, "\n") {
			t.Errorf("%s: KernelRoutes\n  %s\nthe replay checked\n  %s", name, strings.Join(want, "\n  "), strings.Join(k.pkts, "\n  "))
		}
		n += len(want)
	}
	if n < 10 {
		t.Errorf("%d routes in the library, want a few", n)
	}
}
