package sweep

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/proxysim/proxysim/scenarios"
	_ "github.com/proxysim/proxysim/scenarios/controllers"
	_ "github.com/proxysim/proxysim/scenarios/iptablesmode"
	_ "github.com/proxysim/proxysim/scenarios/ipvsmode"
	"github.com/proxysim/proxysim/scenarios/replay"
)

// sixPoints is the 3 × 2 sweep the tests and the benchmark replay.
var sixPoints = []string{"proxy.minSyncPeriod=0s,1s,10s", "proxy.version=v1.33.0,v1.34.0"}

func newSweep(t testing.TB, name string, sets ...string) *Sweep {
	t.Helper()
	base, err := scenarios.LoadLibrary(name)
	if err != nil {
		t.Fatal(err)
	}
	var axes []Axis
	for _, s := range sets {
		a, err := ParseAxis(s)
		if err != nil {
			t.Fatal(err)
		}
		axes = append(axes, a)
	}
	sw, err := New(base, axes)
	if err != nil {
		t.Fatal(err)
	}
	return sw
}

// outputs is every rendering of a report, concatenated.
func outputs(r *Report) []byte {
	return bytes.Join([][]byte{r.Text(), r.CSV(), r.JSON(), r.SVG("p99"), r.HTML("syncs")}, []byte("\n--\n"))
}

func TestPointsAreTheCrossProductLastAxisFastest(t *testing.T) {
	ps := Points([]Axis{{"a", []string{"1", "2", "3"}}, {"b", []string{"x", "y"}}})
	var got []string
	for i, p := range ps {
		if p.Index != i {
			t.Fatalf("point %d has index %d", i, p.Index)
		}
		got = append(got, strings.Join(p.Values, ""))
	}
	if strings.Join(got, " ") != "1x 1y 2x 2y 3x 3y" {
		t.Errorf("points %v", got)
	}
}

func TestSweepIsTheSameEveryRunWhateverTheWorkers(t *testing.T) {
	sw := newSweep(t, "churn-iptables", sixPoints...)
	first := sw.Run(All, RunOptions{})
	if len(first.Results) != 6 {
		t.Fatalf("%d results", len(first.Results))
	}
	// The settings reached the engine: minSyncPeriod 0s syncs every flip,
	// 10s almost never; the scenario's own setting (1s, v1.36) is not
	// among the points, whose expectations then partly fail.
	byPoint := map[string]Result{}
	for _, r := range first.Results {
		byPoint[strings.Join(first.Points[r.Point].Values, " ")] = r
	}
	if a, b := byPoint["0s v1.34.0"].Syncs, byPoint["10s v1.34.0"].Syncs; a <= b || a < 20 {
		t.Errorf("syncs with minSyncPeriod 0s: %d, 10s: %d", a, b)
	}
	if r := byPoint["1s v1.34.0"]; r.Failed != 0 || r.Syncs != 4 {
		t.Errorf("the scenario's own settings (but the version) should pass: %+v", r)
	}
	if r := byPoint["0s v1.33.0"]; r.Failed == 0 || !strings.HasPrefix(r.FirstFailure, "timeline[1].expect.syncs.at at 3s: expected [0s 1s 2s 3s]") {
		t.Errorf("0s should fail the scenario's syncs.at: %+v", r)
	}
	want := outputs(first)
	for _, w := range []int{1, 4} {
		if got := outputs(sw.Run(All, RunOptions{Workers: w})); !bytes.Equal(got, want) {
			t.Errorf("workers %d: a different report:\n%s\nwant\n%s", w, got, want)
		}
	}
}

func TestFourShardsMergedEqualTheWholeSweep(t *testing.T) {
	sw := newSweep(t, "rolling-update-batch-1s", sixPoints...)
	whole := sw.Run(All, RunOptions{})
	var shards []*Report
	var names []string
	seen := 0
	// Given out of order: merge orders by point.
	for _, i := range []int{2, 0, 3, 1} {
		r := sw.Run(Shard{i, 4}, RunOptions{})
		if r.Shard == "" || len(r.Points) != 6 {
			t.Fatalf("shard %d: %q, %d points", i, r.Shard, len(r.Points))
		}
		for _, p := range r.Ran {
			if p%4 != i {
				t.Errorf("shard %d/4 ran point %d", i, p)
			}
		}
		seen += len(r.Ran)
		// Through JSON, as shards travel.
		back, err := ReadReport("shard.json", r.JSON())
		if err != nil {
			t.Fatal(err)
		}
		shards, names = append(shards, back), append(names, "shard"+r.Shard)
	}
	if seen != 6 {
		t.Fatalf("shards ran %d points", seen)
	}
	merged, err := Merge(names, shards)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := outputs(merged), outputs(whole); !bytes.Equal(got, want) {
		t.Errorf("merged:\n%s\nwhole:\n%s", got, want)
	}
}

