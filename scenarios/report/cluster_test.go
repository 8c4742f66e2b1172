package report

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/proxysim/proxysim/scenarios/replay"
	"github.com/proxysim/proxysim/sim"
)

// clusterScenario is 12 nodes in two pools, one restarting.
const clusterScenario = "cluster-pools-iptables"

func attrInt(t *testing.T, n *html.Node, key string) int64 {
	t.Helper()
	v, err := strconv.ParseInt(attr(n, key), 10, 64)
	if err != nil {
		t.Fatalf("<%s> %s: %v", n.Data, key, err)
	}
	return v
}

func attrFloat(t *testing.T, n *html.Node, key string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(attr(n, key), 64)
	if err != nil {
		t.Fatalf("<%s> %s: %v", n.Data, key, err)
	}
	return v
}

func under(n *html.Node, tag string, cls ...string) []*html.Node {
	return doc{n}.all(tag, cls...)
}

// overlap is how much of [from, to) the sync r spans.
func overlap(r sim.SyncRecord, from, to time.Duration) time.Duration {
	return max(0, min(r.End, to)-max(r.Start, from))
}

// The cluster section shows the replay's own figures: the SLI's three
// final quantiles and its exact ones, a line per quantile with a point per
// evaluation, each node's sync time per column equal to what its kept
// syncs add up to, and the nodes with the worst samples; the same replay
// writes the same bytes.
func TestClusterSectionMatchesTheReplay(t *testing.T) {
	s := load(t, clusterScenario)
	b, tl, res := page(t, s, Config{})
	again, _, _ := page(t, s, Config{})
	if !bytes.Equal(b, again) {
		t.Fatal("two replays of the same cluster wrote different pages")
	}
	c, v := res.Cluster, tl.Cluster
	if c == nil || v == nil || len(c.Nodes) != 12 {
		t.Fatalf("cluster result %v, view %v", c != nil, v != nil)
	}

	// The heat map's cells against every node's syncs, kept this time,
	// counted here with no help from the page's binning.
	kept, err := replay.Replay(s, replay.Options{KeepNodes: true, TraceKeep: 1})
	if err != nil {
		t.Fatal(err)
	}
	light := 0
	for i, n := range kept.Cluster.Nodes {
		row := v.Heat[i]
		if time.Duration(len(row))*v.Column < tl.End || len(row) > MaxHeatColumns {
			t.Fatalf("%s: %d columns of %v for %v", n.Name, len(row), v.Column, tl.End)
		}
		var sum time.Duration
		for j, got := range row {
			var want time.Duration
			from, to := time.Duration(j)*v.Column, time.Duration(j+1)*v.Column
			for _, r := range n.Runs {
				if r.End >= 0 {
					want += overlap(r, from, to)
				}
			}
			if got != want {
				t.Fatalf("%s column %d [%v, %v): %v syncing on the page, %v in its syncs", n.Name, j, from, to, got, want)
			}
			sum += got
		}
		if sum != c.Nodes[i].Busy || sum == 0 {
			t.Errorf("%s: %v syncing in the heat map, Busy %v", n.Name, sum, c.Nodes[i].Busy)
		}
		if len(c.Nodes[i].Runs) == 0 {
			light++
		}
	}
	if light < 10 {
		t.Fatalf("%d light nodes: the heat map's collector is not what this tests", light)
	}

	d := parse(t, b)
	sec := d.byID("cluster")
	if sec == nil {
		t.Fatal("no cluster section")
	}
	sl := c.SLI
	for _, row := range []struct {
		cls  string
		want [3]float64
	}{{"cl2", [3]float64{sl.Perc50, sl.Perc90, sl.Perc99}}, {"exact", [3]float64{sl.True50, sl.True90, sl.True99}}} {
		trs := under(sec, "tr", row.cls)
		if len(trs) != 1 {
			t.Fatalf("%d %s rows", len(trs), row.cls)
		}
		tds := under(trs[0], "td")
		for i, td := range tds {
			if got := attrFloat(t, td, "data-s"); got != row.want[i] || math.IsNaN(got) {
				t.Errorf("%s %s: %v on the page, %v in the replay", row.cls, quantileNames[i], got, row.want[i])
			}
		}
	}

	// The chart: a point per evaluation on each line, the CL2 marks at the
	// figures, p99's line reaching at least its perc99 (the 0.99 quantile
	// of the line's own values), higher up the page.
	chart := d.byID("sli")
	if got := attrInt(t, chart, "data-evaluations"); got != int64(len(sl.Series)) || got < 3 {
		t.Fatalf("%d evaluations drawn, %d in the SLI", got, len(sl.Series))
	}
	paths := under(chart, "path", "series")
	if len(paths) != 3 {
		t.Fatalf("%d series", len(paths))
	}
	topY := make([]float64, 3)
	for qi, p := range paths {
		finiteN := 0
		for _, pt := range sl.Series {
			if finite(pt.Quantiles[qi]) {
				finiteN++
			}
		}
		dAttr := attr(p, "d")
		if n := strings.Count(dAttr, "M") + strings.Count(dAttr, "L"); n != finiteN || attrInt(t, p, "data-points") != int64(finiteN) {
			t.Errorf("%s: %d points drawn, %d finite evaluations", quantileNames[qi], n, finiteN)
		}
		topY[qi] = math.Inf(1)
		for _, seg := range strings.FieldsFunc(dAttr, func(r rune) bool { return r == 'M' || r == 'L' }) {
			f := strings.Fields(seg)
			y, _ := strconv.ParseFloat(f[1], 64)
			topY[qi] = min(topY[qi], y)
		}
	}
	marks := under(chart, "g", "mark", "cl2")
	if len(marks) != 3 {
		t.Fatalf("%d CL2 marks", len(marks))
	}
	for i, m := range marks {
		want := []float64{sl.Perc50, sl.Perc90, sl.Perc99}[i]
		if got := attrFloat(t, m, "data-s"); got != want {
			t.Errorf("mark %d at %v, perc %v", i, got, want)
		}
	}
	y99, _ := strconv.ParseFloat(attr(under(marks[2], "line")[0], "y1"), 64)
	if topY[2] > y99+0.05 {
		t.Errorf("p99's highest point at y %v, below its perc99 at y %v", topY[2], y99)
	}

	// The heat map: the mean row first, then every node in order with its
	// sync time, and its busiest column's colour step.
	heat := d.byID("heat")
	if attrInt(t, heat, "data-rows") != 12 || attrInt(t, heat, "data-column-ns") != v.Column.Nanoseconds() {
		t.Fatalf("heat map: %s rows, column %s", attr(heat, "data-rows"), attr(heat, "data-column-ns"))
	}
	rows := under(heat, "g", "hrow")
	if len(rows) != 13 || attr(rows[0], "data-node") != "all nodes (mean)" {
		t.Fatalf("%d heat rows, the first %q", len(rows), attr(rows[0], "data-node"))
	}
	var all time.Duration
	for i, n := range c.Nodes {
		r := rows[i+1]
		all += n.Busy
		if attr(r, "data-node") != n.Name || attrInt(t, r, "data-busy-ns") != n.Busy.Nanoseconds() {
			t.Errorf("row %d: %s with %sns, want %s with %d", i, attr(r, "data-node"), attr(r, "data-busy-ns"), n.Name, n.Busy.Nanoseconds())
		}
		var peak time.Duration
		for _, x := range v.Heat[i] {
			peak = max(peak, x)
		}
		want := int64(math.Ceil(float64(peak) / float64(v.Column) * heatLevels))
		if got := attrInt(t, r, "data-peak-level"); got != want || len(under(r, "path", "h"+strconv.FormatInt(want, 10))) != 1 {
			t.Errorf("%s: peak level %d, want %d (busiest column %v of %v)", n.Name, got, want, peak, v.Column)
		}
	}
	if attrInt(t, rows[0], "data-busy-ns") != all.Nanoseconds() {
		t.Errorf("mean row: %s ns in all, want %d", attr(rows[0], "data-busy-ns"), all.Nanoseconds())
	}

	// The table: every node (12 < NodeTableRows) by worst sample.
	trs := under(d.byID("nodes"), "tr")[1:]
	if len(trs) != len(c.Nodes) {
		t.Fatalf("%d table rows", len(trs))
	}
	byName := map[string]replay.NodeResult{}
	for _, n := range c.Nodes {
		byName[n.Name] = n
	}
	prev := time.Duration(math.MaxInt64)
	for _, tr := range trs {
		n, ok := byName[attr(tr, "data-node")]
		tds := under(tr, "td")
		got := fmt.Sprintf("%s|%s|%s|%s|%s|%s|%s", text(tds[1]), attr(tds[2], "data-ns"), attr(tds[3], "data-ns"), text(tds[4]), text(tds[5]), text(tds[6]), text(tds[7]))
		want := fmt.Sprintf("%s|%d|%d|%d|%d|%.2f|%d", n.Pool, n.Worst, n.WorstPod, n.Syncs, n.FailedSyncs, n.CPUPerHour, len(n.Restarts))
		if !ok || got != want {
			t.Errorf("%s: %s, want %s", attr(tr, "data-node"), got, want)
		}
		if n.Worst > prev {
			t.Errorf("%s: worst %v after %v", n.Name, n.Worst, prev)
		}
		prev = n.Worst
	}

	// Both charts are well-formed SVG on their own.
	for _, id := range []string{`<svg id="sli"`, `<svg id="heat"`} {
		i := bytes.Index(b, []byte(id))
		j := i + bytes.Index(b[i:], []byte("</svg>"))
		dec := xml.NewDecoder(bytes.NewReader(b[i : j+len("</svg>")]))
		for {
			_, err := dec.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", id, err)
			}
		}
	}
}

