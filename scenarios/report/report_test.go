package report

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/proxysim/proxysim/scenarios"
	_ "github.com/proxysim/proxysim/scenarios/controllers"
	_ "github.com/proxysim/proxysim/scenarios/ingressnginx"
	_ "github.com/proxysim/proxysim/scenarios/iptablesmode"
	_ "github.com/proxysim/proxysim/scenarios/ipvsmode"
	_ "github.com/proxysim/proxysim/scenarios/nftablesmode"
	"github.com/proxysim/proxysim/scenarios/replay"
	"github.com/proxysim/proxysim/sim"
	"github.com/proxysim/proxysim/sim/proxy"
	"github.com/proxysim/proxysim/sim/trace"
)

// failing is a scenario whose expectations fail on purpose: three flips,
// four runs, eight failed checks (one a golden table).
const failing = "../testdata/failing/churn-and-counts.yaml"

func load(t testing.TB, name string) *scenarios.Scenario {
	t.Helper()
	var s *scenarios.Scenario
	var err error
	if strings.HasSuffix(name, ".yaml") {
		s, err = scenarios.Load(name)
	} else {
		s, err = scenarios.LoadLibrary(name)
	}
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func page(t testing.TB, s *scenarios.Scenario, cfg Config) ([]byte, *Timeline, *replay.Result) {
	t.Helper()
	tl, res, err := Replay(s, replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := Write(&b, tl, cfg); err != nil {
		t.Fatal(err)
	}
	return b.Bytes(), tl, res
}

// doc is a parsed page.
type doc struct{ root *html.Node }

func parse(t testing.TB, b []byte) doc {
	t.Helper()
	n, err := html.Parse(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return doc{n}
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func hasClass(n *html.Node, cls ...string) bool {
	have := strings.Fields(attr(n, "class"))
	for _, c := range cls {
		found := false
		for _, h := range have {
			found = found || h == c
		}
		if !found {
			return false
		}
	}
	return true
}

// all lists the elements named tag ("" any) with every class given.
func (d doc) all(tag string, cls ...string) []*html.Node {
	var out []*html.Node
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && (tag == "" || n.Data == tag) && hasClass(n, cls...) {
			out = append(out, n)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(d.root)
	return out
}

func (d doc) byID(id string) *html.Node {
	var found *html.Node
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && attr(n, "id") == id {
			found = n
		}
		for c := n.FirstChild; c != nil && found == nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(d.root)
	return found
}

func text(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return b.String()
}

// laneNames are the lanes the SVG draws, in order.
func (d doc) laneNames() []string {
	var out []string
	for _, n := range d.all("text", "lanename") {
		out = append(out, text(n))
	}
	return out
}

func (d doc) data(t testing.TB) pageData {
	t.Helper()
	n := d.byID("data")
	if n == nil {
		t.Fatal("no #data script")
	}
	var p pageData
	if err := json.Unmarshal([]byte(text(n)), &p); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestFailingScenarioDrawsLanesBarsAndRedChecks(t *testing.T) {
	b, tl, res := page(t, load(t, failing), Config{})
	if res.Passed() || len(res.Failures) != 8 {
		t.Fatalf("want the failing scenario's 8 failures, got %d", len(res.Failures))
	}
	d := parse(t, b)
	want := []string{"scenario · steps", "scenario · checks", "proxy · objects", "proxy · Run() requests", "proxy · runs", "proxy · dataplane"}
	if got := d.laneNames(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("lanes %q, want %q", got, want)
	}
	// Every run a bar on the runs lane, with its instant and cost.
	bars := d.all("rect", "m", "bar", "run")
	if len(bars) != len(res.Runs) || len(bars) != 4 {
		t.Fatalf("%d run bars, %d runs", len(bars), len(res.Runs))
	}
	for i, bar := range bars {
		title := text(bar)
		r := res.Runs[i]
		if !strings.Contains(title, "run "+strconv.Itoa(r.N)+" ") || !strings.Contains(title, "cost "+(r.End-r.Start).String()) {
			t.Errorf("bar %d says %q; run %d %v to %v", i, title, r.N, r.Start, r.End)
		}
	}
	// Each failure a red diamond, with a red line across the lanes.
	fails := d.all("path", "m", "check", "fail")
	if len(fails) != 8 {
		t.Fatalf("%d failed checks drawn, want 8", len(fails))
	}
	if !strings.Contains(text(fails[len(fails)-1]), "3s check op=fail detail=timeline[3].expect.ipvs") {
		t.Errorf("last failed check says %q", text(fails[len(fails)-1]))
	}
	if n := len(d.all("line", "failline")); n != 8 {
		t.Errorf("%d fail lines, want 8", n)
	}
	if n := len(d.all("path", "m", "check", "pass")); n != 0 {
		t.Errorf("%d passed checks drawn, want 0", n)
	}
	// Every dataplane operation a tick.
	if n := len(d.all("rect", "m", "tick", "dp")); n != len(tl.Lanes[5].Marks) || n != 12 {
		t.Errorf("%d dataplane ticks, lane has %d", n, len(tl.Lanes[5].Marks))
	}
	// The failures listed, the golden table's as a diff.
	items := d.all("li")
	if len(items) != 8 || !strings.Contains(text(items[7]), "- ") || len(d.all("span", "del")) != 1 {
		t.Errorf("failures list: %d items, last %q", len(items), text(items[len(items)-1]))
	}
	// The snapshot shown first is the last one: 10.244.3.4 is gone.
	snap := text(d.byID("snaptext"))
	if !strings.Contains(snap, "10.244.2.3:8080") || strings.Contains(snap, "10.244.3.4:8080") {
		t.Errorf("snapshot panel:\n%s", snap)
	}
	if attr(d.byID("marks"), "data-render") != "static" || attr(d.all("body")[0], "data-drawn") != "static" {
		t.Error("the page's SVG should be drawn by Go until the script redraws it")
	}
	// Nothing is fetched: no src or href but the failures' anchors.
	for _, n := range d.all("") {
		if s := attr(n, "src") + attr(n, "href"); s != "" && s != "#" {
			t.Errorf("<%s> refers to %q", n.Data, s)
		}
	}
}

// Snapshots follow the dataplane: after each run that changed it, the new
// state; a run that changes nothing adds none.
func TestSnapshotsAfterEachRunThatChangedTheDataplane(t *testing.T) {
	b, tl, _ := page(t, load(t, failing), Config{})
	var got []string
	for _, s := range tl.Snapshots {
		has := strings.Contains(tl.Texts[s.Text], "10.244.3.4")
		got = append(got, s.At.String()+" "+s.Why+" "+strconv.Itoa(s.Run)+" "+strconv.FormatBool(has))
	}
	// The startup sysctls change no table: the empty table is the first.
	want := []string{"0s after startup writes 0 false", "0s after run 1 true", "1s after run 2 false", "1.1s after run 3 true", "1.2s after run 4 false"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("snapshots\n got %q\nwant %q", got, want)
	}
	p := parse(t, b).data(t)
	at, run := int64(0), 0
	for i := range p.Snaps.T {
		at += p.Snaps.T[i]
		run += p.Snaps.R[i]
	}
	// Times in milliseconds (every instant is whole), as differences.
	if len(p.Snaps.T) != 5 || len(p.Snaps.Texts) != 3 || p.Snaps.Whys[p.Snaps.W[4]] != "after run" || run != 4 || at != 1200 || p.Unit != 1e6 {
		t.Errorf("page snapshots: %+v", p.Snaps)
	}
}

// A deferral shows the reason and the instant it waits for, drawn as a
// wait to that instant.
func TestDeferralsShowTheirReasonAndWait(t *testing.T) {
	b, _, res := page(t, load(t, "cooldown-v1.34"), Config{})
	if !res.Passed() {
		t.Fatal(res.Failures)
	}
	d := parse(t, b)
	ticks := d.all("rect", "m", "tick", "defer")
	waits := d.all("line", "wait")
	if len(ticks) == 0 || len(waits) != len(ticks) {
		t.Fatalf("%d deferrals, %d waits", len(ticks), len(waits))
	}
	first := text(ticks[0])
	if !strings.Contains(first, "run deferred (cooldown) until 2s") || !strings.HasPrefix(first, "1.02s ") || !strings.Contains(first, "waits 980ms") {
		t.Errorf("first deferral says %q", first)
	}
	// The wait ends where the run at 2s starts.
	var run2 *html.Node
	for _, bar := range d.all("rect", "bar") {
		if strings.HasPrefix(text(bar), "2s run ") {
			run2 = bar
		}
	}
	if run2 == nil || attr(waits[0], "x2") != attr(run2, "x") {
		t.Errorf("the first wait ends at x=%s, the run at 2s starts at %v", attr(waits[0], "x2"), run2)
	}
	if n := len(d.all("path", "m", "check", "pass")); n != 2 {
		t.Errorf("%d passed checks, want 2", n)
	}
}

// A controller gets lanes of its own: what it was sent, what it wrote,
// its syncs.
func TestControllerLanes(t *testing.T) {
	b, _, _ := page(t, load(t, "rolling-update-batch-1s"), Config{})
	names := strings.Join(parse(t, b).laneNames(), "|")
	for _, l := range []string{"endpointslice-controller · objects", "endpointslice-controller · writes", "endpointslice-controller · syncs"} {
		if !strings.Contains(names, l) {
			t.Errorf("no lane %q in %s", l, names)
		}
	}
	if !strings.HasPrefix(names, "scenario · steps|scenario · checks|proxy · objects") {
		t.Errorf("lane order: %s", names)
	}
}

// The same replay gives the same page, byte for byte.
func TestPageIsDeterministic(t *testing.T) {
	for _, name := range []string{failing, "rolling-update-batch-1s", "iptables-partial-sync"} {
		a, _, _ := page(t, load(t, name), Config{})
		b, _, _ := page(t, load(t, name), Config{})
		if !bytes.Equal(a, b) {
			t.Errorf("%s: two pages differ", name)
		}
	}
}

// An hour of churn at 10 changes a second: the whole view is drawn as
// counts per column, the page stays small, and past MaxMarks the busy
// lanes are thinned with exact counts kept.
func TestHourOfChurnStaysBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("an hour of churn takes seconds to replay")
	}
	s := hourOfChurn(t, "ipvs")
	tl, res, err := Replay(s, replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Passed() {
		t.Fatal(res.Failures)
	}
	var whole bytes.Buffer
	if err := Write(&whole, tl, Config{}); err != nil {
		t.Fatal(err)
	}
	if whole.Len() > 4<<20 {
		t.Errorf("the page of an hour of churn is %d bytes", whole.Len())
	}
	d := parse(t, whole.Bytes())
	for _, g := range d.all("g", "lanemarks") {
		cols, marks := 0, 0
		for c := g.FirstChild; c != nil; c = c.NextSibling {
			if hasClass(c, "agg") {
				cols++
			} else {
				marks++
			}
		}
		if cols > plotW/colW || marks > plotW/colW {
			t.Errorf("lane %s: %d columns and %d marks drawn", attr(g, "data-lane"), cols, marks)
		}
	}
	if n := len(d.all("rect", "agg", "k-runs")); n < plotW/colW/2 {
		t.Errorf("the runs lane drawn as %d columns", n)
	}
	p := d.data(t)
	total, marks := 0, 0
	for i, l := range p.Lanes {
		total += len(l.T)
		marks += len(tl.Lanes[i].Marks)
		if l.H != nil {
			t.Errorf("%s thinned under the default budget", l.Name)
		}
	}
	// Every event is a mark but run ends, which end their run's bar.
	if total != marks || marks != tl.Events-tl.Runs {
		t.Errorf("the page holds %d events, the lanes %d, the trace had %d and %d runs", total, marks, tl.Events, tl.Runs)
	}
	if len(p.Snaps.T) != len(tl.Snapshots) || len(tl.Snapshots) < 36000 {
		t.Errorf("%d snapshots on the page, %d taken", len(p.Snaps.T), len(tl.Snapshots))
	}

	var thinned bytes.Buffer
	if err := Write(&thinned, tl, Config{MaxMarks: 40_000}); err != nil {
		t.Fatal(err)
	}
	if thinned.Len() >= whole.Len()/2 {
		t.Errorf("thinned page %d bytes, whole %d", thinned.Len(), whole.Len())
	}
	p = parse(t, thinned.Bytes()).data(t)
	total = 0
	for _, l := range p.Lanes {
		total += len(l.T)
		if l.H == nil {
			continue
		}
		sum := 0
		for _, c := range l.H {
			sum += c
		}
		if sum != l.Total || len(l.H) != HistBuckets {
			t.Errorf("%s: histogram counts %d of %d events", l.Name, sum, l.Total)
		}
	}
	if total > 40_000+100 || len(p.Notes) != 5 || len(p.Snaps.T) > 10_000 {
		t.Errorf("thinned page holds %d events and %d snapshots, notes %q", total, len(p.Snaps.T), p.Notes)
	}
}

// Thinning never drops a failure, and keeps small lanes whole.
func TestThinKeepsFailuresAndSmallLanes(t *testing.T) {
	tl := &Timeline{End: 1000, Labels: []Label{{"dp", "op"}, {"dp fail", "op failed"}, {"check fail", "x"}}}
	busy := &Lane{Name: "proxy · dataplane", Kind: KindDataplane}
	for i := 0; i < 1000; i++ {
		lab := 0
		if i%97 == 1 {
			lab = 1
		}
		busy.Marks = append(busy.Marks, Mark{At: time.Duration(i), Label: lab})
	}
	checks := &Lane{Name: "scenario · checks", Kind: KindChecks, Marks: []Mark{{At: 5, Label: 2}}}
	tl.Lanes = []*Lane{checks, busy}
	lanes, notes := thin(tl, 101)
	if len(lanes[0].marks) != 1 || lanes[0].hist != nil {
		t.Errorf("small lane thinned: %+v", lanes[0])
	}
	failsKept := 0
	for _, m := range lanes[1].marks {
		if m.Label == 1 {
			failsKept++
		}
	}
	if failsKept != 11 || len(lanes[1].marks) > 100+11 || len(notes) != 1 {
		t.Errorf("kept %d marks, %d of 11 failures, notes %q", len(lanes[1].marks), failsKept, notes)
	}
}

// Every bundled scenario makes a page: lanes, a run bar at least (every
// scenario syncs), and data the script can read.
func TestEveryLibraryScenarioMakesAPage(t *testing.T) {
	for _, name := range scenarios.TestedLibraryNames() {
		s := load(t, name)
		tl, res, err := Replay(s, replay.Options{})
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		var b bytes.Buffer
		if err := Write(&b, tl, Config{}); err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		d := parse(t, b.Bytes())
		p := d.data(t)
		if len(d.laneNames()) != len(p.Lanes) || len(p.Lanes) < 3 || p.Passed != res.Passed() {
			t.Errorf("%s: %d lanes drawn, %d in the data", name, len(d.laneNames()), len(p.Lanes))
		}
		if res.Passed() && len(d.all("", "m", "check", "pass"))+len(d.all("rect", "agg", "k-checks")) == 0 && res.Checks > 0 {
			t.Errorf("%s: %d checks, none drawn", name, res.Checks)
		}
		if len(res.Runs) > 0 && len(d.all("rect", "bar"))+len(d.all("rect", "agg", "k-runs")) == 0 {
			t.Errorf("%s: %d runs, none drawn", name, len(res.Runs))
		}
	}
}

// fakeDataplane is a dataplane whose state is a string the test sets.
type fakeDataplane struct {
	state string
	reads int
}

func (f *fakeDataplane) Name() string                                 { return "test" }
func (f *fakeDataplane) NewBackend(*sim.World) (proxy.Backend, error) { return nil, nil }
func (f *fakeDataplane) Snapshot() (string, error)                    { f.reads++; return f.state, nil }
func (f *fakeDataplane) Close() error                                 { return nil }

// The collector reads the dataplane at the end of a run that changed it
// and at once after a change outside a run, keeps only new states, and
// draws a run that never ended to the end of the replay.
func TestCollectorSnapshotsAndOpenRuns(t *testing.T) {
	c := NewCollector()
	dp := &fakeDataplane{state: "empty"}
	ev := func(at time.Duration, e trace.Event) {
		e.At = trace.Duration(at)
		c.Follow(e, dp)
	}
	ev(0, trace.Event{Kind: trace.Dataplane, Op: "sysctl"}) // outside a run: read now
	ev(0, trace.Event{Kind: trace.Start, Why: "initial", Run: 1})
	dp.state = "one"
	ev(0, trace.Event{Kind: trace.Dataplane, Op: "add"})
	ev(0, trace.Event{Kind: trace.Dataplane, Op: "add"})
	ev(time.Second, trace.Event{Kind: trace.End, Run: 1}) // read once, at the end
	ev(2*time.Second, trace.Event{Kind: trace.Start, Why: "request", Run: 2})
	ev(3*time.Second, trace.Event{Kind: trace.End, Run: 2}) // nothing changed: not read
	ev(4*time.Second, trace.Event{Kind: trace.Dataplane, Op: "weight"})
	ev(5*time.Second, trace.Event{Kind: trace.Start, Why: "periodic", Run: 3})
	tl := c.Finish(&replay.Result{Scenario: &scenarios.Scenario{Name: "x"}})
	if dp.reads != 3 {
		t.Errorf("%d reads of the dataplane, want 3", dp.reads)
	}
	var got []string
	for _, s := range tl.Snapshots {
		got = append(got, fmt.Sprintf("%v %s %d %s", s.At, s.Why, s.Run, tl.Texts[s.Text]))
	}
	// The weight change left the state as it was ("one"): no new snapshot.
	if want := "0s after startup writes 0 empty|1s after run 1 one"; strings.Join(got, "|") != want {
		t.Errorf("snapshots %q, want %q", got, want)
	}
	runs := tl.Lanes[len(tl.Lanes)-2]
	if runs.Kind != KindRuns || len(runs.Marks) != 3 {
		t.Fatalf("lanes %+v", tl.Lanes)
	}
	open := runs.Marks[2]
	if open.Dur != 0 || tl.Labels[open.Label] != (Label{"run open", "run (periodic), did not end"}) || runs.Marks[0].Dur != time.Second {
		t.Errorf("runs %+v, open run label %+v", runs.Marks, tl.Labels[open.Label])
	}
}

// The SVG is well-formed XML on its own (it can be cut out of the page and
// opened as an .svg file).
func TestSVGIsWellFormedXML(t *testing.T) {
	for _, name := range []string{failing, "rolling-update-batch-1s"} {
		b, _, _ := page(t, load(t, name), Config{})
		i, j := bytes.Index(b, []byte("<svg")), bytes.Index(b, []byte("</svg>"))
		dec := xml.NewDecoder(bytes.NewReader(b[i : j+len("</svg>")]))
		elements := 0
		for {
			tok, err := dec.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if _, ok := tok.(xml.StartElement); ok {
				elements++
			}
		}
		if elements < 50 {
			t.Errorf("%s: %d SVG elements", name, elements)
		}
	}
}

// A timeline with nothing in it still makes a page, with empty lists.
func TestEmptyTimeline(t *testing.T) {
	var b bytes.Buffer
	if err := Write(&b, &Timeline{Scenario: "empty"}, Config{}); err != nil {
		t.Fatal(err)
	}
	p := parse(t, b.Bytes()).data(t)
	if p.Labels == nil || p.Lanes == nil || p.Snaps.T == nil || p.Failures == nil || p.End != 0 {
		t.Errorf("empty page data: %+v", p)
	}
	if !bytes.Contains(b.Bytes(), []byte(`"labels":[]`)) {
		t.Error("an empty list is written as null")
	}
}
