package replay_test

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/replay"
)

// eventCounter is a throwaway controller, registered from this test file
// only, to prove a consumer plugs in under `controllers:` without touching
// the core: it counts the Service events it hears, and its expectation
// `heardServices: N` checks the count.
type eventCounter struct{}

func init() { scenarios.RegisterController(eventCounter{}) }

func (eventCounter) Key() string                               { return "counter" }
func (eventCounter) NewSettings() scenarios.ControllerSettings { return &counterSettings{} }
func (eventCounter) Actions() []func() scenarios.Action        { return nil }
func (eventCounter) Faults() []func() scenarios.Action         { return nil }
func (eventCounter) Expectations() []func() scenarios.Expectation {
	return []func() scenarios.Expectation{func() scenarios.Expectation { return &heardExpect{} }}
}

type counterSettings struct {
	Name string `yaml:"name"`
	Src  scenarios.Src
}

func (s *counterSettings) Validate(v *scenarios.Validator) {
	if s.Name == "" {
		s.Name = "counter"
	}
}

func (s *counterSettings) Attach(r *replay.Run) error {
	c := &counter{name: s.Name}
	r.SetController("counter", c)
	return r.World().Subscribe(c)
}

type counter struct {
	name  string
	heard int
}

func (c *counter) Name() string                                          { return c.name }
func (c *counter) Kinds() []string                                       { return []string{"Service"} }
func (c *counter) OnAdd(string, runtime.Object) error                    { c.heard++; return nil }
func (c *counter) OnUpdate(string, runtime.Object, runtime.Object) error { c.heard++; return nil }
func (c *counter) OnDelete(string, runtime.Object) error                 { c.heard++; return nil }
func (c *counter) OnSynced(string) error                                 { return nil }

type heardExpect struct {
	HeardServices *int `yaml:"heardServices"`
	Src           scenarios.Src
}

func (e *heardExpect) Validate(v *scenarios.Validator) {
	if e.HeardServices != nil && !v.Enabled("counter") {
		v.Errorf(e.Src.At("heardServices"), "needs controllers: {counter: {}}")
	}
}

func (e *heardExpect) Check(r *replay.Run) {
	if e.HeardServices == nil {
		return
	}
	c := r.Controller("counter").(*counter)
	if c.heard != *e.HeardServices {
		r.Fail(e.Src.At("heardServices"), "heardServices", fmt.Sprint(*e.HeardServices), fmt.Sprint(c.heard))
	}
}

const counterScenario = `name: counter
proxy: {version: v1.34.0}
controllers:
  counter: {name: %s}
objects:
  - {apiVersion: v1, kind: Service, metadata: {name: web}, spec: {clusterIP: 10.96.0.10, ports: [{port: 80}]}}
timeline:
  - at: 1s
    delete: {kind: Service, namespace: default, name: web}
  - at: 2s
    expect:
      heardServices: %d
`

func TestAControllerPlugsIn(t *testing.T) {
	for _, tc := range []struct {
		want int
		pass bool
	}{{2, true}, {3, false}} {
		s, err := scenarios.Parse("counter.yaml", []byte(fmt.Sprintf(counterScenario, "svc-counter", tc.want)), nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := replay.Replay(s, replay.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Passed() != tc.pass {
			t.Fatalf("heardServices %d: passed %v, want %v: %v", tc.want, res.Passed(), tc.pass, res.Failures)
		}
		if !strings.Contains(string(res.Trace.JSONL()), "to svc-counter") {
			t.Error("the trace does not show the controller's deliveries")
		}
	}
	// Its expectation without the controller, and an unknown controller,
	// are refused at load.
	_, err := scenarios.Parse("x.yaml", []byte("name: x\nproxy: {version: v1.34.0}\ncontrollers: {countr: {}}\ntimeline:\n  - at: 1s\n    expect: {heardServices: 1}\n"), nil)
	if err == nil || !strings.Contains(err.Error(), `x.yaml:3:15: controllers.countr: unknown controller "countr" (did you mean "counter"?)`) ||
		!strings.Contains(err.Error(), "x.yaml:6:29: timeline[0].expect.heardServices: needs controllers") {
		t.Errorf("problems:\n%v", err)
	}
}
