package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	serjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/replay"
)

var sweepSets = []string{"--set", "proxy.minSyncPeriod=0s,1s,10s", "--set", "proxy.version=v1.33.0,v1.34.0"}

func sweepArgs(extra ...string) []string {
	return append(append([]string{"sweep", "churn-iptables"}, sweepSets...), extra...)
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestSweepWritesTheSameTableAndPlotsEveryRun(t *testing.T) {
	dir := t.TempDir()
	var first []string
	for run := range 2 {
		svg, page := filepath.Join(dir, "p.svg"), filepath.Join(dir, "p.html")
		code, out, errs := runCLI(sweepArgs("--plot", svg, "--plot", page, "--plot-metric", "syncs")...)
		if code != exitPass || errs != "" {
			t.Fatalf("code %d\n%s%s", code, out, errs)
		}
		got := []string{out, readFile(t, svg), readFile(t, page)}
		if run == 0 {
			first = got
			continue
		}
		for i := range got {
			if got[i] != first[i] {
				t.Errorf("output %d differs between runs:\n%s\nthen\n%s", i, first[i], got[i])
			}
		}
	}
	lines := strings.Split(strings.TrimSpace(first[0]), "\n")
	if len(lines) != 8 || lines[0] != "sweep churn-iptables: 6 points" ||
		!strings.HasPrefix(lines[1], "point  proxy.minSyncPeriod  proxy.version  syncs  dataplaneOps") {
		t.Fatalf("table:\n%s", first[0])
	}
	// Columns line up: every row's syncs starts where the header's does.
	col := strings.Index(lines[1], "syncs")
	for _, l := range lines[2:] {
		if l[col-1] != ' ' || l[col] == ' ' {
			t.Errorf("row not aligned at column %d: %q", col, l)
		}
	}
	for _, f := range []string{"csv", "json"} {
		code, out, errs := runCLI(sweepArgs("--format", f)...)
		if code != exitPass || errs != "" {
			t.Fatalf("%s: code %d\n%s", f, code, errs)
		}
		if f == "csv" && !strings.HasPrefix(out, "point,proxy.minSyncPeriod,proxy.version,syncs,dataplaneOps,samples,p50,p99,max,sync p50,sync p99,sync max,sync cpu-s/h,full,partial,failed,first failure\n0,0s,v1.33.0,21,") {
			t.Errorf("csv:\n%s", out)
		}
		if f == "json" && !strings.Contains(out, `"format": "proxysim-sweep/v1"`) {
			t.Errorf("json:\n%s", out)
		}
	}
}

func TestSweepShardsMergeIntoTheWholeSweep(t *testing.T) {
	dir := t.TempDir()
	whole := filepath.Join(dir, "whole.json")
	if code, _, errs := runCLI(sweepArgs("--format", "json", "-o", whole)...); code != exitPass {
		t.Fatalf("code %d: %s", code, errs)
	}
	_, wholeText, _ := runCLI(sweepArgs()...)
	var shards []string
	for i := range 4 {
		name := filepath.Join(dir, "shard-"+string(rune('0'+i))+".json")
		shard := string(rune('0'+i)) + "/4"
		if i == 3 {
			// As an Indexed Job's pod runs it.
			t.Setenv("JOB_COMPLETION_INDEX", "3")
			shard = "/4"
		}
		if code, _, errs := runCLI(sweepArgs("--shard", shard, "--format", "json", "-o", name)...); code != exitPass {
			t.Fatalf("shard %s: code %d: %s", shard, code, errs)
		}
		if got := readFile(t, name); !strings.Contains(got, `"shard": "`+string(rune('0'+i))+`/4"`) {
			t.Fatalf("shard %d's report:\n%s", i, got)
		}
		shards = append(shards, name)
	}
	merged := filepath.Join(dir, "merged.json")
	if code, _, errs := runCLI(append([]string{"sweep", "merge", "--format", "json", "-o", merged}, shards...)...); code != exitPass {
		t.Fatalf("merge: code %d: %s", code, errs)
	}
	if a, b := readFile(t, merged), readFile(t, whole); a != b {
		t.Errorf("merged JSON differs from the whole sweep's:\n%s\nwant\n%s", a, b)
	}
	code, text, errs := runCLI(append([]string{"sweep", "merge"}, shards...)...)
	if code != exitPass || text != wholeText {
		t.Errorf("merged text (code %d, %s):\n%s\nwant\n%s", code, errs, text, wholeText)
	}
	// Shards that do not make one sweep exit 2, saying why.
	other := filepath.Join(dir, "other.json")
	runCLI("sweep", "churn-iptables", "--set", "proxy.minSyncPeriod=0s,1s", "--shard", "1/4", "--format", "json", "-o", other)
	for _, c := range []struct {
		files []string
		want  string
	}{
		{shards[:3], "no shard ran point 3 of 6"},
		{append(shards, shards[0]), "point 0 was run by " + shards[0] + " too"},
		{[]string{shards[0], other}, "swept proxy.minSyncPeriod=0s,1s, but " + shards[0] + " swept"},
		{[]string{shards[0], filepath.Join(dir, "none.json")}, "no such file"},
		{[]string{whole + "x"}, "no such file"},
	} {
		code, out, errs := runCLI(append([]string{"sweep", "merge"}, c.files...)...)
		if code != exitInvalid || out != "" || !strings.Contains(errs, c.want) {
			t.Errorf("merge %v: code %d, stderr %q, want exit 2 and %q\n%s", c.files, code, errs, c.want, out)
		}
	}
}

func TestSweepRefusesBadInputWithExitTwo(t *testing.T) {
	t.Setenv("JOB_COMPLETION_INDEX", "")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"sweep", "churn-iptables", "--set", "proxy.minSyncPerod=0s,1s"}, "--set proxy.minSyncPerod=0s: proxy.minSyncPerod: unknown field"},
		{[]string{"sweep", "churn-iptables", "--set", "proxy.minSyncPeriod=0s,soon"}, "--set proxy.minSyncPeriod=soon: proxy.minSyncPeriod:"},
		{[]string{"sweep", "churn-iptables", "--set", "proxy.version=v1.34.0,v9"}, "--set proxy.version=v9: proxy.version:"},
		{[]string{"sweep", "churn-iptables", "--set", "timeline[9].at=1s"}, "--set timeline[9].at=1s: timeline has 3 entries: no [9]"},
		{[]string{"sweep", "churn-iptables", "--set", "proxy.minSyncPeriod"}, "--set proxy.minSyncPeriod: want KEY=VALUE"},
		{[]string{"sweep", "churn-iptables"}, "--set: give at least one setting"},
		{sweepArgs("--shard", "/4"), "--shard /4: JOB_COMPLETION_INDEX is not set"},
		{sweepArgs("--shard", "4/4"), "--shard 4/4: shard index \"4\" must be a number from 0 to 3"},
		{sweepArgs("--shard", "1/0"), "--shard 1/0: want I/N"},
		{sweepArgs("--workers", "0"), "--workers 0: must be at least 1"},
		{sweepArgs("--format", "xml"), "--format \"xml\": want text, csv or json"},
		{sweepArgs("--format", "text", "-o", "all.json"), "--format text conflicts with -o all.json, which names a json file"},
		{sweepArgs("--format", "json", "-o", "all.csv"), "--format json conflicts with -o all.csv, which names a csv file"},
		{[]string{"sweep", "merge", "--format", "csv", "-o", "m.JSON", "x.json"}, "--format csv conflicts with -o m.JSON"},
		{sweepArgs("--plot", "p.png"), "--plot p.png: name an .svg or .html file"},
		{sweepArgs("--plot-metric", "cost"), "--plot-metric \"cost\": want one of"},
		{[]string{"sweep", "no-such-scenario", "--set", "proxy.version=v1.34.0"}, "no-such-scenario: no such file"},
	} {
		code, out, errs := runCLI(c.args...)
		if code != exitInvalid || out != "" || !strings.Contains(errs, c.want) {
			t.Errorf("%v: code %d, stderr %q, want exit 2 and %q\n%s", c.args, code, errs, c.want, out)
		}
	}
	t.Setenv("JOB_COMPLETION_INDEX", "2")
	for _, arg := range []string{"/3", "$JOB_COMPLETION_INDEX/3", "${JOB_COMPLETION_INDEX}/3", "$(JOB_COMPLETION_INDEX)/3", "2/3"} {
		if s, err := parseShard(arg, os.Getenv("JOB_COMPLETION_INDEX")); err != nil || s.Index != 2 || s.Count != 3 {
			t.Errorf("--shard %s: %v, %v; want 2/3", arg, s, err)
		}
	}
	if s, err := parseShard("1/3", "2"); err != nil || s.Index != 1 {
		t.Errorf("an explicit index should win over JOB_COMPLETION_INDEX: %v, %v", s, err)
	}
	t.Setenv("JOB_COMPLETION_INDEX", "x")
	if code, _, errs := runCLI(sweepArgs("--shard", "/4")...); code != exitInvalid || !strings.Contains(errs, `shard index "x" (JOB_COMPLETION_INDEX) must be`) {
		t.Errorf("bad JOB_COMPLETION_INDEX: code %d, %s", code, errs)
	}
}

