package replay

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/proxysim/proxysim/sim/trace"
)

// Report writes a replay's result for a person: a PASS or FAIL line, the
// goldens --update rewrote, with verbose the whole trace, and for each
// failure what was expected, what happened, when, and the trace leading to
// it (a snapshot that differs as a line diff).
func Report(w io.Writer, res *Result, verbose bool) {
	s := res.Scenario
	status := "PASS"
	if !res.Passed() {
		status = "FAIL"
	}
	fmt.Fprintf(w, "%s %s (%s, %s, %v virtual in %v, %s dataplane)\n",
		status, s.Name, plural(res.Checks, "check"), plural(len(res.Runs), "sync"), s.Length(), res.Wall.Round(time.Millisecond), res.Env)
	for _, u := range res.Updated {
		fmt.Fprintf(w, "  updated %s\n", u)
	}
	if res.Cluster != nil {
		reportCluster(w, res.Cluster)
	}
	if verbose {
		for _, e := range res.Trace.Events() {
			fmt.Fprintln(w, "  "+trace.Line(e))
		}
	}
	reportFailures(w, res.Failures)
}

// reportFailures writes failures as Report does.
func reportFailures(w io.Writer, failures []Failure) {
	for _, f := range failures {
		fmt.Fprintf(w, "  %s:%d:%d: %s, at %v\n", f.File, f.Pos.Line, f.Pos.Column, f.Pos.Path, f.At)
		if strings.Contains(f.Expected, "\n") || strings.Contains(f.Got, "\n") {
			fmt.Fprintln(w, "    table differs (- expected, + got):")
			for _, l := range LineDiff(f.Expected, f.Got) {
				fmt.Fprintln(w, "    "+l)
			}
		} else {
			fmt.Fprintf(w, "    expected: %s\n    got:      %s\n", f.Expected, f.Got)
		}
		fmt.Fprintln(w, "    trace leading to it:")
		for _, e := range f.Context {
			fmt.Fprintln(w, "    "+trace.Line(e))
		}
	}
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// LineDiff is a minimal line diff (longest common subsequence), enough to
// show how two snapshots differ: each line prefixed "  ", "- " (expected
// only) or "+ " (got only). Trailing spaces do not count.
func LineDiff(a, b string) []string {
	x := strings.Split(strings.TrimRight(a, "\n"), "\n")
	y := strings.Split(strings.TrimRight(b, "\n"), "\n")
	n, m := len(x), len(y)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if strings.TrimRight(x[i], " ") == strings.TrimRight(y[j], " ") {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out []string
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && strings.TrimRight(x[i], " ") == strings.TrimRight(y[j], " "):
			out = append(out, "  "+x[i])
			i++
			j++
		case i < n && (j == m || lcs[i+1][j] >= lcs[i][j+1]):
			out = append(out, "- "+x[i])
			i++
		default:
			out = append(out, "+ "+y[j])
			j++
		}
	}
	return out
}
