package main

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/proxysim/proxysim/scenarios"
)

// Every line of `list` fits COLUMNS (but for a name longer than the line:
// names are never cut), names each bundled scenario, and a description cut
// short says so.
func TestListFitsTheWidth(t *testing.T) {
	for _, width := range []int{60, 80, 120} {
		t.Setenv("COLUMNS", strconv.Itoa(width))
		code, out, errs := runCLI("list")
		if code != exitPass {
			t.Fatalf("code %d: %s", code, errs)
		}
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		names := scenarios.LibraryNames()
		if len(lines) != len(names) {
			t.Fatalf("COLUMNS=%d: %d lines for %d scenarios", width, len(lines), len(names))
		}
		cut := 0
		for i, l := range lines {
			if n := utf8.RuneCountInString(l); n > width && l != names[i] {
				t.Errorf("COLUMNS=%d: line of %d columns: %s", width, n, l)
			}
			if l != names[i] && !strings.HasPrefix(l, names[i]+"  ") {
				t.Errorf("line %d does not start with %s: %s", i, names[i], l)
			}
			if strings.HasSuffix(l, "…") {
				cut++
			}
		}
		if cut == 0 {
			t.Errorf("COLUMNS=%d: no description was cut", width)
		}
	}
	// Off a terminal and without COLUMNS: 80.
	if w := outputWidth(&bytes.Buffer{}, ""); w != defaultWidth {
		t.Errorf("width off a terminal: %d", w)
	}
	if w := outputWidth(&bytes.Buffer{}, "zero"); w != defaultWidth {
		t.Errorf("width with a bad COLUMNS: %d", w)
	}
}

func TestListVerbosePrintsWholeDescriptions(t *testing.T) {
	t.Setenv("COLUMNS", "72")
	code, out, _ := runCLI("list", "-v")
	if code != exitPass {
		t.Fatalf("code %d", code)
	}
	s, err := scenarios.LoadLibrary("churn-ipvs")
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(out, "\nchurn-ipvs\n")
	if i < 0 {
		t.Fatalf("no churn-ipvs line:\n%s", out)
	}
	var words []string
	for _, l := range strings.Split(out[i+len("\nchurn-ipvs\n"):], "\n") {
		if !strings.HasPrefix(l, "    ") {
			break
		}
		if utf8.RuneCountInString(l) > 72 {
			t.Errorf("line over 72 columns: %s", l)
		}
		words = append(words, strings.Fields(l)...)
	}
	if got, want := strings.Join(words, " "), strings.Join(strings.Fields(s.Description), " "); got != want {
		t.Errorf("-v description:\n%s\nwant\n%s", got, want)
	}
}

func TestClipCutsAtAWordAndMarksTheCut(t *testing.T) {
	for _, c := range []struct {
		in    string
		width int
		want  string
	}{
		{"short", 10, "short"},
		{"one two three four", 12, "one two…"},
		{"abcdefghijklmnop", 8, "abcdefg…"},
		{"≤≤≤≤ ≥≥≥≥", 6, "≤≤≤≤…"},
	} {
		if got := clip(c.in, c.width); got != c.want {
			t.Errorf("clip(%q, %d) = %q, want %q", c.in, c.width, got, c.want)
		}
	}
}

// The first screen names what the engine runs: the three modes, the
// controllers and ingress-nginx, and where to learn what this host can drive.
func TestRootHelpDescribesTheModesAndControllers(t *testing.T) {
	code, out, _ := runCLI("--help")
	if code != exitPass {
		t.Fatalf("code %d", code)
	}
	for _, want := range []string{"iptables", "nftables", "IPVS", "EndpointSlice and Endpoints controllers", "ingress-nginx", "proxysim doctor", "--dataplane netns", "--dataplane vm"} {
		if !strings.Contains(out, want) {
			t.Errorf("root help lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "IPVS proxier) in virtual time") {
		t.Errorf("root help still describes the IPVS proxier alone:\n%s", out)
	}
}
