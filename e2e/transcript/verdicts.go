package transcript

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Verdict is what became of one library scenario in a bubble comparison:
// "identical (N syncs)", or "listed: REASON" when it cannot be expressed
// for upstream's code, or "not here: REASON" when another module compares
// it. How many bubble runs raced at an instant is left out: that varies
// from run to run, and is logged.
type Verdict struct {
	Scenario, Verdict string
}

// CheckVerdicts pins a bubble comparison's table: the rows must equal the
// golden file's, so a scenario that drops out of the comparison, turns
// from identical to listed, or changes its number of syncs fails the test
// (docs/explanation/bubble.md's results table is this file, counted). With update the
// file is rewritten instead; review the diff.
func CheckVerdicts(t testing.TB, golden, title string, rows []Verdict, update bool) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n", title)
	identical, listed := 0, 0
	for _, r := range rows {
		if strings.HasPrefix(r.Verdict, "identical") {
			identical++
		} else {
			listed++
		}
	}
	fmt.Fprintf(&b, "# %d scenarios: %d identical, %d listed or compared elsewhere\n", len(rows), identical, listed)
	for _, r := range rows {
		fmt.Fprintf(&b, "%s\t%s\n", r.Scenario, r.Verdict)
	}
	got := b.String()
	if update {
		if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	data, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (write it with -update-bubble, then review it)", err)
	}
	if want := string(data); got != want {
		t.Errorf("the comparison's verdicts are not those pinned in %s (rerun with -update-bubble if the change is meant, and update the table in docs/explanation/bubble.md):\n%s", golden, verdictDiff(want, got))
	}
}

// verdictDiff lists the rows only one side has.
func verdictDiff(pinned, now string) string {
	count := func(s string) map[string]int {
		m := map[string]int{}
		for _, l := range strings.Split(s, "\n") {
			m[l]++
		}
		return m
	}
	p, n := count(pinned), count(now)
	var b strings.Builder
	for _, l := range strings.Split(pinned, "\n") {
		if n[l] == 0 {
			b.WriteString("- pinned: " + l + "\n")
		} else {
			n[l]--
		}
	}
	for _, l := range strings.Split(now, "\n") {
		if p[l] == 0 {
			b.WriteString("+ now:    " + l + "\n")
		} else {
			p[l]--
		}
	}
	return b.String()
}
