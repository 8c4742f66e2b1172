package report

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/replay"
	"github.com/proxysim/proxysim/sim"
	"github.com/proxysim/proxysim/sim/trace"
)

//go:embed page.css
var pageCSS string

//go:embed page.js
var pageJS string

// Config bounds a page.
type Config struct {
	// MaxMarks is how many events the page holds one by one (default
	// DefaultMaxMarks). A longer trace keeps every failed check, run and
	// operation, thins the busiest lanes evenly, and gives each thinned lane
	// exact counts per 1/HistBuckets of the timeline for the zoomed-out
	// view.
	MaxMarks int
	// MaxSnapshotBytes bounds the distinct dataplane texts the page holds
	// (default DefaultMaxSnapshotBytes); past it, snapshots are thinned
	// evenly, the first and the last kept.
	MaxSnapshotBytes int
	// MaxSyncRows bounds the rows of the syncs table (default
	// DefaultMaxSyncRows): the first ones are listed, and every sync's cost
	// still shows on hover.
	MaxSyncRows int
}

// Defaults: an hour of churn at 10 changes a second fits whole.
const (
	DefaultMaxMarks         = 400_000
	DefaultMaxSnapshotBytes = 4 << 20
	HistBuckets             = 4096
	DefaultMaxSyncRows      = 500
)

// Replay replays s with opts, following it for the page; the trace is not
// kept beyond what a failure shows unless opts asks for it.
func Replay(s *scenarios.Scenario, opts replay.Options) (*Timeline, *replay.Result, error) {
	c := NewCollector()
	prev := opts.Follow
	opts.Follow = func(e trace.Event, dp scenarios.Dataplane) {
		c.Follow(e, dp)
		if prev != nil {
			prev(e, dp)
		}
	}
	if opts.TraceKeep == 0 && opts.TraceStream == nil {
		opts.TraceKeep = 256
	}
	// A cluster's light nodes keep no sync records: the heat map sums
	// theirs per column as they end.
	var heat *heatCollector
	if len(s.Nodes()) > 1 {
		heat = newHeatCollector(s.Length())
		prevWorld := opts.World
		opts.World = func(w *sim.World) error {
			if err := heat.watch(w); err != nil {
				return err
			}
			if prevWorld != nil {
				return prevWorld(w)
			}
			return nil
		}
	}
	res, err := replay.Replay(s, opts)
	if err != nil {
		return nil, nil, err
	}
	t := c.Finish(res)
	if heat != nil && res.Cluster != nil {
		t.Cluster = heat.view(res.Cluster, t.End)
	}
	return t, res, nil
}

// pageData is the page's JSON: times are integers in Unit nanoseconds,
// each lane's as differences from the previous mark.
type pageData struct {
	Name     string        `json:"name"`
	File     string        `json:"file"`
	Mode     string        `json:"mode"`
	Env      string        `json:"env"`
	Passed   bool          `json:"passed"`
	Checks   int           `json:"checks"`
	Runs     int           `json:"runs"`
	Events   int           `json:"events"`
	Unit     int64         `json:"unit"`
	End      int64         `json:"end"`
	Labels   [][2]string   `json:"labels"`
	Lanes    []laneData    `json:"lanes"`
	Snaps    snapData      `json:"snaps"`
	Failures []failureData `json:"failures"`
	Notes    []string      `json:"notes"`
	// Syncs is each run's cost and work for its details on hover: run
	// i+1's is SyncTexts[Syncs[i]], each distinct text held once.
	Syncs     []int    `json:"syncs"`
	SyncTexts []string `json:"syncTexts"`
}

type laneData struct {
	Name  string  `json:"name"`
	Kind  string  `json:"kind"`
	Total int     `json:"total"` // marks in the trace
	T     []int64 `json:"t"`
	L     []int   `json:"l"`
	D     []int64 `json:"d,omitempty"` // runs and deferrals: length, -1 none
	R     []int   `json:"r,omitempty"` // runs: the run's number, as differences
	H     []int   `json:"h,omitempty"` // thinned lanes: exact counts per bucket
}

