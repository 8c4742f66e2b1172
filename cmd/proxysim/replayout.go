package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/proxysim/proxysim/netns/vm"
	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/replay"
	"github.com/proxysim/proxysim/scenarios/suite"
)

// replayOutput is what replay writes besides its text report: a JSON report
// instead of the text (--format json), and a JUnit file (--junit).
type replayOutput struct {
	format string
	junit  string
	// vmResult, set only on the replay proxysim runs inside the VM, prints
	// the report as one marked line on the console for the host to read.
	vmResult bool
	// modes, when set, keeps only the scenarios of these proxy modes.
	modes  []string
	report suite.Report
}

// vmResultMarker starts the console line that carries a VM replay's report.
const vmResultMarker = "PROXYSIM-REPLAY-RESULT "

func (o *replayOutput) flags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&o.format, "format", "text", "report format on standard output: text (for a person) or json (one document for a machine: per scenario its name, file, mode, passed, syncs, virtual time and failures with file:line)")
	cmd.Flags().StringVar(&o.junit, "junit", "", "also write a JUnit XML report to FILE: a test case per scenario, a failure per expectation that did not hold (its message starts with file:line:column)")
	cmd.Flags().BoolVar(&o.vmResult, "vm-result", false, "print the report as one marked line (for the replay inside the VM)")
	_ = cmd.Flags().MarkHidden("vm-result")
	cmd.Flags().StringSliceVar(&o.modes, "mode", nil, "replay only the scenarios of these proxy modes (comma-separated: "+strings.Join(scenarios.ModeNames(), ", ")+"); the others are named on stderr as left out")
}

func (o *replayOutput) check() error {
	for _, m := range o.modes {
		if _, ok := scenarios.LookupMode(m); !ok {
			return fail(exitInvalid, fmt.Errorf("--mode %s: unknown mode (available: %s)", m, strings.Join(scenarios.ModeNames(), ", ")))
		}
	}
	switch o.format {
	case "text", "json":
		return nil
	}
	return fail(exitInvalid, fmt.Errorf("--format %q: want text or json", o.format))
}

// keep filters list by --mode, naming on warn what it leaves out.
func (o *replayOutput) keep(list []*scenarios.Scenario, warn io.Writer) []*scenarios.Scenario {
	if len(o.modes) == 0 {
		return list
	}
	if o.vmResult {
		warn = io.Discard // the host named them already
	}
	var out []*scenarios.Scenario
	for _, s := range list {
		if slices.Contains(o.modes, s.Proxy.Mode) {
			out = append(out, s)
		} else {
			fmt.Fprintf(warn, "%s: left out: mode %s (--mode %s)\n", s.File, s.Proxy.Mode, strings.Join(o.modes, ","))
		}
	}
	if len(out) == 0 {
		fmt.Fprintf(warn, "no scenario of mode %s to replay\n", strings.Join(o.modes, " or "))
	}
	return out
}

// text reports whether each scenario's text report goes to standard output.
func (o *replayOutput) text() bool { return o.format == "text" }

// finish writes the JSON report and the JUnit file once every scenario has
// run; a file that cannot be written is exit 3.
func (o *replayOutput) finish(stdout io.Writer) error {
	if o.vmResult {
		b, err := json.Marshal(vmReport{o.report, walls(o.report)})
		if err != nil {
			return fail(exitInternal, err)
		}
		fmt.Fprintf(stdout, "%s%s\n", vmResultMarker, b)
		return nil
	}
	if o.format == "json" {
		if _, err := stdout.Write(o.report.JSON()); err != nil {
			return fail(exitCannotRun, err)
		}
	}
	if o.junit != "" {
		if err := os.WriteFile(o.junit, o.report.JUnit(), 0o644); err != nil {
			return fail(exitCannotRun, fmt.Errorf("--junit: %w", err))
		}
	}
	return nil
}

// vmReport is the report as it crosses the VM's console, with each
// scenario's real duration, which the JSON form leaves out.
type vmReport struct {
	Report suite.Report `json:"report"`
	Walls  []int64      `json:"walls"`
}

func walls(r suite.Report) []int64 {
	var out []int64
	for _, s := range r.Scenarios {
		out = append(out, int64(s.Wall))
	}
	return out
}

// vmConsole passes the VM's console through to w, but keeps the marked
// report line for the host.
type vmConsole struct {
	w      io.Writer
	buf    []byte
	report *suite.Report
	err    error
}

func (c *vmConsole) Write(p []byte) (int, error) {
	c.buf = append(c.buf, p...)
	for {
		i := bytes.IndexByte(c.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := string(c.buf[:i+1])
		c.buf = c.buf[i+1:]
		if j := strings.Index(line, vmResultMarker); j >= 0 {
			var r vmReport
			if err := json.Unmarshal([]byte(strings.TrimSpace(line[j+len(vmResultMarker):])), &r); err != nil {
				c.err = fmt.Errorf("the VM's report line: %w", err)
				continue
			}
			for k := range r.Report.Scenarios {
				if k < len(r.Walls) {
					r.Report.Scenarios[k].Wall = time.Duration(r.Walls[k])
				}
			}
			c.report = &r.Report
			continue
		}
		if _, err := io.WriteString(c.w, line); err != nil {
			return 0, err
		}
	}
}

// folderArgs expands the folders among args into the scenario files under
// them (suite.Find's rule), leaving files and bundled names as they are.
// Skipped YAML files are named on warn, so nothing vanishes silently.
func folderArgs(args []string, warn io.Writer) ([]string, error) {
	var out []string
	for _, a := range args {
		if fi, err := os.Stat(a); err != nil || !fi.IsDir() {
			out = append(out, a)
			continue
		}
		found, err := suite.Find(a)
		if err != nil {
			return nil, fail(exitInvalid, err)
		}
		for _, s := range found.Skipped {
			fmt.Fprintf(warn, "%s: skipped: %s\n", s.File, s.Reason)
		}
		if len(found.Files) == 0 {
			return nil, fail(exitInvalid, fmt.Errorf("%s: %w (a scenario is a .yaml or .yml file with a top-level proxy or timeline key, outside folders named %s and hidden folders)", a, suite.ErrNoScenarios, strings.Join(suite.SkippedFolders, ", ")))
		}
		out = append(out, found.Files...)
	}
	return out, nil
}

// record adds a replay's outcome to the report.
func (o *replayOutput) record(s *scenarios.Scenario, res *replay.Result, err error) {
	if err != nil {
		o.report.Add(suite.FromError(s, err))
		return
	}
	o.report.Add(suite.FromReplay(res))
}

var errNoVMReport = errors.New("the VM's replay printed no report line")

// hostFiles names the user's files in a report made inside the VM: each
// guest path becomes the host file it was copied from, relative to the
// working folder when it lies under it.
func hostFiles(r *suite.Report, files *vm.Files) {
	wd, _ := os.Getwd()
	host := func(guest string) string {
		h, ok := files.HostPath(guest)
		if !ok {
			return guest
		}
		if rel, err := filepath.Rel(wd, h); err == nil && filepath.IsLocal(rel) {
			return rel
		}
		return h
	}
	for i := range r.Scenarios {
		s := &r.Scenarios[i]
		s.File = host(s.File)
		for j := range s.Failures {
			f := &s.Failures[j]
			h := host(f.File)
			f.Message = strings.Replace(f.Message, f.File, h, 1)
			f.File = h
		}
	}
}
