package bubble_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/bubble"
	_ "github.com/proxysim/proxysim/scenarios/iptablesmode"
	_ "github.com/proxysim/proxysim/scenarios/ipvsmode"
	_ "github.com/proxysim/proxysim/scenarios/nftablesmode"
)

// plainMode is a mode registered by this test only, which cannot host a
// proxy under test (it has no OwnDataplane).
type plainMode struct{}

func init() { scenarios.RegisterMode(plainMode{}) }

func (plainMode) Name() string                                 { return "plain" }
func (plainMode) NewSettings() scenarios.Settings              { return &plainSettings{} }
func (plainMode) Actions() []func() scenarios.Action           { return nil }
func (plainMode) Faults() []func() scenarios.Action            { return nil }
func (plainMode) Expectations() []func() scenarios.Expectation { return nil }
func (plainMode) Fake(*scenarios.Scenario, clock.PassiveClock) (scenarios.Dataplane, error) {
	return nil, errors.New("plain has no dataplane")
}

type plainSettings struct{ Src scenarios.Src }

func (*plainSettings) Validate(*scenarios.Validator) {}

// A mode that cannot host a proxy under test says so, and names those
// that can; an unknown comparison is refused. Neither runs the proxy.
func TestReplayRefusesWhatItCannotDo(t *testing.T) {
	s, err := scenarios.Parse("plain.yaml", []byte("name: plain\nproxy: {mode: plain, version: v1.34.0}\ntimeline:\n  - at: 1s\n    note: nothing\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	ran := false
	proxy := func(ctx context.Context, env bubble.ProxyEnv) error { ran = true; <-ctx.Done(); return nil }
	_, err = bubble.Replay(t, s, proxy, bubble.Options{})
	if err == nil || !strings.Contains(err.Error(), "mode plain cannot host a proxy under test (modes that can: iptables, ipvs, nftables)") {
		t.Errorf("got %v", err)
	}
	s, err = scenarios.LoadLibrary("nftables-clusterip-spread")
	if err != nil {
		t.Fatal(err)
	}
	_, err = bubble.Replay(t, s, proxy, bubble.Options{Compare: "kube-proxy-v1.33"})
	if err == nil || !strings.Contains(err.Error(), `compare: want "kube-proxy", got "kube-proxy-v1.33"`) {
		t.Errorf("got %v", err)
	}
	if ran {
		t.Error("the proxy ran")
	}
}

// A fault step is split: the parts a proxy under test can meet (the
// mode's, here failing iptables-restores of its dataplane) run; the
// runner's failing syncs and a broken watch, which only proxysim's proxy
// would feel, are skipped at their positions, or refuse the scenario
// without SkipUnsupported.
func TestReplaySplitsAFault(t *testing.T) {
	s, err := scenarios.Parse("faults.yaml", []byte(`name: faults
proxy: {mode: iptables, version: v1.34.0}
timeline:
  - at: 1s
    fault: {syncs: 2, watchBreak: 1s, restoreFailures: 1}
  - at: 2s
    note: after
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	var restoreErr error
	proxy := func(ctx context.Context, env bubble.ProxyEnv) error {
		select {
		case <-time.After(1500 * time.Millisecond):
			restoreErr = env.IPTables.Restore("*nat\nCOMMIT\n")
		case <-ctx.Done():
		}
		<-ctx.Done()
		return nil
	}
	_, err = bubble.Replay(t, s, proxy, bubble.Options{})
	for _, want := range []string{"faults.yaml:5:20: timeline[0].fault.syncs: fails syncs of proxysim's runner", "faults.yaml:5:35: timeline[0].fault.watchBreak: breaks the watches"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want %q in %v", want, err)
		}
	}
	res, err := bubble.Replay(t, s, proxy, bubble.Options{SkipUnsupported: true})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, sk := range res.Skipped {
		keys = append(keys, sk.Key)
	}
	if strings.Join(keys, ",") != "syncs,watchBreak" {
		t.Errorf("skipped %v, want syncs and watchBreak", keys)
	}
	var faults []string
	for _, e := range res.Trace.Events() {
		if e.Op == "fault" {
			faults = append(faults, e.Detail)
		}
	}
	if strings.Join(faults, ";") != "next 1 restores fail" {
		t.Errorf("faults traced: %q, want only the mode's", faults)
	}
	if restoreErr == nil {
		t.Error("the restore after the fault succeeded")
	}
}

// An expect block with within is re-checked, until it holds, for the parts
// the proxy under test is checked for only: a skipped part (syncs, which
// counts proxysim's runner) does not hold it pending.
func TestReplayRechecksOnlyWhatItChecks(t *testing.T) {
	s, err := scenarios.Parse("within.yaml", []byte(`name: within
proxy: {mode: iptables, version: v1.34.0}
timeline:
  - at: 1s
    expect:
      within: 2s
      dataplaneOps: {atLeast: 1}
      syncs: {count: 99}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	proxy := func(ctx context.Context, env bubble.ProxyEnv) error {
		select {
		case <-time.After(1500 * time.Millisecond):
			if err := env.IPTables.Restore("*nat\nCOMMIT\n"); err != nil {
				return err
			}
		case <-ctx.Done():
		}
		<-ctx.Done()
		return nil
	}
	res, err := bubble.Replay(t, s, proxy, bubble.Options{SkipUnsupported: true})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Passed() || len(res.Skipped) != 1 || res.Skipped[0].Key != "syncs" {
		t.Errorf("want dataplaneOps to hold at the proxy's write and syncs skipped:\n%s", res.Report())
	}
}
