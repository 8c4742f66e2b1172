package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/proxysim/proxysim/netns/vm"
	"github.com/proxysim/proxysim/scenarios"
	_ "github.com/proxysim/proxysim/scenarios/controllers"  // the Kubernetes controllers
	_ "github.com/proxysim/proxysim/scenarios/ingressnginx" // the ingress-nginx controller
	_ "github.com/proxysim/proxysim/scenarios/iptablesmode" // the iptables mode
	_ "github.com/proxysim/proxysim/scenarios/ipvsmode"     // the IPVS mode, the default
	_ "github.com/proxysim/proxysim/scenarios/nftablesmode" // the nftables mode
	"github.com/proxysim/proxysim/scenarios/replay"
)

// Exit codes.
const (
	exitPass      = 0
	exitFail      = 1 // an expectation failed
	exitInvalid   = 2 // invalid input: nothing was run
	exitCannotRun = 3 // could not run (dataplane unavailable, I/O) or a budget ran out
	exitInternal  = 4 // proxysim itself failed: a bug, never the input's fault
)

type codedError struct {
	code int
	err  error
}

func (e *codedError) Error() string { return e.err.Error() }

func fail(code int, err error) error { return &codedError{code: code, err: err} }

// run executes the CLI and returns the process exit code.
func run(args []string, stdout, stderr io.Writer) int {
	return execute(newRoot(stdout, stderr), args, stdout, stderr)
}

