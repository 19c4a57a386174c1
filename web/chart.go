package web

import (
	"fmt"
	"html/template"
	"strings"
	"time"

	"github.com/simrelay/simrelay/store"
)

// chartSeries are the lines of the overview chart, in drawing order. Equal
// series lie on one another (every sent message delivered is the common
// case), so each later line is narrower than the one under it and the
// earlier one shows as a band around it: no line hides another. Widths are
// screen pixels (non-scaling-stroke), so the bands show at any size.
var chartSeries = []struct {
	name, class string
	width       float64
	value       func(store.Counts) uint64
}{
	{"sent", "s-sent", 7, func(c store.Counts) uint64 { return c.Sent }},
	{"delivered", "s-delivered", 4, func(c store.Counts) uint64 { return c.Delivered }},
	{"received", "s-received", 2.5, func(c store.Counts) uint64 { return c.Received }},
	{"failed", "s-failed", 1.5, func(c store.Counts) uint64 { return c.Failed }},
}

// Chart geometry, in SVG user units; the SVG scales to its box.
const (
	chartW, chartH = 720, 240
	padL, padB     = 44, 28
	padT, padR     = 12, 12
)

// lineChart draws one line per series over the days from first, with a
// y axis scaled to the largest value, as SVG: rendered on the server, so it
// needs no script, and readable by a screen reader through its title and
// the table beside it.
func lineChart(first time.Time, days []store.Counts) template.HTML {
	var max uint64
	for _, d := range days {
		for _, s := range chartSeries {
			max = maxU(max, s.value(d))
		}
	}
	top, steps := niceCeil(max)
	plotW, plotH := float64(chartW-padL-padR), float64(chartH-padT-padB)
	x := func(i int) float64 {
		if len(days) < 2 {
			return float64(padL) + plotW/2
		}
		return float64(padL) + plotW*float64(i)/float64(len(days)-1)
	}
	y := func(v uint64) float64 { return float64(padT) + plotH*(1-float64(v)/float64(top)) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %d %d" role="img" aria-labelledby="chart-title" xmlns="http://www.w3.org/2000/svg"><title id="chart-title">Messages per day, last %d days: sent, delivered, failed and received</title>`, chartW, chartH, len(days))
	for i := uint64(0); i <= steps; i++ {
		v := top * i / steps
		fmt.Fprintf(&b, `<line class="grid" x1="%d" x2="%d" y1="%.1f" y2="%.1f"/><text class="axis" x="%d" y="%.1f" text-anchor="end">%d</text>`,
			padL, chartW-padR, y(v), y(v), padL-6, y(v)+4, v)
	}
	for i := 0; i < len(days); i += 7 {
		fmt.Fprintf(&b, `<text class="axis" x="%.1f" y="%d" text-anchor="middle">%s</text>`, x(i), chartH-8, first.AddDate(0, 0, i).Format(dayLayout))
	}
	for _, s := range chartSeries {
		fmt.Fprintf(&b, `<polyline class="line %s" data-series="%s" stroke-width="%g" vector-effect="non-scaling-stroke" fill="none" points="`, s.class, s.name, s.width)
		for i, d := range days {
			fmt.Fprintf(&b, "%.1f,%.1f ", x(i), y(s.value(d)))
		}
		b.WriteString(`"/>`)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) //nolint:gosec // numbers and fixed text only
}

func maxU(a, b uint64) uint64 {
	if a > b {
		return a
	}
	return b
}

// niceCeil is the top of the y axis and its number of grid steps: the
// smallest 4 or 5 steps of 1, 2 or 5 times a power of ten that reach v, so
// the grid reads well and the top is no further above v than it must be
// (10 gets 5 steps of 2, not 4 steps of 5).
func niceCeil(v uint64) (top, steps uint64) {
	if v < 4 {
		return 4, 4
	}
	for step := uint64(1); ; step *= 10 {
		for _, m := range []uint64{1, 2, 5} {
			for _, n := range []uint64{4, 5} {
				if step*m*n >= v {
					return step * m * n, n
				}
			}
		}
	}
}
