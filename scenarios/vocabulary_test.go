package scenarios

import (
	"errors"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
)

// Bad uses of the runner's vocabulary are refused at load, at the field.
func TestRunnerVocabularyRefusesBadInput(t *testing.T) {
	cases := []struct{ name, yaml, want string }{
		{"retryAfter on the cooldown runner", `
name: x
proxy: {version: v1.34.0}
timeline:
  - at: 1s
    retryAfter: 5s
`, "x.yaml:6:17: timeline[0].retryAfter: the cooldown runner of kube-proxy v1.34.0 has no RetryAfter"},
		{"burstRuns on the cooldown runner", `
name: x
proxy: {version: v1.36.3, burstRuns: 3}
timeline:
  - {at: 1s, run: true}
`, "x.yaml:3:38: proxy.burstRuns: the cooldown runner of kube-proxy v1.36.3 has no burst"},
		{"burstRuns zero", `
name: x
proxy: {version: v1.33.0, burstRuns: 0}
timeline:
  - {at: 1s, run: true}
`, "x.yaml:3:38: proxy.burstRuns: want at least 1 run in a burst, got 0"},
		{"run false", `
name: x
proxy: {version: v1.33.0}
timeline:
  - {at: 1s, run: false}
`, "x.yaml:5:19: timeline[0].run: run: false asks for nothing"},
		{"run after stop", `
name: x
proxy: {version: v1.33.0}
timeline:
  - {at: 1s, stop: true}
  - {at: 2s, run: true}
`, "x.yaml:6:19: timeline[1].run: the runner was stopped by an earlier stop step"},
		{"a fault of no syncs", `
name: x
proxy: {version: v1.33.0}
timeline:
  - {at: 1s, fault: {syncs: 0}}
`, "x.yaml:5:29: timeline[0].fault.syncs: want at least 1 failing sync, got 0"},
		{"nextRun with nothing to check", `
name: x
proxy: {version: v1.33.0}
timeline:
  - {at: 1s, expect: {nextRun: {reason: retry}}}
`, "x.yaml:5:32: timeline[0].expect.nextRun: say what to expect"},
		{"nextRun in the past", `
name: x
proxy: {version: v1.33.0}
timeline:
  - {at: 2s, expect: {nextRun: {at: 1s}}}
`, "x.yaml:5:37: timeline[0].expect.nextRun.at: the next run cannot be at 1s, before this step at 2s"},
		{"nextRun with an unknown reason", `
name: x
proxy: {version: v1.33.0}
timeline:
  - {at: 2s, expect: {nextRun: {at: 3s, reason: soon}}}
`, "x.yaml:5:49: timeline[0].expect.nextRun.reason: want periodic, retry, deferred or request"},
		{"a bad cost in the list", `
name: x
proxy: {version: v1.33.0, syncCost: [1s, fast]}
timeline:
  - {at: 1s, run: true}
`, "x.yaml:3:42: proxy.syncCost[1]: want a duration"},
		{"an empty cost list", `
name: x
proxy: {version: v1.33.0}
timeline:
  - {at: 1s, syncCost: []}
`, "x.yaml:5:24: timeline[0].syncCost: want at least one duration"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("x.yaml", []byte(c.yaml), nil)
			var ps Problems
			if !errors.As(err, &ps) {
				t.Fatalf("Parse = %v; want problems", err)
			}
			if !strings.HasPrefix(ps[0].Error(), c.want) {
				t.Fatalf("first problem:\n got  %s\n want %s...\nall:\n%s", ps[0].Error(), c.want, ps.Error())
			}
		})
	}
}

// An EndpointSlice port without a name or protocol gets the API server's
// defaults ("" and TCP), so that it matches a service port written the same
// way.
func TestSlicePortDefaults(t *testing.T) {
	s, err := Parse("x.yaml", []byte(`name: x
proxy: {version: v1.36.3}
objects:
  - apiVersion: discovery.k8s.io/v1
    kind: EndpointSlice
    metadata: {name: web-1, labels: {kubernetes.io/service-name: web}}
    addressType: IPv4
    ports: [{port: 8080}]
    endpoints: [{addresses: [10.244.1.2]}]
timeline: [{at: 1s, note: n}]
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	sl, ok := s.Initial[0].Obj.(*discovery.EndpointSlice)
	if !ok {
		t.Fatalf("got %T", s.Initial[0].Obj)
	}
	p := sl.Ports[0]
	if p.Name == nil || *p.Name != "" || p.Protocol == nil || *p.Protocol != v1.ProtocolTCP {
		t.Fatalf("port %+v: want name \"\" and protocol TCP", p)
	}
}
