package report

import (
	"bytes"
	"cmp"
	"fmt"
	"html"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/proxysim/proxysim/scenarios/replay"
	"github.com/proxysim/proxysim/sim"
	"github.com/proxysim/proxysim/sim/sli"
)

// The cluster section's bounds.
const (
	// HeatColumns is the heat map's aim for columns: the column is the
	// scenario's planned length over it, rounded up to 1, 2, 2.5 or 5
	// times a power of ten; a replay that runs longer than MaxHeatColumns columns
	// doubles the column until it fits.
	HeatColumns    = 120
	MaxHeatColumns = 240
	// MaxHeatRows is how many nodes the heat map draws one by one: past
	// it, the busiest (the most sync time), a note saying so, and the mean
	// row of every node still drawn first.
	MaxHeatRows = 200
	// NodeTableRows is how many nodes the table lists: those with the
	// worst programming latency samples.
	NodeTableRows = 20
	heatLevels    = 8 // colour steps of the busy fraction
)

// ClusterView is what the page shows of a replay of cluster.pools.
type ClusterView struct {
	Result *replay.ClusterResult
	// Column is the heat map's column; Heat[i] is node i's (Result.Nodes
	// order) sync time in each column of [0, End]: the syncs that ended,
	// each split over the columns it spans (a sync still running at the
	// end is not counted, as NodeStats.Busy does not).
	Column time.Duration
	Heat   [][]time.Duration
}

// heatCollector sums the light nodes' syncs per column as they end
// (sim.World.OnNodeSync): a fixed row per node, no record kept.
type heatCollector struct {
	column time.Duration
	rows   map[*sim.Node][]time.Duration
}

func newHeatCollector(planned time.Duration) *heatCollector {
	return &heatCollector{column: heatColumn(planned), rows: map[*sim.Node][]time.Duration{}}
}

// heatColumn is planned/HeatColumns rounded up to 1, 2, 2.5 or 5 times a
// power of ten, at least a millisecond.
func heatColumn(planned time.Duration) time.Duration {
	want := planned / HeatColumns
	for c := time.Millisecond; ; c *= 10 {
		for _, m := range []time.Duration{2, 4, 5, 10} {
			if m*c/2 >= want {
				return m * c / 2
			}
		}
	}
}

func (h *heatCollector) watch(w *sim.World) error {
	for _, n := range w.Nodes() {
		if !n.Materialised() {
			h.rows[n] = make([]time.Duration, 0, HeatColumns)
		}
	}
	if len(h.rows) > 0 {
		w.OnNodeSync(h.sync)
	}
	return nil
}

func (h *heatCollector) sync(n *sim.Node, r sim.SyncRecord) {
	row, ok := h.rows[n]
	if !ok || r.End < r.Start {
		return
	}
	for r.End > time.Duration(MaxHeatColumns)*h.column {
		h.coarsen()
		row = h.rows[n]
	}
	h.rows[n] = addBusy(row, h.column, r.Start, r.End)
}

// coarsen doubles the column, merging every row's pairs.
func (h *heatCollector) coarsen() {
	h.column *= 2
	for n, row := range h.rows {
		h.rows[n] = mergePairs(row)
	}
}

func mergePairs(row []time.Duration) []time.Duration {
	out := row[:0]
	for i := 0; i < len(row); i += 2 {
		v := row[i]
		if i+1 < len(row) {
			v += row[i+1]
		}
		out = append(out, v)
	}
	return out
}

// addBusy adds [start, end) to row's columns, growing it as needed.
func addBusy(row []time.Duration, column, start, end time.Duration) []time.Duration {
	for at := start; at < end; {
		c := int(at / column)
		for len(row) <= c {
			row = append(row, 0)
		}
		next := min(time.Duration(c+1)*column, end)
		row[c] += next - at
		at = next
	}
	return row
}

