package suite

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/replay"
	"github.com/proxysim/proxysim/sim/trace"
)

// Format names the JSON report's layout; it changes when a field changes
// meaning.
const Format = "proxysim-replay/v1"

// Report is the outcome of one replay command over many scenarios.
type Report struct {
	Format string `json:"format"`
	// Dataplane is what the command asked for: fake, netns or vm.
	Dataplane string `json:"dataplane"`
	Passed    int    `json:"passed"`
	Failed    int    `json:"failed"`
	Errors    int    `json:"errors"`
	// Scenarios are in the order they were replayed.
	Scenarios []Result `json:"scenarios"`
}

// Result is one scenario's outcome.
type Result struct {
	Name string `json:"name"`
	File string `json:"file"`
	Mode string `json:"mode"`
	// Env is the dataplane the replay ran on, as the replay names it
	// ("fake", "netns, kernel 6.1.0, nftables v1.0.6").
	Env    string `json:"env,omitempty"`
	Passed bool   `json:"passed"`
	// Syncs counts the proxy's syncs.
	Syncs int `json:"syncs"`
	// Checks counts the expect blocks evaluated.
	Checks int `json:"checks"`
	// VirtualTime is the scenario's length on its timeline, as Go duration
	// text, and VirtualSeconds the same in seconds.
	VirtualTime    string    `json:"virtualTime"`
	VirtualSeconds float64   `json:"virtualSeconds"`
	Failures       []Failure `json:"failures"`
	// Error says why the scenario could not run (passed is then false and
	// failures empty).
	Error string `json:"error,omitempty"`
	// Wall is how long the replay took in real time: in the JUnit report
	// (CI shows it as the case's duration), never in the JSON, which stays
	// the same from run to run.
	Wall time.Duration `json:"-"`
}

// Failure is one expectation that did not hold, at its place in the file.
type Failure struct {
	File   string `json:"file"`
	Line   int    `json:"line"`
	Column int    `json:"column"`
	// Field is the expectation's path in the scenario ("timeline[2].expect.syncs.count").
	Field string `json:"field"`
	// At is the virtual instant it was checked.
	At       string `json:"at"`
	Expected string `json:"expected"`
	Got      string `json:"got"`
	// Message is the one-line summary: file:line:column: field at T:
	// expected X, got Y (or "tables differ" for multi-line values).
	Message string `json:"message"`
	// Detail is the text a person reads: the values or their line diff,
	// and the trace leading to the failure (the JUnit failure's body).
	Detail string `json:"detail"`
}

// FromReplay records a finished replay.
func FromReplay(res *replay.Result) Result {
	s := res.Scenario
	r := base(s)
	r.Env = res.Env
	r.Passed = res.Passed()
	r.Syncs = len(res.Runs)
	r.Checks = res.Checks
	r.Wall = res.Wall
	for _, f := range res.Failures {
		r.Failures = append(r.Failures, failure(f))
	}
	return r
}

// FromError records a scenario that could not run.
func FromError(s *scenarios.Scenario, err error) Result {
	r := base(s)
	r.Error = err.Error()
	return r
}

func base(s *scenarios.Scenario) Result {
	return Result{
		Name: s.Name, File: s.File, Mode: s.Proxy.Mode,
		VirtualTime: s.Length().String(), VirtualSeconds: s.Length().Seconds(),
		Failures: []Failure{},
	}
}

func failure(f replay.Failure) Failure {
	out := Failure{
		File: f.File, Line: f.Pos.Line, Column: f.Pos.Column, Field: f.Pos.Path,
		At: f.At.String(), Expected: f.Expected, Got: f.Got,
	}
	var d strings.Builder
	if strings.Contains(f.Expected, "\n") || strings.Contains(f.Got, "\n") {
		out.Message = fmt.Sprintf("%s:%d:%d: %s at %v: tables differ", f.File, f.Pos.Line, f.Pos.Column, f.Pos.Path, f.At)
		d.WriteString("table differs (- expected, + got):\n")
		for _, l := range replay.LineDiff(f.Expected, f.Got) {
			d.WriteString("  " + l + "\n")
		}
	} else {
		out.Message = f.String()
		fmt.Fprintf(&d, "expected: %s\ngot:      %s\n", f.Expected, f.Got)
	}
	if len(f.Context) > 0 {
		d.WriteString("trace leading to it:\n")
		for _, e := range f.Context {
			d.WriteString("  " + trace.Line(e) + "\n")
		}
	}
	out.Detail = d.String()
	return out
}

// Add appends a scenario's result and counts it.
func (r *Report) Add(res Result) {
	switch {
	case res.Error != "":
		r.Errors++
	case res.Passed:
		r.Passed++
	default:
		r.Failed++
	}
	r.Scenarios = append(r.Scenarios, res)
}

// JSON is the report as indented JSON, ending in a newline.
func (r *Report) JSON() []byte {
	out := *r
	out.Format = Format
	if out.Scenarios == nil {
		out.Scenarios = []Result{}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // tables hold "->": keep them readable
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		panic(err) // plain strings and numbers: cannot fail
	}
	return b.Bytes()
}
