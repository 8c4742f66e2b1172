package ipvsmode_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/proxysim/proxysim/fakes"
	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/ipvsmode"
	"github.com/proxysim/proxysim/scenarios/replay"
	"github.com/proxysim/proxysim/sim/ipvs"
)

func parse(t *testing.T, text string) (*scenarios.Scenario, error) {
	t.Helper()
	return scenarios.Parse("x.yaml", []byte(text), nil)
}

// A scenario that names no mode is an IPVS one, with the IPVS defaults.
func TestIPVSIsTheDefaultMode(t *testing.T) {
	s, err := parse(t, "name: x\nproxy: {version: v1.34.0}\ntimeline: [{at: 0s, note: n}]\n")
	if err != nil {
		t.Fatal(err)
	}
	set, ok := ipvsmode.SettingsOf(s)
	if s.Proxy.Mode != ipvsmode.Name || !ok || set.Kernel != ipvsmode.DefaultKernel || set.Scheduler != ipvs.DefaultScheduler {
		t.Fatalf("mode %q, settings %+v", s.Proxy.Mode, set)
	}
}

// The real-kernel binding opens a dataplane per replay and releases it.
func TestOnKernelOpensAndCloses(t *testing.T) {
	s, err := parse(t, `name: x
proxy: {version: v1.34.0, scheduler: wrr}
timeline:
  - at: 1s
    expect:
      ipvs: |
        Prot LocalAddress:Port Scheduler Flags
          -> RemoteAddress:Port           Forward Weight ActiveConn InActConn
`)
	if err != nil {
		t.Fatal(err)
	}
	opened, closed := 0, 0
	factory := ipvsmode.OnKernel(func() (ipvs.Dataplane, func() error, error) {
		opened++
		dp, _, _, _ := fakes.Dataplane("5.10.0", nil)
		return dp, func() error { closed++; return nil }, nil
	})
	res, err := replay.Replay(s, replay.Options{Dataplane: factory})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Passed() || opened != 1 || closed != 1 || res.Env != "netns, kernel 5.10.0" {
		t.Fatalf("passed %v, opened %d, closed %d, env %q: %v", res.Passed(), opened, closed, res.Env, res.Failures)
	}
	if !ipvsmode.HasGolden(s) || ipvsmode.HasTraffic(s) {
		t.Error("HasGolden/HasTraffic")
	}
}

// Without client traffic (a real kernel's binding here), a connect step
// cannot run: the replay says so instead of panicking.
func TestConnectNeedsTraffic(t *testing.T) {
	s, err := parse(t, "name: x\nproxy: {version: v1.34.0}\ntimeline: [{at: 1s, connect: {name: c1, client: \"10.0.0.5:40000\", service: \"10.96.0.10:80\"}}]\n")
	if err != nil {
		t.Fatal(err)
	}
	factory := ipvsmode.OnKernel(func() (ipvs.Dataplane, func() error, error) {
		dp, _, _, _ := fakes.Dataplane("6.1.0", nil)
		return dp, func() error { return nil }, nil
	})
	_, err = replay.Replay(s, replay.Options{Dataplane: factory})
	if err == nil || !strings.Contains(err.Error(), "timeline[0]: the netns, kernel 6.1.0 dataplane cannot open connections") {
		t.Fatalf("got %v", err)
	}
}

func TestEmptyDataplaneFaultIsRefused(t *testing.T) {
	_, err := parse(t, "name: x\nproxy: {version: v1.34.0}\ntimeline: [{at: 1s, fault: {dataplaneOps: 0}}]\n")
	var ps scenarios.Problems
	if !errors.As(err, &ps) || ps[0].Path != "timeline[0].fault.dataplaneOps" {
		t.Fatalf("got %v", err)
	}
}
