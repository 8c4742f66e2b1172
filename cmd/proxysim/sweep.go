package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/proxysim/proxysim/scenarios/replay"
	"github.com/proxysim/proxysim/scenarios/sweep"
)

// sweepOutput is where and how a sweep or a merge writes its report.
type sweepOutput struct {
	format  string
	file    string
	plots   []string
	metric  string
	metrics []string // metric, read
}

func newSweep(stdout, stderr io.Writer, ld *loader) *cobra.Command {
	var out sweepOutput
	var sets []string
	var shardArg string
	var workers, maxEvents int
	var maxMemoryMiB int64
	cmd := &cobra.Command{
		Use:   "sweep FILE|NAME --set PATH=V1,V2,... [--set ...]",
		Short: "Replay one scenario over the cross product of settings; tabulate and plot",
		Long: `sweep replays a scenario once per combination of the values given with
--set (each a dotted path into the scenario document, such as
proxy.minSyncPeriod or timeline[2].at, and its values separated by commas),
in parallel on GOMAXPROCS workers, on the fake dataplane. Each point is a
deterministic replay; the table lists the points in order (the last --set
varies fastest): syncs, dataplane operations, network programming latency
(count, p50, p99, max), failed expectations and the first one.

--shard I/N runs only the points whose index is I modulo N (--shard /N
takes I from JOB_COMPLETION_INDEX, as a Kubernetes Indexed Job sets it);
'proxysim sweep merge' joins the shards' JSON reports.

Exit codes: 0 the sweep ran (failed expectations are results, in the
table), 2 invalid input (nothing was run), 3 a point could not run (its row
says why) or an output could not be written.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.check(); err != nil {
				return err
			}
			if workers < 1 {
				return fail(exitInvalid, fmt.Errorf("--workers %d: must be at least 1", workers))
			}
			if maxEvents <= 0 {
				return fail(exitInvalid, fmt.Errorf("--max-events %d: must be a positive number of events", maxEvents))
			}
			if maxMemoryMiB <= 0 || maxMemoryMiB > 1<<40 {
				return fail(exitInvalid, fmt.Errorf("--max-memory %d: must be between 1 and %d MiB", maxMemoryMiB, int64(1)<<40))
			}
			shard, err := parseShard(shardArg, os.Getenv("JOB_COMPLETION_INDEX"))
			if err != nil {
				return fail(exitInvalid, err)
			}
			var axes []sweep.Axis
			for _, s := range sets {
				a, err := sweep.ParseAxis(s)
				if err != nil {
					return fail(exitInvalid, err)
				}
				axes = append(axes, a)
			}
			base, err := ld.loadOne(args[0])
			if err != nil {
				return fail(exitInvalid, err)
			}
			sw, err := sweep.New(base, axes)
			if err != nil {
				return fail(exitInvalid, err)
			}
			ro := replay.Options{MaxEvents: maxEvents, MaxMemory: maxMemoryMiB << 20}
			debug.SetMemoryLimit(replay.GCLimit(ro.MaxMemory))
			prog := newProgress(stderr, isTerminal, time.Now)
			rep := sw.Run(shard, sweep.RunOptions{Replay: ro, Workers: workers, Progress: func(done, total int) {
				prog.show(func() string { return sweepLine(base.Name, done, total) })
			}})
			prog.done()
			if err := out.write(rep, stdout); err != nil {
				return err
			}
			if n := rep.Errors(); n > 0 {
				return fail(exitCannotRun, fmt.Errorf("%d of %d points could not run (see their rows)", n, len(rep.Ran)))
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&sets, "set", nil, "PATH=V1,V2,...: a field of the scenario document (dotted, such as proxy.minSyncPeriod) and the values to sweep it over; repeat for a cross product")
	cmd.Flags().StringVar(&shardArg, "shard", "", "I/N: run only the points whose index is I modulo N; /N (or $JOB_COMPLETION_INDEX/N, unexpanded) reads I from JOB_COMPLETION_INDEX")
	cmd.Flags().IntVar(&workers, "workers", runtime.GOMAXPROCS(0), "points replayed at once")
	// The default depends on the machine; the generated CLI reference says so.
	_ = cmd.Flags().SetAnnotation("workers", docsDefault, []string{"GOMAXPROCS"})
	cmd.Flags().IntVar(&maxEvents, "max-events", replay.DefaultMaxEvents, "stop a point's replay (its row says so; exit 3) after this many trace events and clock steps")
	cmd.Flags().Int64Var(&maxMemoryMiB, "max-memory", replay.DefaultMaxMemory>>20, "stop a point's replay when the process's live heap (shared by the points replaying at once) passes this many MiB")
	out.flags(cmd)

	merge := &cobra.Command{
		Use:   "merge SHARD.json...",
		Short: "Join sweep shards' JSON reports into one table and plot",
		Long: `merge joins the JSON reports of a sweep's shards into the report one
unsharded run writes (byte for byte). The shards must come from the same
scenario (name and source digest) and the same --set list, and together run
every point exactly once; otherwise merge exits 2.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.check(); err != nil {
				return err
			}
			var shards []*sweep.Report
			for _, name := range args {
				data, err := os.ReadFile(name)
				if err != nil {
					return fail(exitInvalid, err)
				}
				r, err := sweep.ReadReport(name, data)
				if err != nil {
					return fail(exitInvalid, err)
				}
				shards = append(shards, r)
			}
			rep, err := sweep.Merge(args, shards)
			if err != nil {
				return fail(exitInvalid, err)
			}
			return out.write(rep, stdout)
		},
	}
	cmd.AddCommand(merge)
	return cmd
}