// fakeClock is a wall clock the test moves.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func TestProgressIsSilentOffATerminal(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	clk := &fakeClock{t: time.Unix(0, 0)}
	p := newProgress(w, isTerminal, clk.now)
	for i := range 50 {
		clk.t = clk.t.Add(time.Second)
		p.show(func() string { return sweepLine("x", i, 50) })
	}
	p.done()
	w.Close()
	got, _ := io.ReadAll(r)
	if len(got) != 0 {
		t.Errorf("a pipe got %q", got)
	}
}

func TestProgressDrawsOnATerminalAfterASecond(t *testing.T) {
	var b bytes.Buffer
	clk := &fakeClock{t: time.Unix(0, 0)}
	p := newProgress(&b, func(io.Writer) bool { return true }, clk.now)
	p.show(func() string { return "early" })
	clk.t = clk.t.Add(900 * time.Millisecond)
	p.show(func() string { return "early" })
	if b.Len() != 0 {
		t.Fatalf("drew in the first second: %q", b.String())
	}
	clk.t = clk.t.Add(200 * time.Millisecond)
	p.show(func() string { return replayLine("churn", 30*time.Second, 2*time.Minute) })
	p.show(func() string { return "too soon" }) // no time passed: throttled
	clk.t = clk.t.Add(progressEvery)
	p.show(func() string { return sweepLine("churn", 3, 6) })
	p.done()
	want := "\rproxysim: churn: 30s of 2m0s virtual time (25%)\x1b[K" + "\rproxysim: sweep churn: 3/6 points done\x1b[K" + "\r\x1b[K"
	if b.String() != want {
		t.Errorf("drew %q, want %q", b.String(), want)
	}
}

