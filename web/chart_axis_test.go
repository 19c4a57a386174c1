package web

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
)

// Ten sent, all delivered: the axis ends at 10, not 20, and both lines are
// drawn, the later one narrower so the earlier one still shows around it.
func TestLineChartShowsEqualSeriesAndAFittingAxis(t *testing.T) {
	days := make([]store.Counts, 30)
	days[28] = store.Counts{Sent: 10, Delivered: 10}
	days[29] = store.Counts{Sent: 4, Delivered: 4}
	svg := string(lineChart(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), days))
	labels := regexp.MustCompile(`text-anchor="end">(\d+)</text>`).FindAllStringSubmatch(svg, -1)
	var axis []string
	for _, l := range labels {
		axis = append(axis, l[1])
	}
	if got := strings.Join(axis, " "); got != "0 2 4 6 8 10" {
		t.Errorf("axis labels: got %q, want %q", got, "0 2 4 6 8 10")
	}
	line := regexp.MustCompile(`<polyline class="line s-(\w+)" data-series="\w+" stroke-width="([\d.]+)" vector-effect="non-scaling-stroke" fill="none" points="([^"]*)"/>`)
	var widths []string
	points := map[string]string{}
	for _, m := range line.FindAllStringSubmatch(svg, -1) {
		widths = append(widths, m[1]+"="+m[2])
		points[m[1]] = m[3]
	}
	if got := strings.Join(widths, " "); got != "sent=7 delivered=4 received=2.5 failed=1.5" {
		t.Errorf("lines in drawing order with their widths: got %q, want each narrower than the one under it", got)
	}
	if points["sent"] == "" || points["sent"] != points["delivered"] {
		t.Errorf("sent and delivered should be drawn on the same points here: %q vs %q", points["sent"], points["delivered"])
	}
}