// view puts the light nodes' rows and the others' kept syncs on one grid
// of columns spanning [0, end].
func (h *heatCollector) view(c *replay.ClusterResult, end time.Duration) *ClusterView {
	byName := map[string][]time.Duration{}
	for n, row := range h.rows {
		byName[n.Name()] = row
	}
	column := h.column
	for end > time.Duration(MaxHeatColumns)*column {
		column *= 2
	}
	cols := max(1, int((end+column-1)/column))
	v := &ClusterView{Result: c, Column: column, Heat: make([][]time.Duration, len(c.Nodes))}
	for i, n := range c.Nodes {
		row, light := byName[n.Name]
		if light {
			for f := h.column; f < column; f *= 2 {
				row = mergePairs(row)
			}
		} else {
			row = nil
			for _, r := range n.Runs {
				if r.End >= r.Start {
					row = addBusy(row, column, r.Start, r.End)
				}
			}
		}
		full := make([]time.Duration, max(cols, len(row)))
		copy(full, row)
		v.Heat[i] = full
	}
	return v
}

// writeCluster draws the cluster section: the SLI over time, the nodes'
// sync activity as a heat map, and the nodes with the worst samples.
func writeCluster(b *bytes.Buffer, t *Timeline) {
	v := t.Cluster
	c := v.Result
	s := c.SLI
	b.WriteString("<section id=\"cluster\"><h2>Cluster</h2>\n")
	fmt.Fprintf(b, "<p class=\"summary\">%d nodes, %d programming samples; true pod latency: %d changes programmed, p50 %v, p90 %v, p99 %v, max %v</p>\n",
		len(c.Nodes), s.Samples, c.PodChanges, c.Pod50, c.Pod90, c.Pod99, c.PodMax)

	b.WriteString("<h3>Network programming latency</h3>\n")
	b.WriteString("<table class=\"sli\"><thead><tr><th></th><th>p50</th><th>p90</th><th>p99</th></tr></thead><tbody>\n")
	fmt.Fprintf(b, "<tr class=\"cl2\"><th>as ClusterLoader2 (quantile_over_time 0.99 of the rule)</th><td data-s=\"%s\">%s</td><td data-s=\"%s\">%s</td><td data-s=\"%s\">%s</td></tr>\n",
		num(s.Perc50), secs(s.Perc50), num(s.Perc90), secs(s.Perc90), num(s.Perc99), secs(s.Perc99))
	fmt.Fprintf(b, "<tr class=\"exact\"><th>exact, every sample pooled</th><td data-s=\"%s\">%s</td><td data-s=\"%s\">%s</td><td data-s=\"%s\">%s</td></tr>\n",
		num(s.True50), secs(s.True50), num(s.True90), secs(s.True90), num(s.True99), secs(s.True99))
	b.WriteString("</tbody></table>\n")
	writeSLIChart(b, s, t.End)

	b.WriteString("<h3>Sync activity</h3>\n")
	writeHeat(b, v, t.End)

	writeNodeTable(b, c)
	b.WriteString("</section>\n")
}

func num(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

func secs(v float64) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	if math.IsInf(v, 1) {
		return "+Inf"
	}
	return time.Duration(v * float64(time.Second)).Round(time.Microsecond).String()
}

// The charts' geometry.
const (
	chartW, chartH = 920, 220
	heatLabelW     = 120 // the heat map's node names
	chartLeft      = 64
	chartTop       = 12
	chartBottom    = 24
	chartRight     = 240 // the markers' labels: CL2's, then the exact ones
)

var quantileNames = [3]string{"p50", "p90", "p99"}

