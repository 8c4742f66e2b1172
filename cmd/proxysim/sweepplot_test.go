package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/sweep"
)

// sweepPlot is one of the README's sweeps: the Makefile variable holding
// its arguments, the target that writes it, its table and plot.
type sweepPlot struct {
	makeVar, target, csv, svg string
}

var sweepPlots = []sweepPlot{
	// The default-profile sweep (make sweep-plot).
	{"SWEEP_PLOT", "sweep-plot", "../../docs/images/sweep-default-profile.csv", "../../docs/images/sweep-default-profile.svg"},
	// The whole-cluster sweep (make cluster-sweep-plot).
	{"CLUSTER_SWEEP_PLOT", "cluster-sweep-plot", "../../docs/images/sweep-cluster.csv", "../../docs/images/sweep-cluster.svg"},
}

// TestSweepPlotIsCurrent fails when one of sweepPlots' table or plot is
// no longer what its make target (`make sweep-plot`: the Makefile's
// SWEEP_PLOT; `make cluster-sweep-plot`: CLUSTER_SWEEP_PLOT) writes. The whole sweep takes minutes, so it checks what can go stale
// cheaply and for real:
//   - the CSV holds the sweep the Makefile names (its --set axes, every
//     point, in order);
//   - the smallest cluster's rows are what a replay gives today: the
//     sweep's first axis cut to its first value is rerun, and its table
//     must be the committed table's first rows, byte for byte; a change to
//     the scenario, the default cost profile or the engine moves them;
//   - the SVG is the committed CSV drawn with the variable's --plot-metric.
//
// Larger clusters are not replayed: a change that moves only them goes
// unseen here (docs/sweep-default-profile.md says so).
func TestSweepPlotIsCurrent(t *testing.T) {
	for _, p := range sweepPlots {
		t.Run(p.target, func(t *testing.T) { checkSweepPlot(t, p) })
	}
}

func checkSweepPlot(t *testing.T, p sweepPlot) {
	sweepPlotCSV, sweepPlotSVG := p.csv, p.svg
	args := makefileVar(t, p.makeVar)
	var axes []sweep.Axis
	metrics := []string{"p99"}
	for i := 1; i+1 < len(args); i++ {
		switch args[i] {
		case "--set":
			a, err := sweep.ParseAxis(args[i+1])
			if err != nil {
				t.Fatal(err)
			}
			axes = append(axes, a)
		case "--plot-metric":
			ms, err := sweep.ParseMetrics(args[i+1])
			if err != nil {
				t.Fatal(err)
			}
			metrics = ms
		}
	}
	if len(axes) == 0 {
		t.Fatalf("%s sets nothing: %q", p.makeVar, args)
	}
	file := filepath.Join("../..", args[0])
	base, err := scenarios.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	committed := readFile(t, sweepPlotCSV)
	rep, err := sweep.ReadCSV(sweepPlotCSV, base.Name, []byte(committed))
	if err != nil {
		t.Fatal(err)
	}
	stale := "run `make " + p.target + "` and review the picture"
	if !slices.EqualFunc(rep.Axes, axes, func(a, b sweep.Axis) bool { return a.Key == b.Key && slices.Equal(a.Values, b.Values) }) {
		t.Fatalf("%s sweeps %v, the Makefile's %s %v: %s", sweepPlotCSV, rep.Axes, p.makeVar, axes, stale)
	}
	if got := rep.Plot(metrics...); string(got) != readFile(t, sweepPlotSVG) {
		t.Errorf("%s is not %s drawn: %s", sweepPlotSVG, sweepPlotCSV, stale)
	}

	small := []string{"sweep", file, "--format", "csv"}
	for k, a := range axes {
		vals := a.Values
		if k == 0 {
			vals = vals[:1]
		}
		small = append(small, "--set", a.Key+"="+strings.Join(vals, ","))
	}
	code, out, errs := runCLI(small...)
	if code != exitPass {
		t.Fatalf("%q: code %d: %s", small, code, errs)
	}
	lines := strings.SplitAfter(committed, "\n")
	n := strings.Count(out, "\n")
	if n < 2 || n > len(lines) || out != strings.Join(lines[:n], "") {
		t.Errorf("the sweep at %s=%s gives today:\n%s\n%s has:\n%s\n%s", axes[0].Key, axes[0].Values[0], out, sweepPlotCSV, strings.Join(lines[:min(n, len(lines))], ""), stale)
	}
}

// makefileVar is a variable of the Makefile, split into words.
func makefileVar(t *testing.T, name string) []string {
	t.Helper()
	for _, l := range strings.Split(readFile(t, "../../Makefile"), "\n") {
		if v, ok := strings.CutPrefix(l, name+" = "); ok {
			return strings.Fields(v)
		}
	}
	t.Fatalf("the Makefile has no %s", name)
	return nil
}
