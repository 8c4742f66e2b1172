package report

import (
	"bytes"
	"fmt"
	"html"
	"math"
	"sort"
	"strconv"
	"time"
)

// The timeline's geometry, shared with page.js (which reads it from the
// SVG's data attributes).
const (
	labelW = 240  // the lane names' column
	plotW  = 1000 // the static view's plot width
	laneH  = 22
	axisH  = 28
	colW   = 2  // an aggregated column, in pixels
	pad    = 8  // room either side of the plot, so marks at its ends show whole
	right  = 24 // room for the last tick's label
)

// tickSteps are the axis's candidate spacings, in nanoseconds.
var tickSteps = func() []time.Duration {
	var out []time.Duration
	for _, u := range []time.Duration{time.Nanosecond, time.Microsecond, time.Millisecond} {
		for _, m := range []time.Duration{1, 2, 5, 10, 20, 50, 100, 200, 500} {
			out = append(out, m*u)
		}
	}
	for _, d := range []string{"1s", "2s", "5s", "10s", "15s", "30s", "1m", "2m", "5m", "10m", "15m", "30m", "1h", "2h", "3h", "6h", "12h", "24h"} {
		v, _ := time.ParseDuration(d)
		out = append(out, v)
	}
	return out
}()

// tickStep is the smallest spacing that leaves minPx pixels between ticks.
func tickStep(span time.Duration, width float64) time.Duration {
	for _, s := range tickSteps {
		if float64(s)/float64(span)*width >= 80 {
			return s
		}
	}
	return tickSteps[len(tickSteps)-1]
}

func px(x float64) string { return strconv.FormatFloat(x, 'f', 1, 64) }

// writeSVG draws the whole replay [0, End] at plotW pixels: each lane's
// events one by one when there are few enough (at most one per colW
// pixels), else as counts per colW-pixel column; failed checks always one by
// one, with a red line across every lane.
func writeSVG(b *bytes.Buffer, t *Timeline, lanes []*pageLane) {
	end := t.End
	if end <= 0 {
		end = time.Second
	}
	h := axisH + len(lanes)*laneH + 4
	w := labelW + plotW + 2*pad + right
	x := func(at time.Duration) float64 { return labelW + pad + float64(at)/float64(end)*plotW }
	fmt.Fprintf(b, "<svg id=\"tl\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" data-label-w=\"%d\" data-lane-h=\"%d\" data-axis-h=\"%d\" data-col-w=\"%d\" data-pad=\"%d\" data-right=\"%d\">\n",
		w, h, w, h, labelW, laneH, axisH, colW, pad, right)
	b.WriteString("<defs><clipPath id=\"plotclip\"><rect id=\"cliprect\" x=\"" + strconv.Itoa(labelW) + "\" y=\"0\" width=\"" + strconv.Itoa(plotW+2*pad) + "\" height=\"" + strconv.Itoa(h) + "\"/></clipPath></defs>\n")

	// Lanes: background and names.
	b.WriteString("<g id=\"lanes\">\n")
	for i, l := range lanes {
		y := axisH + i*laneH
		fmt.Fprintf(b, "<g class=\"lane\" data-lane=\"%d\" data-kind=\"%s\"><rect class=\"lanebg%s\" x=\"0\" y=\"%d\" width=\"%d\" height=\"%d\"/><text class=\"lanename\" x=\"6\" y=\"%d\">%s</text><text class=\"lanecount\" x=\"%d\" y=\"%d\">%d</text></g>\n",
			i, l.Kind, oddEven(i), y, w, laneH, y+15, html.EscapeString(l.Name), labelW-6, y+15, l.total)
	}
	b.WriteString("</g>\n")

	// The axis.
	b.WriteString("<g id=\"axis\">")
	step := tickStep(end, plotW)
	for at := time.Duration(0); at <= end; at += step {
		xx := px(x(at))
		fmt.Fprintf(b, "<line class=\"grid\" x1=\"%s\" x2=\"%s\" y1=\"%d\" y2=\"%d\"/><text class=\"ticklabel\" x=\"%s\" y=\"%d\">%v</text>", xx, xx, axisH-6, h, xx, axisH-10, at)
	}
	b.WriteString("</g>\n")

	// Marks.
	b.WriteString("<g id=\"marks\" clip-path=\"url(#plotclip)\" data-render=\"static\">\n")
	var failAt []time.Duration
	fails := failureLabels(t)
	for i, l := range lanes {
		top := float64(axisH + i*laneH)
		fmt.Fprintf(b, "<g class=\"lanemarks\" data-lane=\"%d\">", i)
		if l.hist != nil || len(l.marks) > plotW/colW {
			writeColumns(b, l, end, top, x)
			// Failures stay visible one by one.
			for _, m := range l.marks {
				if fails[m.Label] {
					writeMark(b, t, l, m, top, x)
				}
			}
		} else {
			for _, m := range l.marks {
				writeMark(b, t, l, m, top, x)
			}
		}
		for _, m := range l.marks {
			if l.Kind == KindChecks && fails[m.Label] {
				failAt = append(failAt, m.At)
			}
		}
		b.WriteString("</g>\n")
	}
	b.WriteString("</g>\n<g id=\"overlay\" clip-path=\"url(#plotclip)\">")
	for _, at := range failAt {
		xx := px(x(at))
		fmt.Fprintf(b, "<line class=\"failline\" x1=\"%s\" x2=\"%s\" y1=\"%d\" y2=\"%d\"/>", xx, xx, axisH, h)
	}
	fmt.Fprintf(b, "<line id=\"cursor\" x1=\"-10\" x2=\"-10\" y1=\"%d\" y2=\"%d\"/></g>\n</svg>\n", axisH-6, h)
}

