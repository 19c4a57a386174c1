package smsparts

import (
	"strings"
	"testing"
)

func TestCount(t *testing.T) {
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
		// A character is not split between parts: one that would straddle
		// a part's end starts the next.
		{"extension at a part's end", strings.Repeat("a", 152) + "€" + strings.Repeat("a", 152), 3},
		{"extension fills a part", strings.Repeat("a", 151) + "€" + strings.Repeat("a", 153), 2},
		{"extension only", strings.Repeat("€", 153), 3},
		{"emoji at a part's end", strings.Repeat("ж", 66) + "😀" + strings.Repeat("ж", 66), 3},
		{"emoji fills a part", strings.Repeat("ж", 65) + "😀" + strings.Repeat("ж", 67), 2},
		{"emoji only", strings.Repeat("😀", 67), 3},
		{"emoji in one part", strings.Repeat("ж", 69) + "😀", 2},
		{"80 brackets", strings.Repeat("[", 80), 1},
		{"81 brackets", strings.Repeat("[", 81), 2},
		{"GSM letters with accents", strings.Repeat("é", 160), 1},
		{"NULs are no GSM-7", string(make([]byte, 160)), 3},
	}
	for _, c := range cases {
		if got := Count(c.text); got != c.want {
			t.Errorf("%s: got %d segments, want %d", c.name, got, c.want)
		}
	}
}