// snapData: the snapshots kept, in time order; I indexes Texts, W indexes
// Whys, R is the run each follows (0 none); T and R as differences.
type snapData struct {
	Texts []string `json:"texts"`
	Whys  []string `json:"whys"`
	T     []int64  `json:"t"`
	I     []int    `json:"i"`
	W     []int    `json:"w"`
	R     []int    `json:"r"`
	Total int      `json:"total"`
}

type failureData struct {
	At       int64    `json:"at"`
	Where    string   `json:"where"`
	Expected string   `json:"expected"`
	Got      string   `json:"got"`
	Diff     []string `json:"diff,omitempty"`
}

// Write renders t as one self-contained HTML page: inline CSS, script and
// SVG, nothing fetched. The SVG drawn here is the whole timeline; the
// script redraws it on zoom and pan.
func Write(w io.Writer, t *Timeline, cfg Config) error {
	if cfg.MaxMarks <= 0 {
		cfg.MaxMarks = DefaultMaxMarks
	}
	if cfg.MaxSnapshotBytes <= 0 {
		cfg.MaxSnapshotBytes = DefaultMaxSnapshotBytes
	}
	if cfg.MaxSyncRows <= 0 {
		cfg.MaxSyncRows = DefaultMaxSyncRows
	}
	lanes, notes := thin(t, cfg.MaxMarks)
	unit := timeUnit(t, lanes)
	d := pageData{Name: t.Scenario, File: t.File, Mode: t.Mode, Env: t.Env, Passed: t.Passed,
		Checks: t.Checks, Runs: t.Runs, Events: t.Events, Unit: int64(unit), End: int64(t.End / unit), Notes: notes}
	// Empty lists as [], never null: the script reads them as they are.
	d.Labels, d.Lanes, d.Failures, d.Snaps.Texts, d.Snaps.Whys = [][2]string{}, []laneData{}, []failureData{}, []string{}, []string{}
	d.Snaps.T, d.Snaps.I, d.Snaps.W, d.Snaps.R = []int64{}, []int{}, []int{}, []int{}
	if d.Notes == nil {
		d.Notes = []string{}
	}
	d.Syncs, d.SyncTexts = make([]int, len(t.Syncs)), []string{}
	syncText := map[string]int{}
	for i, sy := range t.Syncs {
		text := syncDetails(sy)
		k, ok := syncText[text]
		if !ok {
			k = len(d.SyncTexts)
			syncText[text] = k
			d.SyncTexts = append(d.SyncTexts, text)
		}
		d.Syncs[i] = k
	}
	for _, l := range t.Labels {
		d.Labels = append(d.Labels, [2]string{l.Class, l.Text})
	}
	for _, l := range lanes {
		ld := laneData{Name: l.Name, Kind: l.Kind, Total: l.total, T: make([]int64, len(l.marks)), L: make([]int, len(l.marks)), H: l.hist}
		withDur := l.Kind == KindRuns || l.Kind == KindDeferrals
		prev, prevRun := int64(0), 0
		for i, m := range l.marks {
			at := int64(m.At / unit)
			ld.T[i], prev = at-prev, at
			ld.L[i] = m.Label
			if withDur {
				dur := int64(-1)
				if m.Dur >= 0 {
					dur = int64(m.Dur / unit)
				}
				ld.D = append(ld.D, dur)
			}
			if l.Kind == KindRuns {
				ld.R = append(ld.R, m.Run-prevRun)
				prevRun = m.Run
			}
		}
		d.Lanes = append(d.Lanes, ld)
	}
	snaps, texts, snapNote := thinSnapshots(t, cfg.MaxSnapshotBytes, max(2, cfg.MaxMarks/4))
	if snapNote != "" {
		d.Notes = append(d.Notes, snapNote)
	}
	d.Snaps.Total = len(t.Snapshots)
	d.Snaps.Texts = append(d.Snaps.Texts, texts...)
	whys := map[string]int{}
	prevAt, prevRun := int64(0), 0
	for _, s := range snaps {
		w, ok := whys[s.Why]
		if !ok {
			w = len(d.Snaps.Whys)
			whys[s.Why] = w
			d.Snaps.Whys = append(d.Snaps.Whys, s.Why)
		}
		at := int64(s.At / unit)
		d.Snaps.T = append(d.Snaps.T, at-prevAt)
		prevAt = at
		d.Snaps.I = append(d.Snaps.I, s.Text)
		d.Snaps.W = append(d.Snaps.W, w)
		d.Snaps.R = append(d.Snaps.R, s.Run-prevRun)
		prevRun = s.Run
	}
	for _, f := range t.Failures {
		d.Failures = append(d.Failures, failureData{At: int64(f.At / unit), Where: f.Where, Expected: f.Expected, Got: f.Got, Diff: f.Diff})
	}
	data, err := json.Marshal(d) // escapes <, > and &: safe inside <script>
	if err != nil {
		return err
	}

	var b bytes.Buffer
	esc := html.EscapeString
	status := "PASS"
	if !t.Passed {
		status = "FAIL"
	}
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>%s %s — proxysim timeline</title>\n<style>\n%s</style>\n</head>\n", status, esc(t.Scenario), pageCSS)
	fmt.Fprintf(&b, "<body data-drawn=\"static\">\n<header><h1><span class=\"status %s\">%s</span> %s</h1>\n", lower(status), status, esc(t.Scenario))
	fmt.Fprintf(&b, "<p class=\"meta\">%s · mode %s · %s dataplane · %v virtual · %d checks · %d syncs · %d trace events</p>\n",
		esc(t.File), esc(t.Mode), esc(t.Env), t.End, t.Checks, t.Runs, t.Events)
	for _, n := range notes {
		fmt.Fprintf(&b, "<p class=\"note\">%s</p>\n", esc(n))
	}
	if snapNote != "" {
		fmt.Fprintf(&b, "<p class=\"note\">%s</p>\n", esc(snapNote))
	}
	b.WriteString("</header>\n")
	b.WriteString(`<nav id="controls"><button id="zoomout" title="zoom out (-)">−</button><button id="zoomin" title="zoom in (+)">+</button><button id="fit" title="the whole replay (0)">fit</button><button id="left" title="pan left (←)">◀</button><button id="right" title="pan right (→)">▶</button><span id="range"></span><span class="hint">wheel: zoom · drag: pan · click: dataplane at that instant</span></nav>` + "\n")
	b.WriteString("<div id=\"timeline\">\n")
	writeSVG(&b, t, lanes)
	b.WriteString("</div>\n<div id=\"tip\" hidden></div>\n")
	b.WriteString("<section id=\"snapshot\"><h2>Dataplane at <span id=\"snapat\">the end</span></h2><p id=\"snapwhy\"></p><pre id=\"snaptext\">")
	if n := len(snaps); n > 0 {
		b.WriteString(esc(texts[snaps[n-1].Text]))
	}
	b.WriteString("</pre></section>\n")
	if len(t.Failures) > 0 {
		b.WriteString("<section id=\"failures\"><h2>Failed checks</h2><ol>\n")
		for i, f := range t.Failures {
			fmt.Fprintf(&b, "<li data-f=\"%d\"><a href=\"#\" class=\"jump\">%v</a> %s<br>expected: %s<br>got: %s", i, f.At, esc(f.Where), esc(oneLine(f.Expected)), esc(oneLine(f.Got)))
			if len(f.Diff) > 0 {
				b.WriteString("<pre class=\"diff\">")
				for _, l := range f.Diff {
					cls := "same"
					switch l[0] {
					case '-':
						cls = "del"
					case '+':
						cls = "add"
					}
					fmt.Fprintf(&b, "<span class=\"%s\">%s</span>\n", cls, esc(l))
				}
				b.WriteString("</pre>")
			}
			b.WriteString("</li>\n")
		}
		b.WriteString("</ol></section>\n")
	}
	writeSyncs(&b, t, cfg.MaxSyncRows)
	if t.Cluster != nil {
		writeCluster(&b, t)
	}
	b.WriteString("<script type=\"application/json\" id=\"data\">")
	b.Write(data)
	b.WriteString("</script>\n<script>\n")
	b.WriteString(pageJS)
	b.WriteString("</script>\n</body>\n</html>\n")
	_, err = w.Write(b.Bytes())
	return err
}

