package scenarios

import (
	"errors"
	"strings"
	"testing"
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