// flags adds the output flags, for sweep and merge alike.
func (o *sweepOutput) flags(cmd *cobra.Command) {
	pf := cmd.PersistentFlags()
	pf.StringVar(&o.format, "format", "", "table format: text (aligned columns), csv or json (the report shards merge from); default: -o's extension (.json, .csv), else text")
	pf.StringVarP(&o.file, "output", "o", "", "write the table to FILE instead of standard output; FILE.json or FILE.csv picks that format")
	pf.StringArrayVar(&o.plots, "plot", nil, "write a plot to FILE: an SVG chart (.svg) or a self-contained HTML page with the chart and the table (.html)")
	pf.StringVar(&o.metric, "plot-metric", "p99", "the plot's y: "+strings.Join(sweep.Metrics, ", ")+"; several, separated by commas, draw a panel each (log y)")
}

// check refuses bad output flags, and settles the format: --format, else
// the one -o's extension names (a shard written as all.json must be JSON for
// merge to read it), else text.
func (o *sweepOutput) check() error {
	implied := formatOfFile(o.file)
	switch o.format {
	case "":
		o.format = cmp.Or(implied, "text")
	case "text", "csv", "json":
		if implied != "" && implied != o.format {
			return fail(exitInvalid, fmt.Errorf("--format %s conflicts with -o %s, which names a %s file: drop --format, or name the file to match", o.format, o.file, implied))
		}
	default:
		return fail(exitInvalid, fmt.Errorf("--format %q: want text, csv or json", o.format))
	}
	for _, p := range o.plots {
		if ext := filepath.Ext(p); ext != ".svg" && ext != ".html" {
			return fail(exitInvalid, fmt.Errorf("--plot %s: name an .svg or .html file", p))
		}
	}
	ms, err := sweep.ParseMetrics(o.metric)
	if err != nil {
		return fail(exitInvalid, err)
	}
	o.metrics = ms
	return nil
}

func (o *sweepOutput) write(rep *sweep.Report, stdout io.Writer) error {
	var table []byte
	switch o.format {
	case "csv":
		table = rep.CSV()
	case "json":
		table = rep.JSON()
	default:
		table = rep.Text()
	}
	if o.file == "" {
		if _, err := stdout.Write(table); err != nil {
			return fail(exitCannotRun, err)
		}
	} else if err := os.WriteFile(o.file, table, 0o644); err != nil {
		return fail(exitCannotRun, err)
	}
	for _, p := range o.plots {
		b := rep.Plot(o.metrics...)
		if filepath.Ext(p) == ".html" {
			b = rep.HTML(o.metrics...)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return fail(exitCannotRun, err)
		}
	}
	return nil
}

// formatOfFile is the table format a file name's extension asks for, or ""
// when it names none.
func formatOfFile(name string) string {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".json":
		return "json"
	case ".csv":
		return "csv"
	}
	return ""
}

// parseShard reads --shard: "" (the whole sweep), I/N, or /N with I from
// env (JOB_COMPLETION_INDEX), also written $JOB_COMPLETION_INDEX/N.
func parseShard(arg, env string) (sweep.Shard, error) {
	if arg == "" {
		return sweep.All, nil
	}
	is, ns, ok := strings.Cut(arg, "/")
	n, err := strconv.Atoi(ns)
	if !ok || err != nil || n < 1 {
		return sweep.Shard{}, fmt.Errorf("--shard %s: want I/N (or /N with JOB_COMPLETION_INDEX set), N a positive count", arg)
	}
	from := ""
	switch is {
	case "$JOB_COMPLETION_INDEX", "${JOB_COMPLETION_INDEX}", "$(JOB_COMPLETION_INDEX)":
		// The variable's name, left unexpanded (no shell, or a runtime
		// that does not expand $(VAR) in arguments): read it here.
		is = ""
	}
	if is == "" {
		if env == "" {
			return sweep.Shard{}, errors.New("--shard /" + ns + ": JOB_COMPLETION_INDEX is not set; give the shard as I/N")
		}
		is, from = env, " (JOB_COMPLETION_INDEX)"
	}
	i, err := strconv.Atoi(is)
	if err != nil || i < 0 || i >= n {
		return sweep.Shard{}, fmt.Errorf("--shard %s: shard index %q%s must be a number from 0 to %d", arg, is, from, n-1)
	}
	return sweep.Shard{Index: i, Count: n}, nil
}
