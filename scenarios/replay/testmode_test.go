package replay_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"k8s.io/utils/clock"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/replay"
	"github.com/proxysim/proxysim/sim"
	"github.com/proxysim/proxysim/sim/proxy"
)

// portsMode is a throwaway proxy mode, registered from this test file only:
// its backend programs nothing and remembers the service ports of the last
// sync, its snapshot lists them sorted, and its golden keys are `ports:` and
// `portsFile:`. The scenario core knows nothing of it.
type portsMode struct{}

func init() { scenarios.RegisterMode(portsMode{}) }

func (portsMode) Name() string                       { return "ports" }
func (portsMode) NewSettings() scenarios.Settings    { return &portsSettings{} }
func (portsMode) Actions() []func() scenarios.Action { return nil }
func (portsMode) Faults() []func() scenarios.Action  { return nil }
func (portsMode) Expectations() []func() scenarios.Expectation {
	return []func() scenarios.Expectation{func() scenarios.Expectation { return &portsExpect{} }}
}

func (portsMode) Fake(s *scenarios.Scenario, _ clock.PassiveClock) (scenarios.Dataplane, error) {
	return &portsDataplane{set: s.Proxy.Settings.(*portsSettings)}, nil
}

// portsSettings is the mode's one proxy field.
type portsSettings struct {
	ListEndpoints bool `yaml:"listEndpoints"`
	Src           scenarios.Src
}

func (*portsSettings) Validate(*scenarios.Validator) {}

type portsDataplane struct {
	set   *portsSettings
	ports []string
}

func (d *portsDataplane) Name() string { return "fake" }
func (d *portsDataplane) Close() error { return nil }

func (d *portsDataplane) NewBackend(*sim.World) (proxy.Backend, error) { return d, nil }

func (d *portsDataplane) Sync(s *proxy.SyncState) error {
	d.ports = d.ports[:0]
	for name, sp := range s.Services {
		line := fmt.Sprintf("%s %s %s:%d", name, sp.Protocol, sp.ClusterIP, sp.Port)
		if d.set.ListEndpoints {
			line += fmt.Sprintf(" endpoints=%d", len(s.Endpoints[name]))
		}
		d.ports = append(d.ports, line)
	}
	sort.Strings(d.ports)
	return nil
}

func (d *portsDataplane) Snapshot() (string, error) { return strings.Join(d.ports, "\n") + "\n", nil }

type portsExpect struct {
	Ports     *string `yaml:"ports"`
	PortsFile string  `yaml:"portsFile"`
	Src       scenarios.Src
}

func (e *portsExpect) golden() scenarios.Golden {
	return scenarios.Golden{Key: "ports", FileKey: "portsFile", Inline: e.Ports, File: e.PortsFile, Src: e.Src}
}
func (e *portsExpect) Validate(v *scenarios.Validator) { e.golden().Validate(v) }
func (e *portsExpect) Check(r *replay.Run)             { r.CheckGolden(e.golden(), nil) }

const portsScenario = "../testdata/modes/ports.yaml"

func TestAModePlugsInFromOutsideTheCore(t *testing.T) {
	s, err := scenarios.Load(portsScenario)
	if err != nil {
		t.Fatal(err)
	}
	res, err := replay.Replay(s, replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Passed() || res.Checks != 2 {
		var b strings.Builder
		replay.Report(&b, res, true)
		t.Fatalf("want 2 passing checks:\n%s", b.String())
	}
}

func TestAModesGoldenFailsWhenWrong(t *testing.T) {
	src, err := os.ReadFile(portsScenario)
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(src), "endpoints=2\n  - at: 2s", "endpoints=3\n  - at: 2s", 1)
	s, err := scenarios.Parse(portsScenario, []byte(bad), os.DirFS(filepath.Dir(portsScenario)))
	if err != nil {
		t.Fatal(err)
	}
	res, err := replay.Replay(s, replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Failures) != 1 {
		t.Fatalf("want one failure, got %v", res.Failures)
	}
	f := res.Failures[0]
	if f.What != "ports" || f.Pos.Path != "timeline[0].expect.ports" || f.Pos.Line != 29 {
		t.Errorf("failure at %s line %d (%s); want timeline[0].expect.ports, line 29", f.Pos.Path, f.Pos.Line, f.What)
	}
	if !strings.Contains(f.Expected, "endpoints=3") || !strings.Contains(f.Got, "endpoints=2") {
		t.Errorf("expected %q, got %q", f.Expected, f.Got)
	}
}

// --update rewrites a mode's golden file through the scenario's folder, as
// it does IPVS's.
func TestAModesGoldenFileIsUpdated(t *testing.T) {
	dir := t.TempDir()
	src, err := os.ReadFile(portsScenario)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "ports.yaml")
	if err := os.WriteFile(file, src, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ports.golden"), []byte("stale\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := scenarios.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	res, err := replay.Replay(s, replay.Options{Update: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Updated) != 1 {
		t.Fatalf("updated %v; want the golden file", res.Updated)
	}
	got, _ := os.ReadFile(filepath.Join(dir, "ports.golden"))
	want, _ := os.ReadFile("../testdata/modes/ports.golden")
	if string(got) != string(want) {
		t.Errorf("golden rewritten to %q; want %q", got, want)
	}
}

// Each mode has its own proxy fields: IPVS's are unknown to the ports mode,
// and the ports mode's to IPVS.
func TestModesOwnTheirSettings(t *testing.T) {
	for _, tc := range []struct{ mode, field string }{{"ports", "scheduler"}, {"ipvs", "listEndpoints"}} {
		text := fmt.Sprintf("name: x\nproxy: {mode: %s, version: v1.34.0, %s: rr}\ntimeline: [{at: 0s, note: n}]\n", tc.mode, tc.field)
		_, err := scenarios.Parse("x.yaml", []byte(text), nil)
		var ps scenarios.Problems
		if !errors.As(err, &ps) || ps[0].Path != "proxy."+tc.field || !strings.Contains(ps[0].Msg, "unknown field") {
			t.Errorf("mode %s with %s: %v; want an unknown field", tc.mode, tc.field, err)
		}
	}
}