func TestMergeRefusesShardsOfAnotherSweep(t *testing.T) {
	sw := newSweep(t, "churn-iptables", sixPoints...)
	s0, s1 := sw.Run(Shard{0, 2}, RunOptions{}), sw.Run(Shard{1, 2}, RunOptions{})
	other := newSweep(t, "churn-iptables", "proxy.minSyncPeriod=0s,1s,10s", "proxy.version=v1.33.0,v1.36.0").Run(Shard{1, 2}, RunOptions{})
	scen := newSweep(t, "churn-ipvs", sixPoints...).Run(Shard{1, 2}, RunOptions{})
	edited := *s1
	edited.Digest = strings.Repeat("0", 64)
	for _, c := range []struct {
		name   string
		shards []*Report
		want   string
	}{
		{"missing", []*Report{s0}, "no shard ran point 1, 3, 5 of 6"},
		{"twice", []*Report{s0, s1, s0}, "point 0 was run by a too"},
		{"axes", []*Report{s0, other}, "swept proxy.minSyncPeriod=0s,1s,10s proxy.version=v1.33.0,v1.36.0, but a swept"},
		{"scenario", []*Report{s0, scen}, `scenario "churn-ipvs", but a is of "churn-iptables"`},
		{"digest", []*Report{s0, &edited}, "from a different source"},
	} {
		names := []string{"a", "b", "c"}[:len(c.shards)]
		_, err := Merge(names, c.shards)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	// A report whose points are not its axes' is refused when read.
	bad := *s0
	bad.Points = bad.Points[:5]
	if _, err := ReadReport("bad.json", bad.JSON()); err == nil || !strings.Contains(err.Error(), "5 points, but its axes make 6") {
		t.Errorf("bad points: %v", err)
	}
}

func TestBadSettingsNameTheFlag(t *testing.T) {
	base, err := scenarios.LoadLibrary("churn-iptables")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		sets []string
		want string
	}{
		{[]string{"proxy.minSyncPerod=1s"}, "--set proxy.minSyncPerod=1s: proxy.minSyncPerod: unknown field"},
		{[]string{"proxy.minSyncPeriod=1s,soon"}, "--set proxy.minSyncPeriod=soon: proxy.minSyncPeriod:"},
		{[]string{"proxy.version=v1.34.0", "proxy.minSyncPeriod=1s,2m"}, "--set proxy.version=v1.34.0 with --set proxy.minSyncPeriod=2m: proxy.syncPeriod: syncPeriod 30s is shorter than minSyncPeriod 2m0s (point 1: proxy.version=v1.34.0 proxy.minSyncPeriod=2m)"},
		{[]string{"proxy.version=v1.34.0", "objects[1].endpoints[0].conditions.ready=maybe"}, "--set objects[1].endpoints[0].conditions.ready=maybe: objects[1]: json: cannot unmarshal"},
		{[]string{"proxy.version=v1.34.0", "proxy.version=v1.33.0"}, "--set proxy.version: the setting is given twice"},
		{nil, "--set: give at least one setting"},
	} {
		var axes []Axis
		for _, s := range c.sets {
			a, err := ParseAxis(s)
			if err != nil {
				t.Fatal(err)
			}
			axes = append(axes, a)
		}
		_, err := New(base, axes)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.sets, err, c.want)
		}
	}
	for arg, want := range map[string]string{
		"proxy.minSyncPeriod":       "want KEY=VALUE",
		"=1s":                       "want KEY=VALUE",
		"proxy.minSyncPeriod=1s,,":  "an empty value",
		"proxy.minSyncPeriod=1s,1s": `value "1s" is listed twice`,
	} {
		if _, err := ParseAxis(arg); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", arg, err, want)
		}
	}
}

func TestPlotHasALinePerSeriesAndAPointPerResult(t *testing.T) {
	r := newSweep(t, "rolling-update-batch-1s", sixPoints...).Run(All, RunOptions{})
	svg := string(r.SVG("p99"))
	if n := strings.Count(svg, "<polyline"); n != 2 {
		t.Errorf("%d lines, want 2 (one per version)", n)
	}
	if n := strings.Count(svg, "<circle"); n != 6 {
		t.Errorf("%d dots, want 6", n)
	}
	for _, want := range []string{">proxy.version=v1.33.0<", ">proxy.version=v1.34.0<", ">proxy.minSyncPeriod<", ">10s<", "network programming latency p99"} {
		if !strings.Contains(svg, want) {
			t.Errorf("plot lacks %q", want)
		}
	}
	page := string(r.HTML("p99"))
	if !strings.Contains(page, svg) || strings.Count(page, "<tr>") != 7 || strings.Contains(page, "http://") && !strings.Contains(page, `xmlns="http://www.w3.org/2000/svg"`) {
		t.Errorf("page does not hold the plot and a 6-row table:\n%s", page)
	}
	if strings.Contains(page, "<script") || strings.Contains(page, "src=") || strings.Contains(page, "href=") {
		t.Errorf("page loads something:\n%s", page)
	}
}

