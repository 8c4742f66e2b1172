package main

import (
	"bytes"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
)

var updateDocs = flag.Bool("update-docs", false, "rewrite docs/reference/cli.md from the command tree (make docs)")

// TestCLIReferenceIsCurrent fails when docs/reference/cli.md is not what the
// command tree generates today: a command or flag was added, removed or
// reworded without `make docs`.
func TestCLIReferenceIsCurrent(t *testing.T) {
	var b bytes.Buffer
	writeCLIReference(&b, newRoot(io.Discard, io.Discard))
	file := filepath.Join("..", "..", cliReferenceFile)
	if *updateDocs {
		if err := os.WriteFile(file, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", cliReferenceFile)
		return
	}
	got, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v: run `make docs`", err)
	}
	if !bytes.Equal(got, b.Bytes()) {
		t.Errorf("%s is stale: run `make docs` and commit the result. Differences (-file +generated):\n%s", cliReferenceFile, cmp.Diff(strings.Split(string(got), "\n"), strings.Split(b.String(), "\n")))
	}
}

// TestCLIReferenceCoversEveryCommandAndFlag guards the generator itself: a
// command or flag it skipped would leave the reference incomplete while
// still "current".
func TestCLIReferenceCoversEveryCommandAndFlag(t *testing.T) {
	var b bytes.Buffer
	root := newRoot(io.Discard, io.Discard)
	writeCLIReference(&b, root)
	page := b.String()
	for _, want := range []string{"## proxysim replay\n", "## proxysim sweep merge\n", "## proxysim vm\n", "`--dataplane string`", "`-v`, `--verbose`", "`--workers int` | `GOMAXPROCS`", "`--strict`"} {
		if !strings.Contains(page, want) {
			t.Errorf("the reference lacks %q", want)
		}
	}
	var count func(c *cobra.Command) int
	count = func(c *cobra.Command) int {
		n := 0
		for _, sub := range c.Commands() {
			n += 1 + count(sub)
		}
		return n
	}
	n := count(root)
	if got := strings.Count(page, "\n## proxysim "); got != n {
		t.Errorf("the reference has %d subcommand sections, the tree %d commands", got, n)
	}
}