// syncDetails is a run's cost and work as its hover shows them.
func syncDetails(s Sync) string {
	return "cost " + s.CostText() + "\n   work: " + s.Work
}

// writeSyncs lists the syncs: a summary, then a row per sync (up to max)
// with its length, a profile's split of it, and its work. The profile's
// columns show only when a profile priced a sync.
func writeSyncs(b *bytes.Buffer, t *Timeline, max int) {
	esc := html.EscapeString
	st := t.SyncTotals
	b.WriteString("<section id=\"syncs\"><h2>Syncs</h2>\n")
	fmt.Fprintf(b, "<p class=\"summary\">%d syncs, %v of sync time in all: %d full, %d partial", len(t.Syncs), st.Time, st.Full, st.Partial)
	if st.Largest >= 0 && st.Largest < len(t.Syncs) {
		l := t.Syncs[st.Largest]
		fmt.Fprintf(b, "; the largest run %d at %v, %v", l.Run, l.Start, l.Dur)
	}
	if st.Priced > 0 {
		fmt.Fprintf(b, "; %d priced by a cost profile", st.Priced)
	}
	b.WriteString("</p>\n")
	if len(t.Syncs) == 0 {
		b.WriteString("</section>\n")
		return
	}
	other := false
	for _, s := range t.Syncs {
		other = other || s.Other != 0
	}
	b.WriteString("<table><thead><tr><th>run</th><th>start</th><th>why</th><th>duration</th>")
	if st.Priced > 0 {
		b.WriteString("<th>kind</th><th>kernel write</th><th>listing</th><th>compute</th>")
		if other {
			b.WriteString("<th>fixed and per-size</th>")
		}
	}
	b.WriteString("<th>work</th></tr></thead>\n<tbody>\n")
	for i, s := range t.Syncs {
		if i == max {
			break
		}
		cls := "sync"
		if s.Err != "" {
			cls += " fail"
		}
		if i == st.Largest {
			cls += " largest"
		}
		dur := "did not end"
		if s.Dur >= 0 {
			dur = s.Dur.String()
		}
		fmt.Fprintf(b, "<tr class=\"%s\" data-run=\"%d\"><td>%d</td><td>%v</td><td>%s</td><td class=\"dur\" data-ns=\"%d\">%s</td>", cls, s.Run, s.Run, s.Start, esc(s.Why), s.Dur.Nanoseconds(), dur)
		if st.Priced > 0 {
			if s.Profile != "" {
				fmt.Fprintf(b, "<td class=\"kind\">%s</td><td class=\"part\" data-ns=\"%d\">%v</td><td class=\"part\" data-ns=\"%d\">%v</td><td class=\"part\" data-ns=\"%d\">%v</td>",
					s.Kind, s.Write.Nanoseconds(), s.Write, s.Listing.Nanoseconds(), s.Listing, s.Compute.Nanoseconds(), s.Compute)
				if other {
					fmt.Fprintf(b, "<td class=\"part\" data-ns=\"%d\">%v</td>", s.Other.Nanoseconds(), s.Other)
				}
			} else {
				b.WriteString("<td></td><td></td><td></td><td></td>")
				if other {
					b.WriteString("<td></td>")
				}
			}
		}
		fmt.Fprintf(b, "<td class=\"work\">%s</td></tr>\n", esc(s.Work))
	}
	b.WriteString("</tbody></table>\n")
	if len(t.Syncs) > max {
		fmt.Fprintf(b, "<p class=\"note\">the first %d of %d syncs listed; every run's cost and work show on hover</p>\n", max, len(t.Syncs))
	}
	b.WriteString("</section>\n")
}

