package report

import (
	"strings"
	"testing"

	"github.com/proxysim/proxysim/scenarios"
)

// hourOfChurn is the library's churn-MODE scenario with its timeline
// replaced by one virtual hour of churn at 10 changes a second: an
// endpoint of web flips ready every 100ms from 1s to 1h0m1s.
func hourOfChurn(tb testing.TB, mode string) *scenarios.Scenario {
	tb.Helper()
	src, err := scenarios.ReadLibraryFile("churn-" + mode + ".yaml")
	if err != nil {
		tb.Fatal(err)
	}
	text := string(src)
	i := strings.Index(text, "\ntimeline:\n")
	if i < 0 {
		tb.Fatal("churn-" + mode + ".yaml has no timeline")
	}
	text = strings.Replace(text[:i], "name: churn-"+mode, "name: churn-hour-"+mode, 1) + `
timeline:
  - at: 1s
    churn: {namespace: default, name: web-abc, endpoint: 10.244.3.4, count: 36000, every: 100ms}
  - at: 1h0m1s
    expect:
      syncs: {atLeast: 3000}
`
	s, err := scenarios.Parse("churn-hour-"+mode+".yaml", []byte(text), scenarios.Library())
	if err != nil {
		tb.Fatal(err)
	}
	return s
}