func oddEven(i int) string {
	if i%2 == 1 {
		return " odd"
	}
	return ""
}

// writeMark draws one event: a run as a bar from start to end, a deferral
// as a tick and a dashed wait to the instant it waits for, a check as a
// diamond, anything else as a tick.
func writeMark(b *bytes.Buffer, t *Timeline, l *pageLane, m Mark, top float64, x func(time.Duration) float64) {
	lab := t.Labels[m.Label]
	title := html.EscapeString(markTitle(t, l, m, lab))
	cls := html.EscapeString(lab.Class)
	y, hh := top+4, float64(laneH-8)
	x0 := x(m.At)
	switch l.Kind {
	case KindRuns:
		w := 2.0
		if m.Dur > 0 {
			w = max(2, x(m.At+m.Dur)-x0)
		}
		fmt.Fprintf(b, "<rect class=\"m bar %s\" x=\"%s\" y=\"%s\" width=\"%s\" height=\"%s\"><title>%s</title></rect>", cls, px(x0), px(y), px(w), px(hh), title)
	case KindChecks:
		cy, r := top+float64(laneH)/2, 5.0
		if hasWord(lab.Class, "fail") {
			r = 7
		}
		fmt.Fprintf(b, "<path class=\"m %s\" d=\"M%s %sl%s %sl-%s %sl-%s -%sz\"><title>%s</title></path>", cls, px(x0), px(cy-r), px(r), px(r), px(r), px(r), px(r), px(r), title)
	case KindDeferrals:
		if m.Dur > 0 {
			cy := px(top + float64(laneH)/2)
			fmt.Fprintf(b, "<line class=\"wait\" x1=\"%s\" x2=\"%s\" y1=\"%s\" y2=\"%s\"/>", px(x0), px(x(m.At+m.Dur)), cy, cy)
		}
		fallthrough
	default:
		fmt.Fprintf(b, "<rect class=\"m tick %s\" x=\"%s\" y=\"%s\" width=\"2\" height=\"%s\"><title>%s</title></rect>", cls, px(x0-1), px(y), px(hh), title)
	}
}

// markTitle is a mark's tooltip: instant, details, and a run's or a
// deferral's length.
func markTitle(t *Timeline, l *pageLane, m Mark, lab Label) string {
	s := fmt.Sprintf("%v %s", m.At, lab.Text)
	switch {
	case l.Kind == KindRuns:
		s = fmt.Sprintf("%v run %d %s, %v to %v, cost %v", m.At, m.Run, lab.Text[len("run "):], m.At, m.At+m.Dur, m.Dur)
		if i := m.Run - 1; i >= 0 && i < len(t.Syncs) {
			s += "\n" + syncDetails(t.Syncs[i])
		}
	case l.Kind == KindDeferrals && m.Dur >= 0:
		s += fmt.Sprintf(" (waits %v)", m.Dur)
	}
	return s
}

// writeColumns draws a lane as event counts per colW pixels, each column's
// height growing with the logarithm of its count.
func writeColumns(b *bytes.Buffer, l *pageLane, end time.Duration, top float64, x func(time.Duration) float64) {
	n := plotW / colW
	counts := make([]int, n)
	if l.hist != nil {
		for i, c := range l.hist {
			counts[min(i*n/HistBuckets, n-1)] += c
		}
	} else {
		ats := make([]time.Duration, len(l.marks))
		for i, m := range l.marks {
			ats[i] = m.At
		}
		for c := 0; c < n; c++ {
			from := time.Duration(float64(end) * float64(c) / float64(n))
			to := time.Duration(float64(end) * float64(c+1) / float64(n))
			i := sort.Search(len(ats), func(k int) bool { return ats[k] >= from })
			j := sort.Search(len(ats), func(k int) bool { return ats[k] >= to })
			if c == n-1 {
				j = len(ats)
			}
			counts[c] = j - i
		}
	}
	most := 0
	for _, c := range counts {
		most = max(most, c)
	}
	for c, k := range counts {
		if k == 0 {
			continue
		}
		hh := columnHeight(k, most)
		from := time.Duration(float64(end) * float64(c) / float64(n))
		fmt.Fprintf(b, "<rect class=\"agg k-%s\" data-count=\"%d\" x=\"%s\" y=\"%s\" width=\"%d\" height=\"%s\"/>",
			l.Kind, k, px(x(from)), px(top+float64(laneH)-3-hh), colW, px(hh))
	}
}

// columnHeight grows with log(1+count), from 2 pixels to the lane's height.
func columnHeight(count, most int) float64 {
	full := float64(laneH - 6)
	if most <= 1 {
		return full
	}
	return max(2, full*math.Log1p(float64(count))/math.Log1p(float64(most)))
}
