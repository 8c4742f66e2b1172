package sweep

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Panel geometry: panels side by side, two to a row, one legend under
// them all.
const (
	panelW, panelH            = 420, 300
	panelL, panelR, panelT    = 70, 16, 34
	panelB, panelsTop, perRow = 44, 30, 2
)

// PanelsSVG draws several metrics of the report, one panel each, with the
// same x (the first axis's values, evenly spaced) and the same series (a
// line per combination of the other axes, named once in a legend under
// the panels). Each panel's y is logarithmic, in decades, because a sweep
// over cluster sizes spans orders of magnitude; a value of 0 (or none) is
// left out. The same report gives the same bytes.
func (r *Report) PanelsSVG(metrics []string) []byte {
	rows := (len(metrics) + perRow - 1) / perRow
	cols := min(len(metrics), perRow)
	nseries := len(r.Points) / len(r.Axes[0].Values)
	w := cols * panelW
	h := panelsTop + rows*panelH + legendLine*nseries + bottomM
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n", w, h, w, h)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", w, h)
	fmt.Fprintf(&b, `<text x="8" y="20" font-size="14" font-weight="bold">%s, over %s</text>`+"\n", esc(r.Scenario), esc(r.Axes[0].Key))
	var labels []string
	for k, m := range metrics {
		ss := r.series(m)
		if k == 0 {
			for _, s := range ss {
				labels = append(labels, s.label)
			}
		}
		r.panel(&b, (k%perRow)*panelW, panelsTop+(k/perRow)*panelH, m, ss)
	}
	for k, l := range labels {
		colour, dash := r.panelStyle(k)
		ly := panelsTop + rows*panelH + legendLine*k + legendLine/2
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>`+"\n", panelL, ly, panelL+28, ly, colour, dash)
		fmt.Fprintf(&b, `<text x="%d" y="%d" dominant-baseline="middle">%s</text>`+"\n", panelL+36, ly, esc(l))
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// panelStyle is series k's colour and dash attribute. With three axes or
// more, the last axis (which varies fastest) picks the dash and the others
// the colour, so that a mode's lines share a colour and a minSyncPeriod
// its dash; with two, each series has its own colour and dash.
func (r *Report) panelStyle(k int) (colour, dash string) {
	c, d := k, k
	if len(r.Axes) > 2 {
		n := len(r.Axes[len(r.Axes)-1].Values)
		c, d = k/n, k%n
	}
	colour = palette[c%len(palette)]
	if s := dashes[d%len(dashes)]; s != "" {
		dash = ` stroke-dasharray="` + s + `"`
	}
	return colour, dash
}

func (r *Report) panel(b *bytes.Buffer, x0, y0 int, metric string, ss []series) {
	xs := r.Axes[0].Values
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range ss {
		for _, y := range s.y {
			if y > 0 {
				lo, hi = math.Min(lo, y), math.Max(hi, y)
			}
		}
	}
	fmt.Fprintf(b, `<text x="%d" y="%d" font-weight="bold">%s</text>`+"\n", x0+panelL, y0+16, esc(metricTitle(metric)))
	if math.IsInf(lo, 1) {
		fmt.Fprintf(b, `<text x="%d" y="%d" fill="#555555">no values above 0</text>`+"\n", x0+panelL, y0+panelT+20)
		return
	}
	e0, e1 := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if e1 == e0 {
		e1++
	}
	iw, ih := float64(panelW-panelL-panelR), float64(panelH-panelT-panelB)
	X := func(i int) float64 {
		if len(xs) == 1 {
			return float64(x0+panelL) + iw/2
		}
		return float64(x0+panelL) + iw*float64(i)/float64(len(xs)-1)
	}
	Y := func(v float64) float64 { return float64(y0+panelT) + ih*(1-(math.Log10(v)-e0)/(e1-e0)) }
	for e := e0; e <= e1; e++ {
		y := num(Y(math.Pow(10, e)))
		fmt.Fprintf(b, `<line x1="%d" y1="%s" x2="%s" y2="%s" stroke="#dddddd"/>`+"\n", x0+panelL, y, num(float64(x0+panelL)+iw), y)
		fmt.Fprintf(b, `<text x="%d" y="%s" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", x0+panelL-4, y, esc(decadeLabel(int(e), metric)))
	}
	bottom := num(float64(y0+panelT) + ih)
	fmt.Fprintf(b, `<line x1="%d" y1="%s" x2="%s" y2="%s" stroke="#000000"/>`+"\n", x0+panelL, bottom, num(float64(x0+panelL)+iw), bottom)
	for i, x := range xs {
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="middle">%s</text>`+"\n", num(X(i)), num(float64(y0+panelT)+ih+14), esc(x))
	}
	fmt.Fprintf(b, `<text x="%s" y="%d" text-anchor="middle">%s</text>`+"\n", num(float64(x0+panelL)+iw/2), y0+panelH-12, esc(r.Axes[0].Key))
	for k, s := range ss {
		colour, dash := r.panelStyle(k)
		var pts []string
		for i, y := range s.y {
			if y > 0 {
				pts = append(pts, num(X(i))+","+num(Y(y)))
			}
		}
		if len(pts) > 1 {
			fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="1.5"%s points="%s"/>`+"\n", colour, dash, strings.Join(pts, " "))
		}
		for i, y := range s.y {
			if y > 0 {
				fmt.Fprintf(b, `<circle cx="%s" cy="%s" r="3" fill="%s"><title>%s %s=%s: %s</title></circle>`+"\n",
					num(X(i)), num(Y(y)), colour, esc(s.label), esc(r.Axes[0].Key), esc(xs[i]), esc(tickLabel(y, metric, -1)))
			}
		}
	}
}

// decadeLabel writes 10^e of metric: a duration in the unit that reads
// best, a count or a number of seconds plainly.
func decadeLabel(e int, metric string) string {
	p := func(n int) string { return strconv.FormatFloat(math.Pow10(n), 'f', -1, 64) }
	switch {
	case !isDuration(metric):
		return p(e)
	case e >= 0:
		return p(e) + "s"
	case e >= -3:
		return p(e+3) + "ms"
	}
	return p(e+6) + "µs"
}
