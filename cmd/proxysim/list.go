package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/proxysim/proxysim/scenarios"
)

// defaultWidth is the width `list` fits off a terminal (a pipe, a file, CI's
// log) when COLUMNS does not say otherwise.
const defaultWidth = 80

// nameColumn bounds the names' column: longer names push their own line's
// description right rather than every line's.
const nameColumn = 32

// minDescription is the least room worth giving a description: less, and the
// line holds the name alone.
const minDescription = 12

func newList(stdout io.Writer) *cobra.Command {
	var verbose bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the bundled scenarios",
		Long: `list prints each bundled scenario's name and the first sentence of its
description, each line cut to the terminal's width (COLUMNS when set, else
the terminal's own width, else 80). -v prints every description whole,
wrapped to the same width.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			width := outputWidth(stdout, os.Getenv("COLUMNS"))
			names := scenarios.LibraryNames()
			col := 0
			for _, n := range names {
				col = max(col, min(utf8.RuneCountInString(n), nameColumn))
			}
			for _, name := range names {
				description, err := libraryDescription(name)
				if err != nil {
					return fail(exitCannotRun, err)
				}
				if verbose {
					fmt.Fprintln(stdout, name)
					for _, l := range wrap(strings.Join(strings.Fields(description), " "), width-4) {
						fmt.Fprintln(stdout, "    "+l)
					}
					continue
				}
				// The name is never cut: it is what the reader types next.
				prefix := fmt.Sprintf("%-*s  ", col, name)
				room := width - utf8.RuneCountInString(prefix)
				if room < minDescription {
					fmt.Fprintln(stdout, name)
					continue
				}
				fmt.Fprintln(stdout, prefix+clip(firstLine(description), room))
			}
			return nil
		},
	}
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "print every description whole, wrapped to the width")
	return cmd
}

// outputWidth is how many columns a line written to w may take: COLUMNS
// (as the shell exports it) wins, then the terminal's width, then 80.
func outputWidth(w io.Writer, columns string) int {
	if n, err := strconv.Atoi(strings.TrimSpace(columns)); err == nil && n > 0 {
		return n
	}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		if n, _, err := term.GetSize(int(f.Fd())); err == nil && n > 0 {
			return n
		}
	}
	return defaultWidth
}

// clip cuts s to width columns (one per rune), at a word boundary when one
// is near, marking the cut with an ellipsis.
func clip(s string, width int) string {
	if utf8.RuneCountInString(s) <= width {
		return s
	}
	if width < 1 {
		return ""
	}
	r := []rune(s)[:width-1]
	if i := lastSpace(r); i > 0 && len(r)-i < 16 {
		r = r[:i]
	}
	return strings.TrimRight(string(r), " ,;:") + "…"
}

// wrap breaks s into lines of at most width columns between words (a word
// longer than the width stands alone on its line).
func wrap(s string, width int) []string {
	width = max(width, 20)
	var lines []string
	var cur strings.Builder
	n := 0
	for _, w := range strings.Fields(s) {
		wl := utf8.RuneCountInString(w)
		if n > 0 && n+1+wl > width {
			lines = append(lines, cur.String())
			cur.Reset()
			n = 0
		}
		if n > 0 {
			cur.WriteByte(' ')
			n++
		}
		cur.WriteString(w)
		n += wl
	}
	if n > 0 {
		lines = append(lines, cur.String())
	}
	return lines
}

func lastSpace(r []rune) int {
	for i := len(r) - 1; i >= 0; i-- {
		if r[i] == ' ' {
			return i
		}
	}
	return -1
}

// libraryDescription is a bundled scenario's description: loaded (which
// checks it), but a large one only read, as it takes minutes to load.
func libraryDescription(name string) (string, error) {
	if scenarios.IsLarge(name) {
		m, err := scenarios.LibraryMetaOf(name)
		return m.Description, err
	}
	s, err := scenarios.LoadLibrary(name)
	if err != nil {
		return "", err
	}
	return s.Description, nil
}
