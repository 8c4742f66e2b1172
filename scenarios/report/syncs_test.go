package report

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/proxysim/proxysim/scenarios"
)

// syncRow is one row of the page's syncs table.
type syncRow struct {
	run   int
	dur   time.Duration
	kind  string
	parts []time.Duration
	work  string
}

func syncRows(t *testing.T, d doc) []syncRow {
	t.Helper()
	var rows []syncRow
	for _, tr := range d.all("tr", "sync") {
		var r syncRow
		r.run, _ = strconv.Atoi(attr(tr, "data-run"))
		for td := tr.FirstChild; td != nil; td = td.NextSibling {
			ns, _ := strconv.ParseInt(attr(td, "data-ns"), 10, 64)
			switch {
			case hasClass(td, "dur"):
				r.dur = time.Duration(ns)
			case hasClass(td, "kind"):
				r.kind = text(td)
			case hasClass(td, "part"):
				r.parts = append(r.parts, time.Duration(ns))
			case hasClass(td, "work"):
				r.work = text(td)
			}
		}
		rows = append(rows, r)
	}
	return rows
}

// A scenario priced by cost profiles (the default one, then the hand
// profile's legacy part from a syncCost step): every run's kernel write,
// listing and compute add up to its duration, its kind is a profile kind,
// and its work line is the sync record's.
func TestSyncsShowAProfilesPartsAndWork(t *testing.T) {
	src, err := os.ReadFile("../testdata/features/sync-cost-profile.yaml")
	if err != nil {
		t.Fatal(err)
	}
	text0 := strings.Replace(string(src), "syncCost: {profile: profiles/hand.json}", "syncCost: {profile: default}", 1)
	if text0 == string(src) {
		t.Fatal("sync-cost-profile.yaml no longer names profiles/hand.json for the proxy")
	}
	s, err := scenarios.Parse("sync-cost-default.yaml", []byte(text0), os.DirFS("../testdata/features"))
	if err != nil {
		t.Fatal(err)
	}
	b, tl, res := page(t, s, Config{})
	d := parse(t, b)
	rows := syncRows(t, d)
	if len(rows) != len(res.Runs) || len(rows) < 4 {
		t.Fatalf("%d rows for %d syncs", len(rows), len(res.Runs))
	}
	priced, hand := 0, 0
	var total time.Duration
	for i, r := range rows {
		rec := res.Runs[i]
		want := rec.End - rec.Start
		if rec.End < 0 {
			want = -1
		}
		if r.run != rec.N || r.dur != want {
			t.Errorf("row %d: run %d of %v, want run %d of %v", i, r.run, r.dur, rec.N, want)
		}
		if r.work == "" || r.work != rec.Work.String() {
			t.Errorf("run %d: work %q, want %q", r.run, r.work, rec.Work.String())
		}
		if h := hoverText(t, d, i); !strings.Contains(h, rec.Work.String()) {
			t.Errorf("run %d: hover %q lacks the work", r.run, h)
		}
		if r.dur <= 0 {
			// The startup's direct sync costs nothing; a run the replay
			// ended during has no length.
			if r.parts != nil {
				t.Errorf("run %d of %v: parts %v", r.run, r.dur, r.parts)
			}
			continue
		}
		total += r.dur
		priced++
		if len(r.parts) != 3 {
			t.Fatalf("run %d: %d parts shown, want kernel write, listing, compute", r.run, len(r.parts))
		}
		if sum := r.parts[0] + r.parts[1] + r.parts[2]; sum != r.dur || r.dur <= 0 {
			t.Errorf("run %d: parts %v add up to %v, duration %v", r.run, r.parts, sum, r.dur)
		}
		if r.kind != "partial" && r.kind != "full-new" && r.kind != "full-restart" {
			t.Errorf("run %d: kind %q", r.run, r.kind)
		}
		// The hand profile's legacy part, after the step at 5s: a partial
		// sync is 700ms (docs: sync-cost-profile.yaml).
		if rec.Start > 5*time.Second && r.kind == "partial" {
			hand++
			if r.dur != 700*time.Millisecond {
				t.Errorf("run %d: %v under the hand profile's legacy part, want 700ms", r.run, r.dur)
			}
		}
	}
	if priced < 4 || hand < 2 {
		t.Errorf("%d runs priced, %d by the hand profile", priced, hand)
	}
	st := tl.SyncTotals
	ended := 0
	for _, r := range rows {
		if r.dur >= 0 {
			ended++
		}
	}
	if st.Time != total || st.Full+st.Partial != ended || st.Priced != priced {
		t.Errorf("totals %+v; rows add up to %v over %d ended syncs, %d priced", st, total, ended, priced)
	}
	sum := text(d.byID("syncs"))
	largest := tl.Syncs[st.Largest]
	for _, want := range []string{total.String() + " of sync time", strconv.Itoa(st.Full) + " full", strconv.Itoa(st.Partial) + " partial",
		"largest run " + strconv.Itoa(largest.Run) + " at " + largest.Start.String() + ", " + largest.Dur.String()} {
		if !strings.Contains(sum, want) {
			t.Errorf("summary lacks %q: %s", want, sum)
		}
	}
	for _, r := range rows {
		if r.dur > largest.Dur {
			t.Errorf("run %d (%v) is longer than the largest", r.run, r.dur)
		}
	}
}