// BenchmarkSweepSixPoints replays churn-iptables over 3 × 2 settings on
// GOMAXPROCS workers.
func BenchmarkSweepSixPoints(b *testing.B) {
	sw := newSweep(b, "churn-iptables", sixPoints...)
	b.ReportAllocs()
	for b.Loop() {
		if r := sw.Run(All, RunOptions{}); r.Errors() != 0 {
			b.Fatal(r.Results)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/6/1e6, "ms/point")
}

// The sync columns read the runs: sync-cost-v1.34's syncs take 450ms each
// (its syncCost), and a profile's cost moves them.
func TestSyncColumnsReadTheRuns(t *testing.T) {
	sw := newSweep(t, "sync-cost-v1.34", "proxy.minSyncPeriod=1s,2s")
	rep := sw.Run(All, RunOptions{})
	for _, r := range rep.Results {
		if r.Error != "" {
			t.Fatal(r.Error)
		}
		if r.SyncP50 != Duration(450*time.Millisecond) || r.SyncMax != Duration(450*time.Millisecond) {
			t.Errorf("point %d: sync p50 %v max %v, want 450ms", r.Point, r.SyncP50, r.SyncMax)
		}
		if r.FullSyncs < 1 || r.PartialSyncs < 1 {
			t.Errorf("point %d: %d full, %d partial syncs", r.Point, r.FullSyncs, r.PartialSyncs)
		}
		// The runs that ended, 450ms each (the initial direct sync none,
		// the last run perhaps still under way), over the scenario's length.
		runs := r.SyncCPUPerHour * sw.Base.Length().Hours() / 0.45
		if math.Abs(runs-math.Round(runs)) > 0.01 || math.Round(runs) < float64(r.Syncs-2) || math.Round(runs) > float64(r.Syncs-1) {
			t.Errorf("point %d: %.3f s/h of syncing is %.2f runs of 450ms, of %d syncs", r.Point, r.SyncCPUPerHour, runs, r.Syncs)
		}
	}
	if !strings.Contains(string(rep.Text()), "sync p50") {
		t.Errorf("no sync columns:\n%s", rep.Text())
	}
}

// A committed table is drawn again from its CSV: ReadCSV gives back the
// report, so the CSV and every plot come out the same bytes.
func TestCSVReadsBackIntoTheSameTableAndPlots(t *testing.T) {
	rep := newSweep(t, "churn-iptables", sixPoints...).Run(All, RunOptions{})
	back, err := ReadCSV("t.csv", rep.Scenario, rep.CSV())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back.CSV(), rep.CSV()) {
		t.Errorf("CSV read back:\n%s\nwant\n%s", back.CSV(), rep.CSV())
	}
	metrics := []string{"syncs", "p99", "syncCPU"}
	if !bytes.Equal(back.Plot(metrics...), rep.Plot(metrics...)) || !bytes.Equal(back.SVG("max"), rep.SVG("max")) {
		t.Error("the plots drawn from the CSV differ from the sweep's")
	}
	// A row out of place or a cell that is not a number names its line.
	csv := string(rep.CSV())
	for _, c := range []struct {
		edit func(string) string
		want string
	}{
		{func(s string) string { return strings.Replace(s, "\n1,0s,v1.34.0,", "\n1,0s,v1.35.0,", 1) }, "t.csv: 6 rows, but its axes make 9 points"},
		{func(s string) string { return strings.Replace(s, "\n2,1s,v1.33.0,", "\n3,1s,v1.33.0,", 1) }, "t.csv:4: point 3 (1s,v1.33.0) is not its axes' point 2"},
		{func(s string) string { return strings.Replace(s, "\n0,0s,v1.33.0,", "\n0,0s,v1.33.0,x", 1) }, `t.csv:2: syncs: "x`},
		{func(s string) string { return strings.Replace(s, "sync p50", "sync p5O", 1) }, "t.csv:1: header"},
	} {
		if _, err := ReadCSV("t.csv", "s", []byte(c.edit(csv))); err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("error %v, want %q", err, c.want)
		}
	}
}

