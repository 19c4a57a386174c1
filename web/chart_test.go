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
	for v, want := range map[uint64]uint64{0: 4, 7: 8, 9: 20, 41: 80, 1000: 2000} {
		if got := niceCeil(v); got != want {
			t.Errorf("niceCeil(%d): got %d, want %d", v, got, want)
		}
	}
}
