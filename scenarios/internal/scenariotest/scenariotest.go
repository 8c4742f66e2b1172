// Package scenariotest holds what the scenario packages' tests share:
// replaying a file, and the two verdicts every mode's library is held to,
// a pass with checks, and a failing twin that fails exactly where its
// "# want-fail: LINE WHAT at INSTANT" lines say.
package scenariotest

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/replay"
)

// Replay loads a scenario file and replays it on proxysim's engine; a file
// that does not load or replay stops the test.
func Replay(t testing.TB, file string) *replay.Result {
	t.Helper()
	s, err := scenarios.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	res, err := replay.Replay(s, replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// Passes replays each file in a subtest, which fails unless the replay
// passed and checked something.
func Passes(t *testing.T, files []string) {
	t.Helper()
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			res := Replay(t, f)
			if !res.Passed() || res.Checks == 0 {
				var b strings.Builder
				replay.Report(&b, res, true)
				t.Fatalf("want a pass with checks:\n%s", b.String())
			}
		})
	}
}

var wantFail = regexp.MustCompile(`(?m)^# want-fail: (\d+) (\S+) at (\S+)$`)

// FailsWhereDeclared replays each file in a subtest, which fails unless
// the replay's failures are exactly the file's "# want-fail: LINE WHAT at
// INSTANT" lines (at least one).
func FailsWhereDeclared(t *testing.T, files []string) {
	t.Helper()
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, m := range wantFail.FindAllStringSubmatch(string(src), -1) {
				want = append(want, fmt.Sprintf("%s %s at %s", m[1], m[2], m[3]))
			}
			if len(want) == 0 {
				t.Fatal("no # want-fail line")
			}
			var got []string
			res := Replay(t, f)
			for _, fl := range res.Failures {
				got = append(got, fmt.Sprintf("%d %s at %v", fl.Pos.Line, fl.What, fl.At))
			}
			sort.Strings(want)
			sort.Strings(got)
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				var b strings.Builder
				replay.Report(&b, res, false)
				t.Fatalf("failures differ\n got: %v\nwant: %v\n%s", got, want, b.String())
			}
		})
	}
}