// A constant sync cost: each run's duration and work, and no profile's
// parts anywhere.
func TestSyncsWithAConstantCostShowNoParts(t *testing.T) {
	b, tl, res := page(t, load(t, "sync-cost-v1.34"), Config{})
	d := parse(t, b)
	rows := syncRows(t, d)
	if len(rows) != len(res.Runs) || len(rows) < 2 {
		t.Fatalf("%d rows for %d syncs", len(rows), len(res.Runs))
	}
	for i, r := range rows {
		if r.parts != nil || r.kind != "" {
			t.Errorf("run %d: parts %v, kind %q under a constant cost", r.run, r.parts, r.kind)
		}
		if r.work != res.Runs[i].Work.String() {
			t.Errorf("run %d: work %q", r.run, r.work)
		}
		if r.dur > 0 && r.dur != 450*time.Millisecond {
			t.Errorf("run %d: %v, want 450ms", r.run, r.dur)
		}
	}
	for _, th := range d.all("th") {
		if s := text(th); s == "kind" || s == "kernel write" {
			t.Errorf("a %q column under a constant cost", s)
		}
	}
	for i := range rows {
		if h := hoverText(t, d, i); strings.Contains(h, "kernel write") || !strings.Contains(h, "work: ") {
			t.Errorf("hover %q", h)
		}
	}
	if tl.SyncTotals.Priced != 0 || bytes.Contains(b, []byte("priced by a cost profile")) {
		t.Errorf("%d syncs priced by a profile", tl.SyncTotals.Priced)
	}
}

// The table stops at MaxSyncRows and says so.
func TestSyncRowsAreBounded(t *testing.T) {
	b, _, res := page(t, load(t, "sync-cost-v1.34"), Config{MaxSyncRows: 1})
	d := parse(t, b)
	if n := len(syncRows(t, d)); n != 1 || len(res.Runs) < 2 {
		t.Fatalf("%d rows of %d syncs", n, len(res.Runs))
	}
	if !strings.Contains(text(d.byID("syncs")), "the first 1 of ") {
		t.Error("no note of the rows left out")
	}
}

// hoverText is run i+1's cost and work as the page's data holds them.
func hoverText(t *testing.T, d doc, i int) string {
	t.Helper()
	p := d.data(t)
	if i >= len(p.Syncs) || p.Syncs[i] >= len(p.SyncTexts) {
		t.Fatalf("no hover text for run %d", i+1)
	}
	return p.SyncTexts[p.Syncs[i]]
}