// The page's replay gives the cluster the same result as a plain replay:
// following the light nodes' syncs changes nothing.
func TestHeatMapLeavesTheResultAlone(t *testing.T) {
	s := load(t, clusterScenario)
	_, res, err := Replay(s, replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// The page looks at the first node's dataplane, so it is materialised
	// there; a plain replay leaves it light, with the same figures.
	plain, err := replay.Replay(s, replay.Options{TraceKeep: 256, MaterializeFirst: true})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(res.Cluster, plain.Cluster) {
		t.Error("the report's replay found another cluster result")
	}
	light, err := replay.Replay(s, replay.Options{TraceKeep: 256})
	if err != nil {
		t.Fatal(err)
	}
	if light.Cluster.Nodes[0].Dataplane != "" || res.Cluster.Nodes[0].Dataplane == "" {
		t.Errorf("first node's dataplane: %d bytes light, %d bytes on the page", len(light.Cluster.Nodes[0].Dataplane), len(res.Cluster.Nodes[0].Dataplane))
	}
	// Under a fixed cost, a light node's sync records carry the sizes of
	// its work alone.
	light.Cluster.Nodes[0].Dataplane = res.Cluster.Nodes[0].Dataplane
	for i, r := range res.Cluster.Nodes[0].Runs {
		lr := &light.Cluster.Nodes[0].Runs[i]
		if lr.Work.ServicePorts != r.Work.ServicePorts || lr.Work.Endpoints != r.Work.Endpoints {
			t.Fatalf("sync %d: sizes %d/%d light, %d/%d on the page", r.N, lr.Work.ServicePorts, lr.Work.Endpoints, r.Work.ServicePorts, r.Work.Endpoints)
		}
		lr.Work = r.Work
	}
	if !reflect.DeepEqual(res.Cluster, light.Cluster) {
		t.Error("the first node light changed the cluster's result")
	}
}

// A single node's page has no cluster section.
func TestNoClusterSectionForOneNode(t *testing.T) {
	b, tl, _ := page(t, load(t, failing), Config{})
	if tl.Cluster != nil || parse(t, b).byID("cluster") != nil {
		t.Error("a cluster section for one node")
	}
}

// Past MaxHeatRows nodes, the busiest are drawn, in the cluster's order.
func TestHeatRowsKeepTheBusiest(t *testing.T) {
	c := &replay.ClusterResult{}
	for i := range MaxHeatRows + 50 {
		n := replay.NodeResult{Name: fmt.Sprintf("node-%03d", i)}
		n.Busy = time.Duration((i*37)%(MaxHeatRows+50)) * time.Millisecond // a permutation
		c.Nodes = append(c.Nodes, n)
	}
	rows := heatRows(c)
	if len(rows) != MaxHeatRows {
		t.Fatalf("%d rows", len(rows))
	}
	for k, i := range rows {
		if k > 0 && i <= rows[k-1] {
			t.Fatalf("rows out of order: %v", rows)
		}
		if c.Nodes[i].Busy < 50*time.Millisecond {
			t.Errorf("%s (%v) drawn, one of the 50 idlest", c.Nodes[i].Name, c.Nodes[i].Busy)
		}
	}
}

// A replay longer than planned doubles the column until it fits, every
// row's time kept whole and in place.
func TestHeatColumnCoarsensWhole(t *testing.T) {
	if got := heatColumn(5 * time.Minute); got != 2500*time.Millisecond {
		t.Errorf("5m over 120 columns: %v a column", got)
	}
	h := newHeatCollector(0) // 1ms columns
	var row []time.Duration
	h.rows[nil] = row
	syncs := []sim.SyncRecord{{Start: 100 * time.Microsecond, End: 3 * time.Millisecond}, {Start: 990 * time.Millisecond, End: 1010 * time.Millisecond}}
	for _, r := range syncs {
		h.sync(nil, r)
	}
	if h.column != 8*time.Millisecond {
		t.Fatalf("column %v, want 8ms (1010ms in at most %d)", h.column, MaxHeatColumns)
	}
	got := h.rows[nil]
	for j, d := range got {
		var want time.Duration
		for _, r := range syncs {
			want += overlap(r, time.Duration(j)*h.column, time.Duration(j+1)*h.column)
		}
		if d != want {
			t.Errorf("column %d: %v, want %v", j, d, want)
		}
	}
}