// PanelsSVG draws a panel per metric over the same series, on a log y,
// and names each series once.
func TestPanelsDrawEachMetricOverTheSameSeries(t *testing.T) {
	rep := newSweep(t, "churn-iptables", sixPoints...).Run(All, RunOptions{})
	svg := string(rep.PanelsSVG([]string{"syncs", "dataplaneOps", "syncCPU"}))
	for _, want := range []string{">syncs<", ">dataplane operations<", ">seconds of syncing per virtual hour<"} {
		if strings.Count(svg, want) != 1 {
			t.Errorf("panel title %s drawn %d times", want, strings.Count(svg, want))
		}
	}
	// Two series (the versions), three points each, in three panels; a
	// legend entry each.
	if n := strings.Count(svg, "<circle"); n != 2*3*3-2*3 {
		// syncCPU is 0 with no sync cost: that panel draws no dot.
		t.Errorf("%d dots:\n%s", n, svg)
	}
	if strings.Count(svg, ">proxy.version=v1.33.0<") != 1 || strings.Count(svg, ">proxy.version=v1.34.0<") != 1 {
		t.Errorf("legend:\n%s", svg)
	}
	if !strings.Contains(svg, "no values above 0") {
		t.Error("the syncCPU panel, all zero, should say it has nothing to draw")
	}
	if _, err := ParseMetrics("syncs,p99,syncs"); err == nil {
		t.Error("a metric listed twice is accepted")
	}
	if _, err := ParseMetrics("syncs,p98"); err == nil {
		t.Error("an unknown metric is accepted")
	}
}

// A cluster scenario's sweep has the cluster's columns, read from each
// point's replay, and they survive the CSV.
func TestClusterSweepHasTheClusterColumns(t *testing.T) {
	sw := newSweep(t, "cluster-pools-iptables", "proxy.minSyncPeriod=1s,10s")
	rep := sw.Run(All, RunOptions{})
	for _, r := range rep.Results {
		if r.Error != "" {
			t.Fatal(r.Error)
		}
		s, err := sw.scenario(sw.Points[r.Point])
		if err != nil {
			t.Fatal(err)
		}
		res, err := replay.Replay(s, replay.Options{})
		if err != nil {
			t.Fatal(err)
		}
		c := res.Cluster
		want := &ClusterResult{Nodes: len(c.Nodes), PodP99: Duration(c.Pod99)}
		if r.Cluster == nil || r.Cluster.Nodes != want.Nodes || r.Cluster.PodP99 != want.PodP99 || r.Cluster.Nodes < 2 {
			t.Fatalf("point %d: cluster figures %+v, want nodes %d, pod p99 %v", r.Point, r.Cluster, want.Nodes, want.PodP99)
		}
		if got, want := time.Duration(r.Cluster.SLIPerc99).Seconds(), c.SLI.Perc99; math.Abs(got-want) > 0.0005 || got == 0 {
			t.Errorf("point %d: SLI perc99 %vs, the replay's %vs", r.Point, got, want)
		}
		var worst float64
		for _, n := range c.Nodes {
			worst = max(worst, n.CPUPerHour)
		}
		if r.Cluster.NodeCPU <= 0 || r.Cluster.NodeCPU > r.Cluster.WorstNodeCPU || math.Abs(r.Cluster.WorstNodeCPU-worst) > 0.0005 {
			t.Errorf("point %d: node cpu-s/h mean %v, worst %v; the replay's worst %v", r.Point, r.Cluster.NodeCPU, r.Cluster.WorstNodeCPU, worst)
		}
	}
	if a, b := rep.Results[0].Cluster, rep.Results[1].Cluster; a.NodeCPU == b.NodeCPU && a.SLIPerc99 == b.SLIPerc99 {
		t.Errorf("minSyncPeriod 1s and 10s gave the same cluster figures: %+v", a)
	}
	if !strings.Contains(string(rep.Text()), "sli p99") {
		t.Errorf("no cluster columns:\n%s", rep.Text())
	}
	back, err := ReadCSV("t.csv", rep.Scenario, rep.CSV())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back.CSV(), rep.CSV()) || !bytes.Equal(back.Plot("sliPerc99", "nodeCPU"), rep.Plot("sliPerc99", "nodeCPU")) {
		t.Errorf("CSV read back:\n%s\nwant\n%s", back.CSV(), rep.CSV())
	}
	bad := strings.Replace(string(rep.CSV()), ","+rep.Results[1].Cluster.SLIPerc50.String()+",", ",soon,", 1)
	if _, err := ReadCSV("t.csv", "s", []byte(bad)); err == nil || !strings.HasPrefix(err.Error(), "t.csv:3: sli p50: \"soon\"") {
		t.Errorf("a bad cluster cell: error %v", err)
	}
	// One node: no cluster columns.
	if one := newSweep(t, "churn-iptables", "proxy.minSyncPeriod=1s").Run(All, RunOptions{}); strings.Contains(string(one.Text()), "sli p99") || one.Results[0].Cluster != nil {
		t.Errorf("a one-node sweep has cluster columns:\n%s", one.Text())
	}
}
