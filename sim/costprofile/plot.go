package costprofile

import (
	"bytes"
	"fmt"
	"html"
	"math"
	"strconv"
)

// Plot sizes: one panel per dataplane and kernel term, log-log.
const (
	panelW, panelH = 300, 220
	padL, padT     = 56, 28
	padR, padB     = 12, 40
)

// SVG draws each dataplane's kernel terms, one panel each (a row per
// dataplane): the measured points (median, with a bar from min to max) and
// the fitted curve over them, both axes logarithmic. The same profile
// gives the same bytes.
func (p *Profile) SVG() []byte {
	cols := 0
	for _, m := range p.Modes {
		cols = max(cols, len(m.Kernel))
	}
	w, h := max(1, cols)*panelW, len(p.Modes)*panelH+30
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n", w, h, w, h)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", w, h)
	fmt.Fprintf(&b, `<text x="8" y="18" font-size="13" font-weight="bold">cost profile %s: %s, %d cores, kernel %s (%s)</text>`+"\n",
		esc(p.Name), esc(p.Machine.CPU), p.Machine.Cores, esc(p.Machine.Kernel), esc(p.Machine.Date))
	for r, m := range p.Modes {
		for c, t := range m.Kernel {
			panel(&b, c*panelW, 30+r*panelH, m.Dataplane, t)
		}
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

func panel(b *bytes.Buffer, x0, y0 int, dataplane string, t Term) {
	if len(t.Points) == 0 {
		return
	}
	xmin, xmax := math.Inf(1), math.Inf(-1)
	ymin, ymax := math.Inf(1), math.Inf(-1)
	for _, pt := range t.Points {
		if pt.Size <= 0 {
			continue
		}
		xmin, xmax = math.Min(xmin, pt.Size), math.Max(xmax, pt.Size)
		for _, s := range pt.Seconds {
			if s > 0 {
				ymin, ymax = math.Min(ymin, s), math.Max(ymax, s)
			}
		}
	}
	if math.IsInf(xmin, 1) || math.IsInf(ymin, 1) {
		return
	}
	lx0, lx1 := math.Floor(math.Log10(xmin)), math.Ceil(math.Log10(xmax))
	ly0, ly1 := math.Floor(math.Log10(ymin)), math.Ceil(math.Log10(ymax))
	if lx1 == lx0 {
		lx1++
	}
	if ly1 == ly0 {
		ly1++
	}
	iw, ih := float64(panelW-padL-padR), float64(panelH-padT-padB)
	X := func(v float64) float64 { return float64(x0+padL) + iw*(math.Log10(v)-lx0)/(lx1-lx0) }
	Y := func(v float64) float64 { return float64(y0+padT) + ih*(1-(math.Log10(v)-ly0)/(ly1-ly0)) }
	fmt.Fprintf(b, `<text x="%d" y="%d" font-weight="bold">%s %s</text>`+"\n", x0+padL, y0+16, esc(dataplane), esc(string(t.Kind)))
	fmt.Fprintf(b, `<text x="%d" y="%d" fill="#555555">%s, held-out %.0f%%</text>`+"\n", x0+padL, y0+padT+12, esc(string(t.Curve.Form)), 100*t.Curve.HeldOutError)
	for e := lx0; e <= lx1; e++ {
		x := X(math.Pow(10, e))
		fmt.Fprintf(b, `<line x1="%s" y1="%d" x2="%s" y2="%s" stroke="#dddddd"/>`+"\n", num(x), y0+padT, num(x), num(float64(y0+padT)+ih))
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="middle">1e%d</text>`+"\n", num(x), num(float64(y0+padT)+ih+14), int(e))
	}
	for e := ly0; e <= ly1; e++ {
		y := Y(math.Pow(10, e))
		fmt.Fprintf(b, `<line x1="%d" y1="%s" x2="%s" y2="%s" stroke="#dddddd"/>`+"\n", x0+padL, num(y), num(float64(x0+padL)+iw), num(y))
		fmt.Fprintf(b, `<text x="%d" y="%s" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", x0+padL-4, num(y), secs(math.Pow(10, e)))
	}
	fmt.Fprintf(b, `<text x="%s" y="%d" text-anchor="middle">%s</text>`+"\n", num(float64(x0+padL)+iw/2), y0+panelH-8, esc(string(t.Measure)))
	// The curve, sampled evenly in log x, clipped to the panel.
	var pts []byte
	for i := 0; i <= 60; i++ {
		x := math.Pow(10, lx0+(lx1-lx0)*float64(i)/60)
		y := t.Curve.At(x)
		if y <= 0 || math.Log10(y) < ly0 || math.Log10(y) > ly1 {
			continue
		}
		pts = append(pts, []byte(num(X(x))+","+num(Y(y))+" ")...)
	}
	if len(pts) > 0 {
		fmt.Fprintf(b, `<polyline fill="none" stroke="#d62728" stroke-width="1.5" points="%s"/>`+"\n", bytes.TrimSpace(pts))
	}
	for _, pt := range t.Points {
		if pt.Size <= 0 || len(pt.Seconds) == 0 {
			continue
		}
		lo, hi := pt.Seconds[0], pt.Seconds[0]
		for _, s := range pt.Seconds {
			lo, hi = math.Min(lo, s), math.Max(hi, s)
		}
		m := pt.Median()
		if lo <= 0 || m <= 0 {
			continue
		}
		x := num(X(pt.Size))
		fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#1f77b4"/>`+"\n", x, num(Y(lo)), x, num(Y(hi)))
		fmt.Fprintf(b, `<circle cx="%s" cy="%s" r="3" fill="#1f77b4"><title>%s %g: median %s (%d runs)</title></circle>`+"\n", x, num(Y(m)), esc(string(t.Measure)), pt.Size, secs(m), len(pt.Seconds))
	}
}

func secs(s float64) string {
	switch {
	case s >= 1:
		return strconv.FormatFloat(s, 'g', 3, 64) + "s"
	case s >= 1e-3:
		return strconv.FormatFloat(s*1e3, 'g', 3, 64) + "ms"
	}
	return strconv.FormatFloat(s*1e6, 'g', 3, 64) + "µs"
}

func num(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

func esc(s string) string { return html.EscapeString(s) }