// writeSLIChart draws the recording rule's three quantiles at each
// evaluation as lines (a gap where the rule had no value or +Inf), and
// the final figures across: dashed CL2's, dotted the exact ones.
func writeSLIChart(b *bytes.Buffer, s sli.Result, end time.Duration) {
	if end <= 0 {
		end = time.Second
	}
	top := 0.0
	for _, p := range s.Series {
		for _, q := range p.Quantiles {
			if finite(q) {
				top = max(top, q)
			}
		}
	}
	marks := []float64{s.Perc50, s.Perc90, s.Perc99, s.True50, s.True90, s.True99}
	for _, m := range marks {
		if finite(m) {
			top = max(top, m)
		}
	}
	step := yStep(top)
	top = math.Ceil(top*1.05/step) * step
	if top <= 0 {
		top, step = 1, 0.25
	}
	w, h := chartLeft+chartW+chartRight, chartTop+chartH+chartBottom
	x := func(at time.Duration) float64 { return chartLeft + float64(at)/float64(end)*chartW }
	y := func(v float64) float64 { return chartTop + chartH - v/top*chartH }
	fmt.Fprintf(b, "<svg id=\"sli\" class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" data-evaluations=\"%d\">\n", w, h, w, h, len(s.Series))
	b.WriteString("<g class=\"axis\">")
	for v := 0.0; v <= top+step/2; v += step {
		yy := px(y(v))
		fmt.Fprintf(b, "<line class=\"grid\" x1=\"%d\" x2=\"%d\" y1=\"%s\" y2=\"%s\"/><text class=\"ticklabel\" x=\"%d\" y=\"%s\" text-anchor=\"end\">%s</text>", chartLeft, chartLeft+chartW, yy, yy, chartLeft-4, px(y(v)+4), secs(v))
	}
	ts := tickStep(end, chartW)
	for at := time.Duration(0); at <= end; at += ts {
		xx := px(x(at))
		fmt.Fprintf(b, "<line class=\"grid\" x1=\"%s\" x2=\"%s\" y1=\"%d\" y2=\"%d\"/><text class=\"ticklabel\" x=\"%s\" y=\"%d\">%v</text>", xx, xx, chartTop, chartTop+chartH, xx, chartTop+chartH+16, at)
	}
	b.WriteString("</g>\n")
	for qi := range 3 {
		var d bytes.Buffer
		pen, points := false, 0
		for _, p := range s.Series {
			q := p.Quantiles[qi]
			if !finite(q) {
				pen = false
				continue
			}
			op := "L"
			if !pen {
				op = "M"
			}
			fmt.Fprintf(&d, "%s%s %s", op, px(x(p.At)), px(y(q)))
			pen = true
			points++
		}
		fmt.Fprintf(b, "<path class=\"series q%d\" data-q=\"%s\" data-points=\"%d\" d=\"%s\"><title>the rule's %s at each evaluation</title></path>\n", qi, quantileNames[qi], points, d.String(), quantileNames[qi])
	}
	for i, m := range marks {
		if !finite(m) {
			continue
		}
		kind, label := "cl2", "perc"+quantileNames[i%3][1:]
		if i >= 3 {
			kind, label = "exact", "exact "+quantileNames[i%3]
		}
		yy := px(y(m))
		fmt.Fprintf(b, "<g class=\"mark %s q%d\" data-s=\"%s\"><line x1=\"%d\" x2=\"%d\" y1=\"%s\" y2=\"%s\"/><text x=\"%d\" y=\"%s\">%s %s</text><title>%s: %s</title></g>\n",
			kind, i%3, num(m), chartLeft, chartLeft+chartW, yy, yy, chartLeft+chartW+4+(i/3)*118, px(y(m)+4), label, secs(m), label, secs(m))
	}
	b.WriteString("</svg>\n")
	b.WriteString("<p class=\"legend\"><span class=\"key q0\"></span>p50 <span class=\"key q1\"></span>p90 <span class=\"key q2\"></span>p99: histogram_quantile of the 5-minute rate of every node's buckets at each evaluation; dashed: CL2's figures (quantile_over_time 0.99 of each line), dotted: the exact quantiles of every sample</p>\n")
	if len(s.Series) == 0 {
		b.WriteString("<p class=\"note\">the recording rule never had data: no programming samples were scraped</p>\n")
	}
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// yStep is a 1, 2 or 5 times a power of ten spacing giving at most five
// grid lines up to top.
func yStep(top float64) float64 {
	if top <= 0 {
		return 0.25
	}
	p := math.Pow(10, math.Floor(math.Log10(top/5)))
	for _, m := range []float64{1, 2, 5, 10} {
		if top/(m*p) <= 5 {
			return m * p
		}
	}
	return 10 * p
}

// heatRows picks the rows to draw: every node up to MaxHeatRows, else the
// busiest, in the cluster's order.
func heatRows(c *replay.ClusterResult) []int {
	idx := make([]int, len(c.Nodes))
	for i := range idx {
		idx[i] = i
	}
	if len(idx) <= MaxHeatRows {
		return idx
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(c.Nodes[b].Busy, c.Nodes[a].Busy) })
	idx = idx[:MaxHeatRows]
	slices.Sort(idx)
	return idx
}

