package replay

import (
	"strings"
	"testing"

	"github.com/proxysim/proxysim/scenarios"
)

func TestInitialSyncGatingScenario(t *testing.T) {
	s, err := scenarios.LoadLibrary("initial-sync-gating")
	if err != nil {
		t.Fatal(err)
	}
	res, err := Replay(s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Passed() {
		var b strings.Builder
		for _, f := range res.Failures {
			b.WriteString(f.String() + "\n" + f.Expected + "\n---\n" + f.Got + "\n")
		}
		t.Fatal(b.String())
	}
}
