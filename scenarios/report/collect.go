// Package report turns one replay into a self-contained HTML page: an SVG
// timeline in virtual time, a lane per consumer and kind of trace event
// (object events, Run() requests, deferrals, runs, dataplane operations,
// controller writes, steps, checks), and the dataplane's snapshot at any
// instant, as the mode's golden text (ipvsadm -Ln, iptables-save, nft list).
//
// It follows a replay through replay.Options.Follow, so it needs no trace
// kept in memory, and it must not read the wall clock or iterate a map
// unsorted: the same replay gives a byte-identical page. It only reads the
// dataplane (Snapshot); it never changes the replay.
package report

import (
	"fmt"
	"strings"
	"time"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/replay"
	"github.com/proxysim/proxysim/sim"
	"github.com/proxysim/proxysim/sim/costprofile"
	"github.com/proxysim/proxysim/sim/trace"
)

// Timeline is what the page shows of one replay.
type Timeline struct {
	Scenario string // the scenario's name
	File     string
	Mode     string
	Env      string        // the dataplane's name ("fake", "netns, kernel 6.1")
	End      time.Duration // the replay's virtual length
	Passed   bool
	Checks   int
	Runs     int
	Events   int // trace events seen
	Lanes    []*Lane
	Labels   []Label // what marks say, each once
	// Snapshots are the dataplane's states in time order; Texts holds each
	// distinct text once.
	Snapshots []Snapshot
	Texts     []string
	Failures  []Failure
	// Syncs are the proxy's syncs in order (Syncs[i] is run i+1), with
	// their cost and work; SyncTotals sums them up.
	Syncs      []Sync
	SyncTotals SyncTotals
	// Cluster is what every node of cluster.pools did, nil for one node.
	Cluster *ClusterView
}

// Sync is one sync's cost and what it was made of.
type Sync struct {
	Run   int
	Why   string
	Start time.Duration
	Dur   time.Duration // its modelled length; -1 if it did not end
	Full  bool
	Err   string
	// Profile names the cost profile part that priced the sync ("" when
	// none did: a constant or per-run cost, a direct sync); Kind and Write,
	// Listing and Compute are then its split of the sync's time, and Other
	// is what the rest of the model (fixed and per-size terms) added:
	// the five add up to Dur.
	Profile                        string
	Kind                           costprofile.Kind
	Write, Listing, Compute, Other time.Duration
	// Work is what the sync wrote and read, in one line
	// (sim.SyncWork.String).
	Work string
}

// SyncTotals sums up a replay's syncs: their time, full and partial ones
// (syncs that ended), and the longest (its index in Syncs, -1 if none).
type SyncTotals struct {
	Time          time.Duration
	Full, Partial int
	Priced        int // priced by a cost profile
	Largest       int
}

// syncOf is a sync record as the page shows it.
func syncOf(r sim.SyncRecord) Sync {
	s := Sync{Run: r.N, Why: r.Why, Start: r.Start, Dur: -1, Full: r.Work.Full, Err: r.Err, Work: r.Work.String()}
	if r.End >= 0 {
		s.Dur = r.End - r.Start
	}
	if p := r.Split; p.By != "" && s.Dur >= 0 {
		s.Profile, s.Kind = p.By, costprofile.Kind(p.Kind)
		s.Write, s.Listing, s.Compute = p.Write, p.Listing, p.Compute
		s.Other = s.Dur - p.Write - p.Listing - p.Compute
	}
	return s
}

// CostText is a sync's cost in one line: its length, and a profile's
// split of it.
func (s Sync) CostText() string {
	if s.Dur < 0 {
		return "did not end"
	}
	if s.Profile == "" {
		return fmt.Sprintf("%v", s.Dur)
	}
	t := fmt.Sprintf("%v = kernel write %v + listing %v + compute %v", s.Dur, s.Write, s.Listing, s.Compute)
	if s.Other != 0 {
		t += fmt.Sprintf(" + fixed and per-size %v", s.Other)
	}
	return t + fmt.Sprintf(" (%s, %s)", s.Kind, s.Profile)
}

