package web

import (
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
)

func TestLineChartDrawsFourSeriesScaledToTheTop(t *testing.T) {
	t.Parallel()
	days := make([]store.Counts, 30)
	days[29] = store.Counts{Sent: 7, Delivered: 5, Failed: 1, Received: 3}
	svg := string(lineChart(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), days))
	if n := strings.Count(svg, "<polyline"); n != 4 {
		t.Errorf("got %d lines, want 4", n)
	}
	if !strings.HasPrefix(svg, "<svg") || !strings.Contains(svg, "<title") {
		t.Error("not an SVG with a title")
	}
	if !strings.Contains(svg, ">8</text>") { // 7 rounds up to a grid of 2s
		t.Errorf("the axis does not top out at 8: %s", svg)
	}
	if !strings.Contains(svg, ">2026-11-01</text>") || strings.Contains(svg, "Nov 1") {
		t.Error("the days under the chart are not written as 2006-01-02, as everywhere in the console")
	}
	for v, want := range map[uint64][2]uint64{0: {4, 4}, 5: {5, 5}, 7: {8, 4}, 9: {10, 5}, 10: {10, 5}, 11: {20, 4}, 41: {50, 5}, 1000: {1000, 5}, 1001: {2000, 4}} {
		if top, steps := niceCeil(v); top != want[0] || steps != want[1] {
			t.Errorf("niceCeil(%d): got %d in %d steps, want %d in %d", v, top, steps, want[0], want[1])
		}
	}
}