func lower(s string) string {
	if s == "PASS" {
		return "pass"
	}
	return "fail"
}

func oneLine(s string) string {
	if bytes.ContainsRune([]byte(s), '\n') {
		return "(table, below)"
	}
	return s
}

// pageLane is a lane as the page holds it: maybe thinned.
type pageLane struct {
	*Lane
	marks []Mark
	total int
	hist  []int // exact counts per HistBuckets of [0, End], when thinned
}

// thin keeps at most about max marks over all lanes: small lanes whole,
// the others an even share each (every k-th mark, plus every failure:
// a failed check, run or operation is never dropped).
func thin(t *Timeline, max int) ([]*pageLane, []string) {
	out := make([]*pageLane, len(t.Lanes))
	total := 0
	for i, l := range t.Lanes {
		out[i] = &pageLane{Lane: l, marks: l.Marks, total: len(l.Marks)}
		total += len(l.Marks)
	}
	if total <= max {
		return out, nil
	}
	// Water-filling: lanes below the fair share keep everything.
	order := make([]int, len(out))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return out[order[a]].total < out[order[b]].total })
	left, lanesLeft := max, len(out)
	quota := make([]int, len(out))
	for _, i := range order {
		share := left / lanesLeft
		quota[i] = min(out[i].total, share)
		left -= quota[i]
		lanesLeft--
	}
	var notes []string
	fails := failureLabels(t)
	for i, l := range out {
		if l.total <= quota[i] {
			continue
		}
		step := (l.total + quota[i] - 1) / max1(quota[i])
		kept := make([]Mark, 0, quota[i]+16)
		l.hist = make([]int, HistBuckets)
		for j, m := range l.Marks {
			l.hist[bucket(m.At, t.End)]++
			if j%step == 0 || fails[m.Label] {
				kept = append(kept, m)
			}
		}
		l.marks = kept
		notes = append(notes, fmt.Sprintf("%s: %d of %d events kept one by one (every %d%s); counts when zoomed out are exact", l.Name, len(kept), l.total, step, ordinal(step)))
	}
	return out, notes
}