// Lane is one row of the timeline: the events of one kind for one
// consumer.
type Lane struct {
	Name  string // "proxy · runs"
	Owner string // the consumer or "scenario"
	Kind  string // one of the lane kinds below
	Marks []Mark
}

// Lane kinds, in the order the page shows a consumer's lanes.
const (
	KindSteps       = "steps"
	KindChecks      = "checks"
	KindConnections = "connections"
	KindObjects     = "objects"
	KindWrites      = "writes"
	KindSyncs       = "syncs" // a controller's own notes
	KindRequests    = "requests"
	KindDeferrals   = "deferrals"
	KindRuns        = "runs"
	KindDataplane   = "dataplane"
	KindNotes       = "notes"
	KindOther       = "events" // a plug-in's own kind
)

var kindOrder = map[string]int{
	KindSteps: 0, KindChecks: 1, KindConnections: 2, KindObjects: 3, KindWrites: 4, KindSyncs: 5,
	KindRequests: 6, KindDeferrals: 7, KindRuns: 8, KindDataplane: 9, KindNotes: 10, KindOther: 11,
}

// Mark is one event on a lane. Dur is a run's length (start to end) or the
// wait of a deferral (to the instant it waits for); -1 when it has none.
type Mark struct {
	At, Dur time.Duration
	Label   int // index into the page's labels: a style and a text
	Run     int
}

// Label is what a mark says: its CSS class and its details.
type Label struct {
	Class string
	Text  string
}

// Snapshot is the dataplane after a run, or after changes outside runs
// (startup, an operator's step).
type Snapshot struct {
	At   time.Duration
	Text int    // index into Timeline.Texts
	Why  string // "after run", "after startup writes", ...
	Run  int    // the run it follows, 0 if none
}

// Failure is one expectation that did not hold, with what was expected and
// what was found (a table as a line diff).
type Failure struct {
	At       time.Duration
	Where    string // file:line:column: field
	Expected string
	Got      string
	Diff     []string
}

// Collector follows a replay and builds its Timeline. Use Follow as
// replay.Options.Follow, then Finish with the replay's result.
type Collector struct {
	t         Timeline
	lanes     map[string]*Lane
	labelIdx  map[Label]int
	runMark   int // the open run's mark on the runs lane, -1 if none
	runWhy    string
	runsSeen  int
	dirty     bool // the dataplane changed during the open run
	textIdx   map[string]int
	lastText  int
	lastEvent time.Duration
}

// NewCollector starts an empty timeline.
func NewCollector() *Collector {
	return &Collector{lanes: map[string]*Lane{}, labelIdx: map[Label]int{}, textIdx: map[string]int{}, lastText: -1, runMark: -1}
}