// writeHeat draws a row per node and a column per v.Column, coloured by
// the share of the column the node spent syncing, in heatLevels steps;
// each row's cells of one colour are one path.
func writeHeat(b *bytes.Buffer, v *ClusterView, end time.Duration) {
	c := v.Result
	rows := heatRows(c)
	cols := 0
	for _, r := range v.Heat {
		cols = max(cols, len(r))
	}
	if cols == 0 || len(rows) == 0 {
		b.WriteString("<p class=\"note\">no syncs to show</p>\n")
		return
	}
	span := time.Duration(cols) * v.Column
	mean := make([]time.Duration, cols)
	for _, r := range v.Heat {
		for j, d := range r {
			mean[j] += d
		}
	}
	rowH := min(14, max(4, 700/(len(rows)+1)))
	w, h := heatLabelW+chartW+8, axisH+(len(rows)+1)*rowH+4
	cellW := float64(chartW) / float64(cols)
	fmt.Fprintf(b, "<p class=\"summary\">a row per node, a column per %v; the colour is the share of the column the node spent syncing (its syncs' modelled length), in %d steps of %g%%; the first row is the mean of every node</p>\n",
		v.Column, heatLevels, 100.0/heatLevels)
	if len(rows) < len(c.Nodes) {
		fmt.Fprintf(b, "<p class=\"note\">%d of %d nodes drawn: those with the most sync time (the rows that differ), in the cluster's order; the mean row counts every node, and the table below lists the worst latencies</p>\n", len(rows), len(c.Nodes))
	}
	fmt.Fprintf(b, "<svg id=\"heat\" class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" data-rows=\"%d\" data-columns=\"%d\" data-column-ns=\"%d\">\n",
		w, h, w, h, len(rows), cols, v.Column.Nanoseconds())
	b.WriteString("<g class=\"axis\">")
	x := func(at time.Duration) float64 { return heatLabelW + float64(at)/float64(span)*chartW }
	ts := tickStep(span, chartW)
	for at := time.Duration(0); at <= span; at += ts {
		xx := px(x(at))
		fmt.Fprintf(b, "<line class=\"grid\" x1=\"%s\" x2=\"%s\" y1=\"%d\" y2=\"%d\"/><text class=\"ticklabel\" x=\"%s\" y=\"%d\">%v</text>", xx, xx, axisH-6, h, xx, axisH-10, at)
	}
	b.WriteString("</g>\n")
	all := time.Duration(len(c.Nodes)) * v.Column
	writeHeatRow(b, "all nodes (mean)", "", mean, all, v.Column, axisH, rowH, cellW)
	for k, i := range rows {
		n := c.Nodes[i]
		writeHeatRow(b, n.Name, n.Pool, v.Heat[i], v.Column, v.Column, axisH+(k+1)*rowH, rowH, cellW)
	}
	b.WriteString("</svg>\n")
	b.WriteString("<p class=\"legend\">busy share: ")
	for l := 1; l <= heatLevels; l++ {
		fmt.Fprintf(b, "<span class=\"key h%d\"></span>≤%g%% ", l, float64(l)*100/heatLevels)
	}
	b.WriteString("</p>\n")
}