// execute runs a command tree and maps its outcome to an exit code.
func execute(root *cobra.Command, args []string, stdout, stderr io.Writer) (code int) {
	// A panic is proxysim's bug, not bad input: it must not exit 2 (Go's
	// own exit code for a panic) or bury the message in a stack trace.
	defer func() {
		if p := recover(); p != nil {
			fmt.Fprintf(stderr, "proxysim: internal error (a bug in proxysim, please report it with the scenario): %v\n", p)
			code = exitInternal
		}
	}()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.Execute()
	if err == nil {
		return exitPass
	}
	var ee *codedError
	if errors.As(err, &ee) {
		if ee.err != nil && ee.err.Error() != "" {
			fmt.Fprintln(stderr, ee.err)
		}
		return ee.code
	}
	// cobra's own errors: unknown flags, wrong argument counts.
	fmt.Fprintln(stderr, "error:", err)
	return exitInvalid
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "proxysim",
		Short:         "Replay Kubernetes service proxy sync scenarios in virtual time",
		SilenceUsage:  true,
		SilenceErrors: true,
		Long: `proxysim replays scenarios of a Kubernetes service proxy's sync in virtual
time: a cluster, a timeline of changes, and what must hold along the way.

The engine reproduces kube-proxy's sync in its three modes: iptables, nftables
and IPVS (proxy.mode), each behind the BoundedFrequencyRunner of its version (the
burst runner up to v1.33, the cooldown runner from v1.34). Beside the proxy,
a scenario can run the EndpointSlice and Endpoints controllers, which turn
Pods into the objects the proxy reads, and the ingress-nginx controller's
sync loop.

The dataplane is a fake of the kernel by default; --dataplane netns
programs this host's kernel in throwaway network namespaces (iptables,
nftables, IPVS where the kernel has ip_vs; root), and --dataplane vm runs
IPVS in Debian's kernel under QEMU. 'proxysim doctor' says which of them
this machine can drive, and how to install what is missing.

A scenario is a YAML file, a folder of them (replay), or the name of a
bundled one (see 'proxysim list').
Exit codes: 0 every expectation held, 1 an expectation failed, 2 invalid
input (nothing was run), 3 the replay could not run or ran out of its event
or memory budget, 4 an internal error of proxysim.`,
	}
	var dataplane, release, cpu string
	var vmTimeout time.Duration
	var update, verbose bool
	var kernelProfile string
	var metricsFile string
	var metricsAt *time.Duration
	ld := &loader{warnings: stderr}
	var maxEvents int
	var maxMemoryMiB int64
	budgets := func(o replay.Options) replay.Options {
		o.MaxEvents, o.MaxMemory = maxEvents, maxMemoryMiB<<20
		debug.SetMemoryLimit(replay.GCLimit(o.MaxMemory))
		return o
	}
	var out replayOutput
	var shardArg, shardFile string
	replayCmd := &cobra.Command{
		Use:   "replay FILE|FOLDER|NAME...",
		Short: "Replay scenarios and check their expectations",
		Long: `replay replays each scenario named (a file, a bundled scenario's name, or a
folder) and checks its expectations, in the order given.

A folder is searched recursively for scenarios, in lexical order of their
paths: every .yaml or .yml file whose document has a top-level proxy or
timeline key and neither kind nor apiVersion (Kubernetes objects and
kube-proxy configurations, which scenarios name). Folders named manifests,
golden or goldens, and hidden folders, are not entered: they hold what
scenarios name, as in the bundled library. Other YAML files are named on
stderr as skipped; a folder with no scenario is an error (exit 2).

For CI: --junit FILE writes a JUnit XML report (a test case per scenario,
a failure per expectation that did not hold, at its file:line), and
--format json prints one JSON document instead of the text report.

--shard I/N replays one scenario with cluster.pools for only the nodes
whose index is I modulo N (the API server, the controllers and the first
node run in every shard; --shard /N takes I from JOB_COMPLETION_INDEX, as a
Kubernetes Indexed Job sets it) and writes the shard's JSON file to -o (or
standard output); 'proxysim cluster merge' joins the shards into the
cluster's report and judges the cluster expectations. A shard exits 0 when
it ran: whether expectations held is the merge's to say.

Exit codes: 0 every expectation held, 1 an expectation failed, 2 invalid
input (nothing was run; every file is loaded before any runs), 3 a replay
could not run (its dataplane is missing: see 'proxysim doctor') or ran out
of its budget.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.check(); err != nil {
				return err
			}
			if dataplane == "vm" && metricsFile != "" {
				return fail(exitInvalid, fmt.Errorf("--metrics is not available with --dataplane vm"))
			}
			files, err := folderArgs(args, stderr)
			if err != nil {
				return err
			}
			out.report.Dataplane = dataplane
			if dataplane == "vm" {
				list, err := ld.loadAll(files)
				if err != nil {
					return err
				}
				if len(out.keep(list, stderr)) == 0 {
					return out.finish(stdout) // nothing for the VM to do: no boot
				}
				return replayInVM(cmd.Context(), files, update, verbose, ld.strict, &out, stdout, stderr)
			}
			if metricsAt != nil && metricsFile == "" {
				return fail(exitInvalid, fmt.Errorf("--metrics-at needs --metrics FILE"))
			}
			if shardFile != "" && shardArg == "" {
				return fail(exitInvalid, fmt.Errorf("-o %s: the output file is a shard's (--shard I/N)", shardFile))
			}
			factory, list, err := ld.prepare(dataplane, files)
			if err != nil {
				return err
			}
			if shardArg != "" {
				return replayShard(shardArg, shardFile, list, budgets(replay.Options{Dataplane: factory}), stdout, stderr)
			}
			if list = out.keep(list, stderr); len(list) == 0 {
				return out.finish(stdout)
			}
			if metricsFile != "" && len(list) != 1 {
				return fail(exitInvalid, fmt.Errorf("--metrics needs exactly one scenario, got %d", len(list)))
			}
			if metricsAt != nil && *metricsAt > list[0].Length() {
				return fail(exitInvalid, fmt.Errorf("--metrics-at %v: after the end of %s (%v)", *metricsAt, list[0].Name, list[0].Length()))
			}
			code := exitPass
			terminal := isTerminal
			if out.vmResult {
				// Inside the VM stderr is the serial console, a terminal
				// whose redrawn lines would land in the host's log.
				terminal = func(io.Writer) bool { return false }
			}
			prog := newProgress(stderr, terminal, time.Now)
			var kt *kernelTimes
			if kernelProfile != "" {
				if dataplane != "netns" {
					return fail(exitInvalid, fmt.Errorf("--kernel-times needs --dataplane netns"))
				}
				p, err := loadProfileArg(kernelProfile)
				if err != nil {
					return fail(exitInvalid, fmt.Errorf("--kernel-times: %w", err))
				}
				kt = &kernelTimes{profile: p}
			}
			for _, s := range list {
				opts := budgets(replay.Options{Dataplane: factory, Update: update})
				opts.Progress = func(d time.Duration) {
					prog.show(func() string { return replayLine(s.Name, d, s.Length()) })
				}
				if !verbose {
					opts.TraceKeep = traceTail
				}
				opts.TraceWork = verbose
				if metricsAt != nil {
					d := time.Duration(*metricsAt)
					opts.MetricsAt = &d
				}
				res, err := replay.Replay(s, opts)
				prog.done()
				out.record(s, res, err)
				if err != nil {
					if out.text() {
						fmt.Fprintf(stdout, "ERROR %s: %v\n", s.Name, err)
					} else {
						fmt.Fprintf(stderr, "ERROR %s: %v\n", s.Name, err)
					}
					code = max(code, exitCannotRun)
					continue
				}
				if metricsFile != "" {
					if err := writeMetrics(metricsFile, res); err != nil {
						return fail(exitCannotRun, err)
					}
				}
				if out.text() {
					replay.Report(stdout, res, verbose)
				}
				if kt != nil && lastKernel != nil {
					kt.report(stdout, s, res, lastKernel.SyncKernelTimes())
					lastKernel = nil
				}
				if !res.Passed() {
					code = max(code, exitFail)
				}
			}
			if kt != nil {
				kt.summary(stdout)
			}
			if err := out.finish(stdout); err != nil {
				return err
			}
			if code != exitPass {
				return fail(code, nil)
			}
			return nil
		},
	}
	out.flags(replayCmd)
	replayCmd.Flags().StringVar(&shardArg, "shard", "", "I/N: replay only the nodes of cluster.pools whose index is I modulo N and write the shard's file for 'proxysim cluster merge'; /N reads I from JOB_COMPLETION_INDEX")
	replayCmd.Flags().StringVarP(&shardFile, "output", "o", "", "with --shard, write the shard's JSON file to FILE instead of standard output")
	replayCmd.Flags().StringVar(&kernelProfile, "kernel-times", "", "with --dataplane netns, print each sync's measured kernel time beside what this cost profile (a built-in name or a JSON file) predicts, and the median error")
	replayCmd.Flags().StringVar(&dataplane, "dataplane", "fake", "dataplane to program: fake (in memory), netns (this kernel, needs root, and ip_vs for mode ipvs, iptables for mode iptables, nft for mode nftables), vm (Debian's kernel in QEMU)")
	replayCmd.Flags().StringVar(&netnsIPTables, "iptables", netnsIPTables, "with --dataplane netns, the iptables backend for mode iptables: nft or legacy (run as xtables-nft-multi or xtables-legacy-multi; the host's alternatives are not used)")
	replayCmd.Flags().BoolVar(&update, "update", false, "rewrite goldens (each mode's blocks and files: ipvs, iptables, nftables) with what the replay produced")
	replayCmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "print the whole trace, with each sync's work (run.work)")
	replayCmd.Flags().StringVar(&metricsFile, "metrics", "", "write kube-proxy's metrics (Prometheus text format, virtual time) to FILE at the end of the replay")
	replayCmd.Flags().Var(&metricsAtFlag{&metricsAt}, "metrics-at", "with --metrics, take them at this virtual instant (e.g. 90s) instead of the end")

	var printObjects bool
	validate := &cobra.Command{
		Use:   "validate FILE|FOLDER|NAME...",
		Short: "Check scenarios without running them (a folder: the scenarios replay would find in it)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			files, err := folderArgs(args, stderr)
			if err != nil {
				return err
			}
			list, err := ld.loadAll(files)
			if err != nil {
				return err
			}
			for _, s := range list {
				if printObjects {
					if err := writeObjects(stdout, s); err != nil {
						return fail(exitCannotRun, err)
					}
					continue
				}
				fmt.Fprintf(stdout, "ok %s (%s): %d objects, %d steps, %v of virtual time\n", s.Name, s.File, len(s.Initial), len(s.Timeline), s.Length())
			}
			return nil
		},
	}
	validate.Flags().BoolVar(&printObjects, "objects", false, "print the objects each scenario starts with (generated and listed), one JSON object a line, instead of the summary: a dump objects: [{file: ...}] reads")

	var traceWork bool
	traceCmd := &cobra.Command{
		Use:   "trace FILE|NAME",
		Short: "Replay one scenario and print its trace as JSON Lines",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			factory, list, err := ld.prepare(dataplane, args)
			if err != nil {
				return err
			}
			// The trace streams out as it is made: a long replay holds
			// only the tail a failure shows.
			res, err := replay.Replay(list[0], budgets(replay.Options{Dataplane: factory, TraceStream: stdout, TraceKeep: traceTail, TraceWork: traceWork}))
			if err != nil {
				return fail(exitCannotRun, err)
			}
			if !res.Passed() {
				return fail(exitFail, nil)
			}
			return nil
		},
	}
	traceCmd.Flags().StringVar(&dataplane, "dataplane", "fake", "dataplane to program: fake or netns")
	traceCmd.Flags().BoolVar(&traceWork, "work", false, "add a run.work event after each sync: what it wrote to the dataplane and read back (docs/sync-work.md)")
	traceCmd.Flags().StringVar(&netnsIPTables, "iptables", netnsIPTables, "with --dataplane netns, the iptables backend for mode iptables: nft or legacy")
	for _, c := range []*cobra.Command{replayCmd, traceCmd} {
		c.Flags().IntVar(&maxEvents, "max-events", replay.DefaultMaxEvents, "stop a replay (exit 3) after this many trace events and clock steps")
		c.Flags().Int64Var(&maxMemoryMiB, "max-memory", replay.DefaultMaxMemory>>20, "stop a replay (exit 3) when its live heap passes this many MiB")
		// A budget of zero or less would mean "stop at once" or wrap
		// around: it is a mistake in the command line, refused before
		// anything runs.
		c.PreRunE = func(cmd *cobra.Command, args []string) error {
			if maxEvents <= 0 {
				return fail(exitInvalid, fmt.Errorf("--max-events %d: must be a positive number of events", maxEvents))
			}
			if maxMemoryMiB <= 0 || maxMemoryMiB > 1<<40 {
				return fail(exitInvalid, fmt.Errorf("--max-memory %d: must be between 1 and %d MiB", maxMemoryMiB, int64(1)<<40))
			}
			return nil
		}
	}

	list := newList(stdout)

	show := &cobra.Command{
		Use:   "show NAME",
		Short: "Print a bundled scenario's YAML, to read or copy",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := readLibrary(args[0])
			if err != nil {
				return fail(exitInvalid, err)
			}
			_, err = stdout.Write(b)
			return err
		},
	}
	vmCmd := &cobra.Command{
		Use:   "vm BINARY [ARGS...]",
		Short: "Run a static binary as root in a QEMU VM with Debian's cloud kernel (real IPVS)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := interruptible(cmd.Context())
			defer stop()
			res, err := vm.Run(ctx, vm.Config{Console: stdout, Release: release, CPU: cpu, Timeout: vmTimeout}, args[0], args[1:], nil)
			if err != nil {
				return fail(exitCannotRun, err)
			}
			fmt.Fprintf(stdout, "vm: kernel %s, exit code %d\n", res.Kernel, res.ExitCode)
			if res.ExitCode != 0 {
				return fail(res.ExitCode, nil)
			}
			return nil
		},
	}
	vmCmd.Flags().SetInterspersed(false)
	vmCmd.Flags().StringVar(&cpu, "cpu", "max", "QEMU CPU model")
	vmCmd.Flags().DurationVar(&vmTimeout, "timeout", 10*time.Minute, "bound on the whole VM run")
	vmCmd.Flags().StringVar(&release, "release", "", "Debian release whose cloud kernel to boot (default: the host's, bookworm; also bullseye, trixie)")
	root.PersistentFlags().BoolVar(&ld.strict, "strict", false, "refuse objects of kinds proxysim does not model in cluster dumps, and unknown or duplicated fields in kube-proxy's configuration (otherwise skipped, or read leniently as kube-proxy reads them, with a warning)")
	root.AddCommand(replayCmd, validate, traceCmd, list, show, vmCmd, newDoctor(stdout), newImport(stdout, stderr, &ld.strict), newSweep(stdout, stderr, ld), newReport(stdout, ld), newMigrate(stdout, stderr), newCalibrate(stdout, stderr), newCluster(stdout))
	return root
}

// traceTail is how much of a trace a replay keeps when it does not print it
// whole: enough for a failure's context.
const traceTail = 256

// replayInVM runs this very binary inside the VM as `replay --dataplane
// netns`; bundled scenarios travel inside the binary, files with their whole
// folder (for the manifests they name). Folders are expanded into their
// scenario files before: only the folders holding scenarios are copied.
func replayInVM(ctx context.Context, args []string, update, verbose, strict bool, out *replayOutput, stdout, stderr io.Writer) error {
	if update {
		return fail(exitInvalid, errors.New("--update cannot rewrite files from inside the VM; update goldens on the fake dataplane"))
	}
	self, err := os.Executable()
	if err != nil {
		return fail(exitCannotRun, err)
	}
	inner := []string{"replay", "--dataplane", "netns", "--vm-result"}
	if len(out.modes) > 0 {
		inner = append(inner, "--mode", strings.Join(out.modes, ","))
	}
	if verbose {
		inner = append(inner, "-v")
	}
	if strict {
		inner = append(inner, "--strict")
	}
	var files vm.Files
	for _, a := range args {
		if _, err := os.Stat(a); err != nil {
			inner = append(inner, a) // a bundled scenario
			continue
		}
		dir, err := files.AddFolder(filepath.Dir(a))
		if err != nil {
			return fail(exitCannotRun, err)
		}
		inner = append(inner, path.Join(dir, filepath.Base(a)))
	}
	ctx, stop := interruptible(ctx)
	defer stop()
	// The guest's text report goes to stdout, or to stderr when stdout
	// carries the JSON report.
	console := &vmConsole{w: stdout}
	if !out.text() {
		console.w = stderr
	}
	res, err := vm.Run(ctx, vm.Config{Console: console}, self, inner, &files)
	if err != nil {
		return fail(exitCannotRun, fmt.Errorf("%w (the proxysim binary must be static: CGO_ENABLED=0 go install or go build)", err))
	}
	if console.report != nil {
		// The VM's report, under the names the host gave.
		dp := out.report.Dataplane
		out.report = *console.report
		out.report.Dataplane = dp
		hostFiles(&out.report, &files)
		if err := out.finish(stdout); err != nil {
			return err
		}
	} else if res.ExitCode == exitPass || res.ExitCode == exitFail {
		return fail(exitCannotRun, cmp.Or(console.err, errNoVMReport))
	}
	if res.ExitCode != 0 {
		return fail(res.ExitCode, nil)
	}
	return nil
}

// interruptible ends ctx on Ctrl-C or a polite kill, so a VM run stops QEMU
// and removes its temp folder on the way out (a SIGKILL leaves that to the
// kernel and the next run).
func interruptible(ctx context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
}

// prepare resolves the dataplane and loads every scenario named, before
// anything runs.
func (ld *loader) prepare(dataplane string, args []string) (scenarios.DataplaneFactory, []*scenarios.Scenario, error) {
	factory, err := dataplaneFactory(dataplane)
	if err != nil {
		return nil, nil, fail(exitInvalid, err)
	}
	list, err := ld.loadAll(args)
	if err != nil {
		return nil, nil, err
	}
	return factory, list, nil
}

func dataplaneFactory(name string) (scenarios.DataplaneFactory, error) {
	switch name {
	case "fake", "":
		return nil, nil // the scenario's mode's own fake
	case "netns":
		if err := checkIPTablesBackend(netnsIPTables); err != nil {
			return nil, err
		}
		return netnsDataplane, nil
	}
	return nil, fmt.Errorf("unknown dataplane %q (available: fake, netns; replay also takes vm)", name)
}

// loadAll loads every argument: a file path, or the name of a bundled
// scenario. Any problem in any file rejects the whole command.
func (ld *loader) loadAll(args []string) ([]*scenarios.Scenario, error) {
	var out []*scenarios.Scenario
	var problems []string
	for _, a := range args {
		s, err := ld.loadOne(a)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		out = append(out, s)
	}
	if len(problems) > 0 {
		return nil, fail(exitInvalid, errors.New(strings.Join(problems, "\n")))
	}
	return out, nil
}

// loader loads the scenarios a command names, with the root command's
// --strict, printing loading's warnings.
type loader struct {
	strict   bool
	warnings io.Writer
}

func (ld *loader) loadOne(arg string) (*scenarios.Scenario, error) {
	load := func(file string) (*scenarios.Scenario, error) {
		s, err := scenarios.LoadWith(file, scenarios.LoadOptions{Strict: ld.strict})
		if err == nil {
			printWarnings(ld.warnings, s.Warnings)
		}
		return s, err
	}
	if _, err := os.Stat(arg); err == nil {
		return load(arg)
	}
	if scenarios.IsLibrary(arg) {
		return scenarios.LoadLibrary(arg)
	}
	if strings.ContainsAny(arg, "/") || strings.HasSuffix(arg, ".yaml") || strings.HasSuffix(arg, ".yml") {
		return load(arg)
	}
	return nil, fmt.Errorf("%s: no such file, and no bundled scenario of that name (see 'proxysim list')", arg)
}

func readLibrary(name string) ([]byte, error) {
	if scenarios.IsLibrary(name) {
		return scenarios.ReadLibraryFile(name + ".yaml")
	}
	return nil, fmt.Errorf("%s: no bundled scenario of that name (see 'proxysim list')", name)
}

// firstLine is a description's first sentence.
func firstLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if i := strings.Index(s, ". "); i >= 0 {
		return s[:i+1]
	}
	return s
}
