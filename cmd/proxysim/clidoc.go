package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// docsDefault is a flag annotation naming its default in the generated
// reference when the real default depends on the machine (GOMAXPROCS).
const docsDefault = "proxysim_docs_default"

// cliReferenceFile is the generated reference, relative to the repository.
const cliReferenceFile = "docs/reference/cli.md"

// writeCLIReference writes the command-line reference (docs/reference/cli.md)
// from the command tree itself, so that the page cannot drift from the code:
// every command, its synopsis, its long description and its flags.
func writeCLIReference(w io.Writer, root *cobra.Command) {
	fmt.Fprint(w, `# Command-line reference

<!-- Generated from cmd/proxysim's cobra commands by `+"`make docs`"+`; do not edit.
     cmd/proxysim's TestCLIReferenceIsCurrent fails when this file is stale. -->

For whoever has `+"`proxysim`"+` in front of them and wants the exact
command or flag. Every command and flag is here, as `+"`proxysim CMD --help`"+`
prints it; what each exit code means, with examples, is in
[exit codes](exit-codes.md). A scenario is a YAML file, or the name of a
bundled one ([the library](library.md)); its format is
[the scenario format](../scenario-format.md).

`)
	var cmds []*cobra.Command
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" {
			return
		}
		cmds = append(cmds, c)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	fmt.Fprintln(w, "| command | what it does |")
	fmt.Fprintln(w, "|---|---|")
	for _, c := range cmds {
		fmt.Fprintf(w, "| [`%s`](#%s) | %s |\n", c.CommandPath(), anchorOf(c.CommandPath()), cell(c.Short))
	}
	for _, c := range cmds {
		fmt.Fprintf(w, "\n## %s\n\n", c.CommandPath())
		desc := c.Long
		if desc == "" {
			desc = c.Short
		}
		fmt.Fprintf(w, "%s\n\n", strings.TrimSpace(desc))
		use := c.UseLine()
		if !c.Runnable() && c.HasAvailableSubCommands() {
			use = c.CommandPath() + " COMMAND"
		}
		fmt.Fprintf(w, "```text\n%s\n```\n", use)
		if c.Example != "" {
			fmt.Fprintf(w, "\nExamples:\n\n```text\n%s\n```\n", strings.TrimRight(c.Example, "\n"))
		}
		writeFlags(w, "Flags", c.NonInheritedFlags())
		writeFlags(w, "Inherited flags", c.InheritedFlags())
	}
}

func writeFlags(w io.Writer, title string, fs *pflag.FlagSet) {
	var rows []string
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden || f.Name == "help" {
			return
		}
		typ, usage := pflag.UnquoteUsage(f)
		name := "`--" + f.Name
		if f.Shorthand != "" {
			name = "`-" + f.Shorthand + "`, " + name
		}
		if typ != "" {
			name += " " + typ
		}
		name += "`"
		def := f.DefValue
		if d, ok := f.Annotations[docsDefault]; ok && len(d) > 0 {
			def = d[0]
		}
		switch {
		case def == "" || def == "[]" || (typ == "" && def == "false"):
			def = ""
		default:
			def = "`" + def + "`"
		}
		rows = append(rows, fmt.Sprintf("| %s | %s | %s |", name, def, cell(usage)))
	})
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%s:\n\n| flag | default | meaning |\n|---|---|---|\n%s\n", title, strings.Join(rows, "\n"))
}

// cell makes text safe inside a Markdown table cell.
func cell(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	return strings.ReplaceAll(s, "|", `\|`)
}

// anchorOf is GitHub's anchor for a heading made of plain words.
func anchorOf(heading string) string {
	return strings.ReplaceAll(strings.ToLower(heading), " ", "-")
}