// heatLevel is the colour step of busy over column: 0 idle, else
// 1..heatLevels (a share past 1, overlapping syncs of a restarted
// proxy, is the top step).
func heatLevel(busy, column time.Duration) int {
	if busy <= 0 {
		return 0
	}
	return min(heatLevels, max(1, int(math.Ceil(float64(busy)/float64(column)*heatLevels))))
}

func writeHeatRow(b *bytes.Buffer, name, pool string, row []time.Duration, column, colLen time.Duration, top, rowH int, cellW float64) {
	var total, peak time.Duration
	peakAt := 0
	for j, d := range row {
		total += d
		if d > peak {
			peak, peakAt = d, j
		}
	}
	title := name
	if pool != "" {
		title += " (" + pool + ")"
	}
	title += fmt.Sprintf(": %v syncing", total)
	if peak > 0 {
		title += fmt.Sprintf("; busiest %v–%v, %.1f%%", time.Duration(peakAt)*colLen, time.Duration(peakAt+1)*colLen, 100*float64(peak)/float64(column))
	}
	fmt.Fprintf(b, "<g class=\"hrow\" data-node=\"%s\" data-busy-ns=\"%d\" data-peak-level=\"%d\"><title>%s</title><text class=\"hname\" x=\"6\" y=\"%d\">%s</text>",
		html.EscapeString(name), total.Nanoseconds(), heatLevel(peak, column), html.EscapeString(title), top+rowH-1, html.EscapeString(name))
	var paths [heatLevels + 1]bytes.Buffer
	for j, d := range row {
		l := heatLevel(d, column)
		if l == 0 {
			continue
		}
		fmt.Fprintf(&paths[l], "M%s %dh%sv%dh-%sz", px(heatLabelW+float64(j)*cellW), top, px(cellW), rowH-1, px(cellW))
	}
	for l := 1; l <= heatLevels; l++ {
		if paths[l].Len() > 0 {
			fmt.Fprintf(b, "<path class=\"h%d\" d=\"%s\"/>", l, paths[l].String())
		}
	}
	b.WriteString("</g>\n")
}

// writeNodeTable lists the nodes with the worst samples, the world's own
// node first among equals.
func writeNodeTable(b *bytes.Buffer, c *replay.ClusterResult) {
	idx := make([]int, len(c.Nodes))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		na, nb := c.Nodes[a], c.Nodes[b]
		return cmp.Or(cmp.Compare(nb.Worst, na.Worst), cmp.Compare(nb.WorstPod, na.WorstPod))
	})
	if len(idx) > NodeTableRows {
		idx = idx[:NodeTableRows]
	}
	fmt.Fprintf(b, "<h3>Nodes</h3>\n<p class=\"summary\">the %d of %d nodes with the worst network programming latency sample</p>\n", len(idx), len(c.Nodes))
	b.WriteString("<table id=\"nodes\"><thead><tr><th>node</th><th>pool</th><th>worst sample</th><th>worst pod latency</th><th>syncs</th><th>failed</th><th>CPU-s per node-hour</th><th>restarts</th></tr></thead>\n<tbody>\n")
	for _, i := range idx {
		n := c.Nodes[i]
		fmt.Fprintf(b, "<tr data-node=\"%s\"><td>%s</td><td>%s</td><td data-ns=\"%d\">%v</td><td data-ns=\"%d\">%v</td><td>%d</td><td>%d</td><td>%.2f</td><td>%d</td></tr>\n",
			html.EscapeString(n.Name), html.EscapeString(n.Name), html.EscapeString(n.Pool), n.Worst.Nanoseconds(), n.Worst, n.WorstPod.Nanoseconds(), n.WorstPod,
			n.Syncs, n.FailedSyncs, n.CPUPerHour, len(n.Restarts))
	}
	b.WriteString("</tbody></table>\n")
}