// Follow records one trace event. dp is read (Snapshot) at the end of each
// run that changed it, and after each change outside a run (the proxier's
// startup writes, an operator's step, a connection).
func (c *Collector) Follow(e trace.Event, dp scenarios.Dataplane) {
	at := time.Duration(e.At)
	c.t.Events++
	c.lastEvent = at
	switch e.Kind {
	case trace.Step:
		if e.Op == "note" {
			c.add("scenario", KindSteps, at, -1, 0, "note", "note: "+e.Detail)
			break
		}
		c.add("scenario", KindSteps, at, -1, 0, "step", fields(e))
	case trace.Check:
		cls := "check pass"
		if e.Op == "fail" {
			cls = "check fail"
		}
		c.add("scenario", KindChecks, at, -1, 0, cls, fields(e))
	case trace.Conn:
		c.add("scenario", KindConnections, at, -1, 0, "conn", fields(e))
		// Connection counters show in the IPVS table.
		c.changed(dp, at, "after connection "+e.Op, 0)
	case trace.Object, trace.Resync, trace.Synced:
		owner, kind, cls := "proxy", KindObjects, "obj"
		switch {
		case e.Kind == trace.Object && e.Why != "":
			owner, kind, cls = e.Why, KindWrites, "write"
		case strings.HasPrefix(e.Detail, "to "):
			owner = strings.TrimPrefix(e.Detail, "to ")
		}
		if e.Kind != trace.Object {
			cls = e.Kind
		}
		if e.Err != "" {
			cls += " fail"
		}
		c.add(owner, kind, at, -1, 0, cls, fields(e))
	case trace.Request:
		c.add("proxy", KindRequests, at, -1, 0, "req", "Run() requested")
	case trace.Drop:
		c.add("proxy", KindRequests, at, -1, 0, "req drop", "Run() dropped ("+e.Why+")")
	case trace.Defer:
		dur, text := time.Duration(-1), "run deferred ("+e.Why+")"
		if e.Until != nil {
			dur = time.Duration(*e.Until) - at
			text += " until " + e.Until.String()
		}
		c.add("proxy", KindDeferrals, at, dur, 0, "defer", text)
	case trace.Start:
		l := c.lane("proxy", KindRuns)
		c.closeOpenRun()
		c.runMark, c.runWhy, c.dirty = len(l.Marks), e.Why, false
		c.runsSeen++
		// Labelled at its end (or by closeOpenRun).
		l.Marks = append(l.Marks, Mark{At: at, Dur: -1, Run: e.Run, Label: -1})
	case trace.End:
		l := c.lane("proxy", KindRuns)
		if c.runMark >= 0 {
			m := &l.Marks[c.runMark]
			m.Dur = at - m.At
			text, cls := "run ("+c.runWhy+")", "run"
			if e.Err != "" {
				text, cls = text+" failed: "+e.Err, "run fail"
			}
			m.Label = c.label(cls, text)
		}
		c.runMark = -1
		if c.dirty {
			c.snapshot(dp, at, "after run", e.Run)
		}
	case trace.Dataplane:
		cls := "dp"
		if e.Err != "" {
			cls = "dp fail"
		}
		c.add("proxy", KindDataplane, at, -1, 0, cls, fields(e))
		why := "after startup writes"
		if c.runsSeen > 0 {
			why = "after a change outside a run"
		}
		c.changed(dp, at, why, 0)
	case trace.Note:
		owner, kind := "world", KindNotes
		if i := strings.Index(e.Detail, ": "); i > 0 && strings.HasPrefix(e.Object, "Service ") {
			owner, kind = e.Detail[:i], KindSyncs
		}
		cls := "note"
		if e.Err != "" {
			cls = "note fail"
		}
		c.add(owner, kind, at, -1, 0, cls, fields(e))
	default:
		// A plug-in's own kind (the ingress controller's "ingress").
		c.add(e.Kind, KindOther, at, -1, 0, "other", fields(e))
	}
}

// closeOpenRun labels a run that never ended (a new one started, or the
// replay ended); it is drawn to the end of the replay.
func (c *Collector) closeOpenRun() {
	if c.runMark < 0 {
		return
	}
	l := c.lane("proxy", KindRuns)
	l.Marks[c.runMark].Label = c.label("run open", "run ("+c.runWhy+"), did not end")
	c.runMark = -1
}

// changed notes a change of the dataplane: inside a run it is read at the
// run's end, outside one at once.
func (c *Collector) changed(dp scenarios.Dataplane, at time.Duration, why string, run int) {
	if c.runMark >= 0 {
		c.dirty = true
		return
	}
	c.snapshot(dp, at, why, run)
}

// snapshot reads the dataplane's golden text; an error is shown as the
// snapshot, not fatal to the page.
func (c *Collector) snapshot(dp scenarios.Dataplane, at time.Duration, why string, run int) {
	c.dirty = false
	text, err := dp.Snapshot()
	if err != nil {
		text = "snapshot failed: " + err.Error()
	}
	i, ok := c.textIdx[text]
	if !ok {
		i = len(c.t.Texts)
		c.t.Texts = append(c.t.Texts, text)
		c.textIdx[text] = i
	}
	// Only a new state is a new snapshot.
	if i == c.lastText {
		return
	}
	c.lastText = i
	c.t.Snapshots = append(c.t.Snapshots, Snapshot{At: at, Text: i, Why: why, Run: run})
}

