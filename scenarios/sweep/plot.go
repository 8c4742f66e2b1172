package sweep

import (
	"bytes"
	"fmt"
	"html"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Metrics are the columns a plot can put on its y axis.
var Metrics = []string{"syncs", "dataplaneOps", "samples", "p50", "p99", "max", "syncP50", "syncP99", "syncMax", "syncCPU", "fullSyncs", "partialSyncs", "failed",
	"sliPerc50", "sliPerc90", "sliPerc99", "podP99", "nodeCPU", "worstNodeCPU"}

// metricValue is a result's value of a metric, durations in seconds.
func metricValue(res Result, metric string) float64 {
	switch metric {
	case "syncs":
		return float64(res.Syncs)
	case "dataplaneOps":
		return float64(res.DataplaneOps)
	case "samples":
		return float64(res.Samples)
	case "p50":
		return time.Duration(res.P50).Seconds()
	case "p99":
		return time.Duration(res.P99).Seconds()
	case "max":
		return time.Duration(res.Max).Seconds()
	case "syncP50":
		return time.Duration(res.SyncP50).Seconds()
	case "syncP99":
		return time.Duration(res.SyncP99).Seconds()
	case "syncMax":
		return time.Duration(res.SyncMax).Seconds()
	case "syncCPU":
		return res.SyncCPUPerHour
	case "fullSyncs":
		return float64(res.FullSyncs)
	case "partialSyncs":
		return float64(res.PartialSyncs)
	case "failed":
		return float64(res.Failed)
	}
	if c := res.Cluster; c != nil {
		switch metric {
		case "sliPerc50":
			return time.Duration(c.SLIPerc50).Seconds()
		case "sliPerc90":
			return time.Duration(c.SLIPerc90).Seconds()
		case "sliPerc99":
			return time.Duration(c.SLIPerc99).Seconds()
		case "podP99":
			return time.Duration(c.PodP99).Seconds()
		case "nodeCPU":
			return c.NodeCPU
		case "worstNodeCPU":
			return c.WorstNodeCPU
		}
	}
	return 0
}

func isDuration(metric string) bool {
	switch metric {
	case "p50", "p99", "max", "syncP50", "syncP99", "syncMax", "sliPerc50", "sliPerc90", "sliPerc99", "podP99":
		return true
	}
	return false
}

// CheckMetric refuses a metric a plot cannot draw.
func CheckMetric(metric string) error {
	for _, m := range Metrics {
		if m == metric {
			return nil
		}
	}
	return fmt.Errorf("--plot-metric %q: want one of %s", metric, strings.Join(Metrics, ", "))
}

// ParseMetrics reads --plot-metric: one metric, or several separated by
// commas (a panel each), none twice.
func ParseMetrics(arg string) ([]string, error) {
	var out []string
	for _, m := range strings.Split(arg, ",") {
		m = strings.TrimSpace(m)
		if err := CheckMetric(m); err != nil {
			return nil, err
		}
		if slices.Contains(out, m) {
			return nil, fmt.Errorf("--plot-metric %s: %s is listed twice", arg, m)
		}
		out = append(out, m)
	}
	return out, nil
}

// palette colours the series, in order (then again).
var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2"}

// Plot geometry, in SVG user units: the chart, then the x axis's name,
// then the legend, a line per series.
const (
	plotW, chartH              = 720, 380
	marginL, marginR, marginT  = 80, 40, 40
	axisH, legendLine, bottomM = 56, 18, 10
)

// dashes tell apart series whose lines overlap, with the colours.
var dashes = []string{"", "6 3", "2 3", "8 3 2 3"}

// series is one line of the plot: a combination of the values of every axis
// but the first, and a y per value of the first (NaN where no result).
type series struct {
	label string
	y     []float64
}

func (r *Report) series(metric string) []series {
	nx := len(r.Axes[0].Values)
	nseries := len(r.Points) / nx
	out := make([]series, nseries)
	for s := range out {
		out[s].y = make([]float64, nx)
		for i := range out[s].y {
			out[s].y[i] = math.NaN()
		}
		// Points vary the first axis slowest: series s, x i is point i*nseries+s.
		p := r.Points[s]
		var parts []string
		for k, a := range r.Axes[1:] {
			parts = append(parts, a.Key+"="+p.Values[k+1])
		}
		out[s].label = strings.Join(parts, " ")
		if out[s].label == "" {
			out[s].label = metric
		}
	}
	for _, res := range r.Results {
		if res.Error != "" || (metric == "p50" || metric == "p99" || metric == "max") && res.Samples == 0 {
			continue
		}
		out[res.Point%nseries].y[res.Point/nseries] = metricValue(res, metric)
	}
	return out
}

// niceStep is a round step (1, 2 or 5 times a power of ten) that cuts
// [0, top] into about five intervals.
func niceStep(top float64) float64 {
	if top <= 0 {
		return 1
	}
	raw := top / 5
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

func num(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// tickLabel writes a value of metric; decimals is how many a count needs
// (a tick step of 0.5 needs one; -1 writes as many as the value has).
func tickLabel(v float64, metric string, decimals int) string {
	if isDuration(metric) {
		return time.Duration(math.Round(v * float64(time.Second))).String()
	}
	return strconv.FormatFloat(v, 'f', decimals, 64)
}

// SVG draws metric (one of Metrics) over the points: x is the first axis's
// values, in order and evenly spaced; one line per combination of the other
// axes. The same report gives the same bytes.
func (r *Report) SVG(metric string) []byte {
	ss := r.series(metric)
	xs := r.Axes[0].Values
	top := 0.0
	for _, s := range ss {
		for _, y := range s.y {
			if !math.IsNaN(y) {
				top = math.Max(top, y)
			}
		}
	}
	step := niceStep(top)
	ymax := step * math.Max(1, math.Ceil(top/step))
	innerW := float64(plotW - marginL - marginR)
	innerH := float64(chartH - marginT)
	plotH := chartH + axisH + legendLine*len(ss) + bottomM
	xAt := func(i int) float64 {
		if len(xs) == 1 {
			return marginL + innerW/2
		}
		return marginL + innerW*float64(i)/float64(len(xs)-1)
	}
	yAt := func(v float64) float64 { return marginT + innerH*(1-v/ymax) }

	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", plotW, plotH, plotW, plotH)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", plotW, plotH)
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="14" font-weight="bold">%s: %s</text>`+"\n", marginL, esc(r.Scenario), esc(metricTitle(metric)))
	// Grid and y ticks.
	decimals := max(0, int(-math.Floor(math.Log10(step))))
	for k := 0; float64(k)*step <= ymax+step/2; k++ {
		v := float64(k) * step
		y := num(yAt(v))
		fmt.Fprintf(&b, `<line x1="%d" y1="%s" x2="%s" y2="%s" stroke="#dddddd"/>`+"\n", marginL, y, num(marginL+innerW), y)
		fmt.Fprintf(&b, `<text x="%d" y="%s" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", marginL-6, y, esc(tickLabel(v, metric, decimals)))
	}
	// Axes and x ticks.
	fmt.Fprintf(&b, `<line x1="%d" y1="%s" x2="%s" y2="%s" stroke="#000000"/>`+"\n", marginL, num(marginT+innerH), num(marginL+innerW), num(marginT+innerH))
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%s" stroke="#000000"/>`+"\n", marginL, marginT, marginL, num(marginT+innerH))
	for i, x := range xs {
		fmt.Fprintf(&b, `<text x="%s" y="%s" text-anchor="middle">%s</text>`+"\n", num(xAt(i)), num(marginT+innerH+18), esc(x))
	}
	fmt.Fprintf(&b, `<text x="%s" y="%d" text-anchor="middle" font-weight="bold">%s</text>`+"\n", num(marginL+innerW/2), chartH+axisH-16, esc(r.Axes[0].Key))
	// Series: a line through the points it has, a dot at each.
	for k, s := range ss {
		colour := palette[k%len(palette)]
		dash := ""
		if d := dashes[k%len(dashes)]; d != "" {
			dash = ` stroke-dasharray="` + d + `"`
		}
		var pts []string
		for i, y := range s.y {
			if math.IsNaN(y) {
				continue
			}
			pts = append(pts, num(xAt(i))+","+num(yAt(y)))
		}
		if len(pts) > 1 {
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`+"\n", colour, dash, strings.Join(pts, " "))
		}
		for i, y := range s.y {
			if math.IsNaN(y) {
				continue
			}
			fmt.Fprintf(&b, `<circle cx="%s" cy="%s" r="4" fill="%s"><title>%s %s=%s: %s</title></circle>`+"\n",
				num(xAt(i)), num(yAt(y)), colour, esc(s.label), esc(r.Axes[0].Key), esc(xs[i]), esc(tickLabel(y, metric, -1)))
		}
		ly := chartH + axisH + legendLine*k + legendLine/2
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>`+"\n", marginL, ly, marginL+28, ly, colour, dash)
		fmt.Fprintf(&b, `<text x="%d" y="%d" dominant-baseline="middle">%s</text>`+"\n", marginL+36, ly, esc(s.label))
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

func metricTitle(metric string) string {
	switch metric {
	case "p50", "p99", "max":
		return "network programming latency " + metric
	case "syncP50", "syncP99", "syncMax":
		return "sync duration " + metric[4:]
	case "syncCPU":
		return "seconds of syncing per virtual hour"
	case "fullSyncs", "partialSyncs":
		return metric[:len(metric)-5] + " syncs"
	case "dataplaneOps":
		return "dataplane operations"
	case "samples":
		return "network programming latency samples"
	case "failed":
		return "failed expectations"
	case "sliPerc50", "sliPerc90", "sliPerc99":
		return "network programming latency SLI (ClusterLoader2) Perc" + metric[8:]
	case "podP99":
		return "true pod latency p99, all nodes"
	case "nodeCPU":
		return "seconds of syncing per node-hour, mean"
	case "worstNodeCPU":
		return "seconds of syncing per node-hour, worst node"
	}
	return metric
}

func esc(s string) string { return html.EscapeString(s) }

// Plot draws one metric as SVG does, several as PanelsSVG does.
func (r *Report) Plot(metrics ...string) []byte {
	if len(metrics) == 1 {
		return r.SVG(metrics[0])
	}
	return r.PanelsSVG(metrics)
}

// HTML is a self-contained page (nothing loaded from elsewhere): the plot
// of the metrics (Plot) and the table.
func (r *Report) HTML(metrics ...string) []byte {
	var b bytes.Buffer
	title := "proxysim sweep: " + r.Scenario
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>%s</title>\n", esc(title))
	b.WriteString("<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}th,td{border:1px solid #ccc;padding:2px 8px;text-align:left;vertical-align:top;white-space:nowrap}td.n{text-align:right}td.f{white-space:normal;font-size:smaller;min-width:30em}</style>\n</head>\n<body>\n")
	fmt.Fprintf(&b, "<h1>%s</h1>\n<p>%d points", esc(title), len(r.Points))
	if r.Shard != "" {
		fmt.Fprintf(&b, "; shard %s ran %d", esc(r.Shard), len(r.Ran))
	}
	fmt.Fprintf(&b, "; scenario digest <code>%s</code></p>\n", esc(r.Digest))
	b.Write(r.Plot(metrics...))
	b.WriteString("<table>\n")
	for i, row := range r.rows() {
		b.WriteString("<tr>")
		for j, cell := range row {
			switch {
			case i == 0:
				fmt.Fprintf(&b, "<th>%s</th>", esc(cell))
			case j == len(row)-1:
				fmt.Fprintf(&b, "<td class=\"f\">%s</td>", esc(cell))
			case j == 0 || j > len(r.Axes):
				fmt.Fprintf(&b, "<td class=\"n\">%s</td>", esc(cell))
			default:
				fmt.Fprintf(&b, "<td>%s</td>", esc(cell))
			}
		}
		b.WriteString("</tr>\n")
	}
	b.WriteString("</table>\n</body>\n</html>\n")
	return b.Bytes()
}