func max1(n int) int {
	if n < 1 {
		return 1
	}
	return n
}

func ordinal(n int) string {
	switch {
	case n%100 >= 11 && n%100 <= 13:
		return "th"
	case n%10 == 1:
		return "st"
	case n%10 == 2:
		return "nd"
	case n%10 == 3:
		return "rd"
	}
	return "th"
}

func bucket(at, end time.Duration) int {
	if end <= 0 {
		return 0
	}
	b := int(float64(at) / float64(end) * HistBuckets)
	return min(max(b, 0), HistBuckets-1)
}

func hasWord(s, w string) bool {
	for f := range strings.FieldsSeq(s) {
		if f == w {
			return true
		}
	}
	return false
}

// failing tells, per label, whether it marks a failure.
func failureLabels(t *Timeline) []bool {
	out := make([]bool, len(t.Labels))
	for i, l := range t.Labels {
		out[i] = hasWord(l.Class, "fail")
	}
	return out
}

// timeUnit is the coarsest of 1ms, 1µs and 1ns that every instant and
// length on the page is a whole number of: short numbers, exact times.
func timeUnit(t *Timeline, lanes []*pageLane) time.Duration {
	for _, u := range []time.Duration{time.Millisecond, time.Microsecond} {
		ok := t.End%u == 0
		for _, l := range lanes {
			for _, m := range l.marks {
				if !ok {
					break
				}
				ok = m.At%u == 0 && (m.Dur < 0 || m.Dur%u == 0)
			}
		}
		for _, s := range t.Snapshots {
			ok = ok && s.At%u == 0
		}
		for _, f := range t.Failures {
			ok = ok && f.At%u == 0
		}
		if ok {
			return u
		}
	}
	return time.Nanosecond
}

// thinSnapshots keeps every snapshot if there are at most maxCount and
// their distinct texts fit in maxBytes, else every k-th (the first and
// last always), with k the smallest power of two that fits; texts are
// renumbered to those kept.
func thinSnapshots(t *Timeline, maxBytes, maxCount int) ([]Snapshot, []string, string) {
	step := 1
	for len(t.Snapshots)/step > maxCount {
		step *= 2
	}
	for ; ; step *= 2 {
		var kept []Snapshot
		for i, s := range t.Snapshots {
			if i%step == 0 || i == len(t.Snapshots)-1 {
				kept = append(kept, s)
			}
		}
		idx := map[int]int{}
		var texts []string
		size := 0
		for i := range kept {
			n, ok := idx[kept[i].Text]
			if !ok {
				n = len(texts)
				idx[kept[i].Text] = n
				texts = append(texts, t.Texts[kept[i].Text])
				size += len(t.Texts[kept[i].Text])
			}
			kept[i].Text = n
		}
		if size <= maxBytes || len(kept) <= 2 {
			note := ""
			if step > 1 {
				note = fmt.Sprintf("dataplane snapshots: %d of %d kept (every %d%s), within the page's budget (%d snapshots, %d MiB of text)", len(kept), len(t.Snapshots), step, ordinal(step), maxCount, maxBytes>>20)
			}
			return kept, texts, note
		}
	}
}