func (c *Collector) lane(owner, kind string) *Lane {
	key := owner + "\x00" + kind
	l, ok := c.lanes[key]
	if !ok {
		l = &Lane{Name: owner + " · " + kind, Owner: owner, Kind: kind}
		if kind == KindRequests {
			l.Name = owner + " · Run() requests"
		}
		c.lanes[key] = l
		c.t.Lanes = append(c.t.Lanes, l)
	}
	return l
}

func (c *Collector) label(class, text string) int {
	k := Label{class, text}
	i, ok := c.labelIdx[k]
	if !ok {
		i = len(c.t.Labels)
		c.t.Labels = append(c.t.Labels, k)
		c.labelIdx[k] = i
	}
	return i
}

func (c *Collector) add(owner, kind string, at, dur time.Duration, run int, class, text string) {
	l := c.lane(owner, kind)
	l.Marks = append(l.Marks, Mark{At: at, Dur: dur, Run: run, Label: c.label(class, text)})
}

// fields is an event's details, as trace.Line prints them, without the
// instant.
func fields(e trace.Event) string { return e.Kind + trace.Fields(e) }

// Finish completes the timeline with the replay's result: lanes in a fixed
// order (scenario first, the proxy next, then the other consumers by
// name), a last snapshot if the dataplane changed, and the failures.
func (c *Collector) Finish(res *replay.Result) *Timeline {
	t := &c.t
	s := res.Scenario
	t.Scenario, t.File, t.Env = s.Name, s.File, res.Env
	if m, ok := scenarios.LookupMode(s.Proxy.Mode); ok {
		t.Mode = m.Name()
	}
	t.End = max(s.Length(), c.lastEvent)
	c.closeOpenRun()
	t.Passed = res.Passed()
	t.Checks, t.Runs = res.Checks, len(res.Runs)
	t.SyncTotals.Largest = -1
	for _, r := range res.Runs {
		sy := syncOf(r)
		t.Syncs = append(t.Syncs, sy)
		if sy.Dur < 0 {
			continue
		}
		st := &t.SyncTotals
		st.Time += sy.Dur
		if sy.Full {
			st.Full++
		} else {
			st.Partial++
		}
		if sy.Profile != "" {
			st.Priced++
		}
		if st.Largest < 0 || sy.Dur > t.Syncs[st.Largest].Dur {
			st.Largest = len(t.Syncs) - 1
		}
	}
	// A run still open at the end is drawn to the end.
	for _, l := range t.Lanes {
		for i := range l.Marks {
			if l.Kind == KindRuns && l.Marks[i].Dur < 0 {
				l.Marks[i].Dur = t.End - l.Marks[i].At
			}
		}
	}
	sortLanes(t.Lanes)
	for _, f := range res.Failures {
		ff := Failure{At: f.At, Where: fmt.Sprintf("%s:%d:%d: %s", f.File, f.Pos.Line, f.Pos.Column, f.Pos.Path), Expected: f.Expected, Got: f.Got}
		if strings.Contains(f.Expected, "\n") || strings.Contains(f.Got, "\n") {
			ff.Diff = replay.LineDiff(f.Expected, f.Got)
		}
		t.Failures = append(t.Failures, ff)
	}
	return t
}

func ownerRank(o string) int {
	switch o {
	case "scenario":
		return 0
	case "proxy":
		return 1
	case "world":
		return 3
	}
	return 2
}

func sortLanes(ls []*Lane) {
	less := func(a, b *Lane) bool {
		if ra, rb := ownerRank(a.Owner), ownerRank(b.Owner); ra != rb {
			return ra < rb
		}
		if a.Owner != b.Owner {
			return a.Owner < b.Owner
		}
		return kindOrder[a.Kind] < kindOrder[b.Kind]
	}
	// Insertion sort: a handful of lanes, and stable.
	for i := 1; i < len(ls); i++ {
		for j := i; j > 0 && less(ls[j], ls[j-1]); j-- {
			ls[j], ls[j-1] = ls[j-1], ls[j]
		}
	}
}