func TestReplayReportsTheVirtualTimeReached(t *testing.T) {
	s, err := scenarios.LoadLibrary("churn-iptables")
	if err != nil {
		t.Fatal(err)
	}
	var seen []time.Duration
	if _, err := replay.Replay(s, replay.Options{Progress: func(d time.Duration) { seen = append(seen, d) }}); err != nil {
		t.Fatal(err)
	}
	if len(seen) < 10 || seen[len(seen)-1] != s.Length() {
		t.Fatalf("progress %v, want many instants ending at %v", seen, s.Length())
	}
	for i := 1; i < len(seen); i++ {
		if seen[i] < seen[i-1] {
			t.Fatalf("virtual time went back: %v after %v", seen[i], seen[i-1])
		}
	}
}

// TestIndexedJobExampleIsAJobThatRunsTheSweep reads docs/sweep-indexed-job.yaml
// as the API server would (strictly, as batch/v1), checks that its shards
// cover the sweep, and runs its pod's command for one index.
func TestIndexedJobExampleIsAJobThatRunsTheSweep(t *testing.T) {
	data, err := os.ReadFile("../../docs/sweep-indexed-job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dec := serjson.NewSerializerWithOptions(serjson.DefaultMetaFactory, scheme.Scheme, scheme.Scheme, serjson.SerializerOptions{Yaml: true, Strict: true})
	obj, gvk, err := dec.Decode(data, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	job, ok := obj.(*batchv1.Job)
	if !ok || gvk.Group != "batch" || gvk.Version != "v1" {
		t.Fatalf("decoded %s as %T", gvk, obj)
	}
	spec := job.Spec
	if spec.CompletionMode == nil || *spec.CompletionMode != batchv1.IndexedCompletion || spec.Completions == nil || spec.Parallelism == nil {
		t.Fatalf("not an Indexed Job with completions and parallelism: %+v", spec)
	}
	if len(spec.Template.Spec.Containers) != 1 {
		t.Fatalf("%d containers", len(spec.Template.Spec.Containers))
	}
	c := spec.Template.Spec.Containers[0]
	args := append([]string(nil), c.Args...)
	shard, out := -1, -1
	for i, a := range args {
		switch a {
		case "--shard":
			shard = i + 1
		case "-o":
			out = i + 1
		}
	}
	if len(args) < 2 || args[0] != "sweep" || shard < 0 || out < 0 {
		t.Fatalf("the pod does not run a sweep shard writing a file: %q", args)
	}
	n := int(*spec.Completions)
	if want := "/" + string(rune('0'+n)); args[shard] != want || n > 9 {
		t.Errorf("--shard %s, but the Job has %d completions: want --shard %s", args[shard], n, want)
	}
	if *spec.Parallelism < 1 || *spec.Parallelism > *spec.Completions {
		t.Errorf("parallelism %d with %d completions", *spec.Parallelism, *spec.Completions)
	}
	var mounted bool
	for _, m := range c.VolumeMounts {
		mounted = mounted || strings.HasPrefix(args[out], m.MountPath+"/")
	}
	if !mounted || !strings.Contains(args[out], "$(JOB_COMPLETION_INDEX)") {
		t.Errorf("-o %s: want a file per index on a mounted volume", args[out])
	}
	// Run every index's command as the pods would, then merge.
	dir := t.TempDir()
	var files []string
	for i := range n {
		t.Setenv("JOB_COMPLETION_INDEX", string(rune('0'+i)))
		args[out] = filepath.Join(dir, "shard-"+string(rune('0'+i))+".json")
		if code, _, errs := runCLI(args...); code != exitPass {
			t.Fatalf("index %d: %q: code %d: %s", i, args, code, errs)
		}
		files = append(files, args[out])
	}
	if code, text, errs := runCLI(append([]string{"sweep", "merge"}, files...)...); code != exitPass || !strings.Contains(text, "points") {
		t.Errorf("merge: code %d: %s%s", code, text, errs)
	}
}

// TestSweepExamplePlotIsCurrent checks that docs/sweep-example.svg, the
// plot in docs/how-to/sweep.md, is what the Makefile's SWEEP_EXAMPLE sweep draws today.
func TestSweepExamplePlotIsCurrent(t *testing.T) {
	mk := readFile(t, "../../Makefile")
	var args []string
	for _, l := range strings.Split(mk, "\n") {
		if v, ok := strings.CutPrefix(l, "SWEEP_EXAMPLE = "); ok {
			args = strings.Fields(v)
		}
	}
	if len(args) == 0 {
		t.Fatal("the Makefile has no SWEEP_EXAMPLE")
	}
	svg := filepath.Join(t.TempDir(), "example.svg")
	if code, _, errs := runCLI(append(append([]string{"sweep"}, args...), "--plot", svg)...); code != exitPass {
		t.Fatalf("code %d: %s", code, errs)
	}
	if readFile(t, svg) != readFile(t, "../../docs/sweep-example.svg") {
		t.Errorf("docs/sweep-example.svg is not what the sweep draws now: run `make sweep-example` and review the picture")
	}
}

func TestSweepPointThatCannotRunExitsThreeAndSaysWhyInItsRow(t *testing.T) {
	code, out, errs := runCLI(sweepArgs("--max-events", "30")...)
	if code != exitCannotRun || !strings.Contains(errs, "6 of 6 points could not run") {
		t.Fatalf("code %d, stderr %q", code, errs)
	}
	if n := strings.Count(out, "error: churn-iptables.yaml: replay stopped at"); n != 6 {
		t.Errorf("%d rows say the budget stopped them:\n%s", n, out)
	}
	// With room, the same sweep runs.
	if code, _, errs := runCLI(sweepArgs("--max-events", "100000")...); code != exitPass {
		t.Errorf("code %d: %s", code, errs)
	}
}

// -o FILE.json without --format writes the JSON report (which merge reads),
// FILE.csv the CSV; another extension keeps text.
func TestSweepOutputFormatFollowsTheFileExtension(t *testing.T) {
	dir := t.TempDir()
	sets := []string{"sweep", "churn-iptables", "--set", "proxy.minSyncPeriod=0s,1s"}
	_, wantJSON, _ := runCLI(append(sets, "--format", "json")...)
	_, wantCSV, _ := runCLI(append(sets, "--format", "csv")...)
	_, wantText, _ := runCLI(sets...)
	for _, c := range []struct{ file, want string }{
		{"all.json", wantJSON}, {"all.csv", wantCSV}, {"all.txt", wantText}, {"all", wantText},
		{"same.json", wantJSON}, // --format agreeing with the extension is fine
	} {
		name := filepath.Join(dir, c.file)
		args := append(sets, "-o", name)
		if c.file == "same.json" {
			args = append(args, "--format", "json")
		}
		if code, out, errs := runCLI(args...); code != exitPass || out != "" {
			t.Fatalf("-o %s: code %d, stdout %q, %s", c.file, code, out, errs)
		}
		if got := readFile(t, name); got != c.want {
			t.Errorf("-o %s wrote:\n%s\nwant\n%s", c.file, got, c.want)
		}
	}
	if !strings.HasPrefix(wantJSON, "{") || !strings.Contains(wantCSV, ",") {
		t.Fatalf("formats not told apart:\n%s\n%s", wantJSON, wantCSV)
	}
	// merge reads the .json file the sweep wrote without --format, and
	// writes its own -o by extension too.
	merged := filepath.Join(dir, "merged.csv")
	if code, _, errs := runCLI("sweep", "merge", "-o", merged, filepath.Join(dir, "all.json")); code != exitPass {
		t.Fatalf("merge: code %d: %s", code, errs)
	}
	if got := readFile(t, merged); got != wantCSV {
		t.Errorf("merge -o merged.csv:\n%s\nwant\n%s", got, wantCSV)
	}
	// A refused combination writes nothing.
	bad := filepath.Join(dir, "bad.json")
	if code, _, _ := runCLI(append(sets, "--format", "text", "-o", bad)...); code != exitInvalid {
		t.Errorf("conflicting --format: code %d, want %d", code, exitInvalid)
	}
	if _, err := os.Stat(bad); !os.IsNotExist(err) {
		t.Errorf("a refused sweep wrote %s: %v", bad, err)
	}
}
