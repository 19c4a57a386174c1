package sms

import (
	"strings"
	"testing"
)

func TestSegments(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		text string
		want int
	}{
		{"empty", "", 1},
		{"short GSM", "hello", 1},
		{"160 GSM", strings.Repeat("a", 160), 1},
		{"161 GSM", strings.Repeat("a", 161), 2},
		{"306 GSM", strings.Repeat("a", 306), 2},
		{"307 GSM", strings.Repeat("a", 307), 3},
		{"extension counts two", strings.Repeat("€", 80), 1},
		{"extension over", strings.Repeat("€", 80) + "a", 2},
		{"not GSM", "Ça coûte 5€", 1}, // û is outside GSM-7: UCS-2
		{"70 UCS-2", strings.Repeat("ж", 70), 1},
		{"71 UCS-2", strings.Repeat("ж", 71), 2},
		{"134 UCS-2", strings.Repeat("ж", 134), 2},
		{"135 UCS-2", strings.Repeat("ж", 135), 3},
		{"emoji is two units", strings.Repeat("😀", 35), 1},
		{"emoji over", strings.Repeat("😀", 36), 2},
	}
	for _, c := range cases {
		if got := Segments(c.text); got != c.want {
			t.Errorf("%s: got %d segments, want %d", c.name, got, c.want)
		}
	}
}
