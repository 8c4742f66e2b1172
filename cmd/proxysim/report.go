package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/proxysim/proxysim/scenarios/replay"
	"github.com/proxysim/proxysim/scenarios/report"
)

// newReport is `proxysim report`: one scenario's replay as a self-contained
// HTML timeline page.
func newReport(stdout io.Writer, ld *loader) *cobra.Command {
	var output, dataplane string
	var maxEvents, maxMarks int
	var maxMemoryMiB int64
	cmd := &cobra.Command{
		Use:   "report FILE|NAME -o PAGE.html",
		Short: "Replay one scenario and write its timeline as a self-contained HTML page",
		Long: `report replays one scenario, as replay does, and writes one HTML file that
needs nothing else to open (no network): an SVG timeline in virtual time,
a lane per consumer and kind of event (object events, Run() requests,
deferrals and what they wait for, runs as bars with their cost, dataplane
operations, controller writes, steps, checks with failures in red), zoom
and pan (wheel, drag, buttons, + - 0 and arrow keys), each event's details
on hover, and the dataplane (the mode's golden text) at any instant
clicked, and a table of the syncs: each one's duration and work, the parts
a cost profile made of it (kernel write, listing, compute), and the total
sync time. Long traces are drawn as counts per pixel column until zoomed in.
The exit code is replay's: 1 if an expectation failed (the page is written
anyway).`,
		Args: cobra.ExactArgs(1),
		PreRunE: func(cmd *cobra.Command, args []string) error {
			if output == "" {
				return fail(exitInvalid, fmt.Errorf("report needs -o PAGE.html (or -o - for stdout)"))
			}
			if maxEvents <= 0 {
				return fail(exitInvalid, fmt.Errorf("--max-events %d: must be a positive number of events", maxEvents))
			}
			if maxMemoryMiB <= 0 || maxMemoryMiB > 1<<40 {
				return fail(exitInvalid, fmt.Errorf("--max-memory %d: must be between 1 and %d MiB", maxMemoryMiB, int64(1)<<40))
			}
			if maxMarks <= 0 {
				return fail(exitInvalid, fmt.Errorf("--max-marks %d: must be a positive number of events", maxMarks))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			factory, list, err := ld.prepare(dataplane, args)
			if err != nil {
				return err
			}
			opts := replay.Options{Dataplane: factory, MaxEvents: maxEvents, MaxMemory: maxMemoryMiB << 20}
			debug.SetMemoryLimit(replay.GCLimit(opts.MaxMemory))
			tl, res, err := report.Replay(list[0], opts)
			if err != nil {
				return fail(exitCannotRun, err)
			}
			var page bytes.Buffer
			if err := report.Write(&page, tl, report.Config{MaxMarks: maxMarks}); err != nil {
				return fail(exitCannotRun, err)
			}
			if output == "-" {
				if _, err := stdout.Write(page.Bytes()); err != nil {
					return fail(exitCannotRun, err)
				}
			} else {
				if err := writeAtomically(output, page.Bytes()); err != nil {
					return fail(exitCannotRun, err)
				}
				// The page holds the details: here, the verdict and where.
				var verdict bytes.Buffer
				replay.Report(&verdict, res, false)
				first, _, _ := strings.Cut(verdict.String(), "\n")
				fmt.Fprintln(stdout, first)
				for _, f := range res.Failures {
					fmt.Fprintf(stdout, "  %s:%d:%d: %s, at %v\n", f.File, f.Pos.Line, f.Pos.Column, f.Pos.Path, f.At)
				}
				fmt.Fprintf(stdout, "wrote %s (%d KiB): %d lanes, %d trace events, %d dataplane snapshots\n", output, (page.Len()+1023)>>10, len(tl.Lanes), tl.Events, len(tl.Snapshots))
			}
			if !res.Passed() {
				return fail(exitFail, nil)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "the page to write (- for stdout)")
	cmd.Flags().StringVar(&dataplane, "dataplane", "fake", "dataplane to program: fake or netns (as replay)")
	cmd.Flags().StringVar(&netnsIPTables, "iptables", netnsIPTables, "with --dataplane netns, the iptables backend for mode iptables: nft or legacy")
	cmd.Flags().IntVar(&maxEvents, "max-events", replay.DefaultMaxEvents, "stop the replay (exit 3) after this many trace events and clock steps")
	cmd.Flags().Int64Var(&maxMemoryMiB, "max-memory", replay.DefaultMaxMemory>>20, "stop the replay (exit 3) when its live heap passes this many MiB")
	cmd.Flags().IntVar(&maxMarks, "max-marks", report.DefaultMaxMarks, "events the page holds one by one; past it the busiest lanes are thinned evenly (failures kept) and drawn from exact counts when zoomed out")
	return cmd
}

// writeAtomically writes data to file through a temporary file beside it,
// so a failed write leaves no half page.
func writeAtomically(file string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(file), "."+filepath.Base(file)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), file)
}
