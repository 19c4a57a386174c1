package androidproto

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCutBytes(t *testing.T) {
	euros := "a" + strings.Repeat("€", 100) // 1 + 3*100 bytes
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 200, "short"},
		{"exactly", 7, "exactly"},
		{"abcdef", 3, "abc"},
		{euros, 128, euros[:127]}, // byte 128 is inside a euro sign: back to its start
		{euros, 130, euros[:130]}, // a cut between two euro signs stays
		{strings.Repeat("a", 199) + "é", 200, strings.Repeat("a", 199)},
		{"\x80\x80\x80\x80\x80\x80", 4, "\x80"}, // not UTF-8: cut after at most three steps
	} {
		got := CutBytes(c.in, c.n)
		if got != c.want {
			t.Errorf("CutBytes(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
		if utf8.ValidString(c.in) && !utf8.ValidString(got) {
			t.Errorf("CutBytes(%q, %d) = %q is not UTF-8", c.in, c.n, got)
		}
	}
}
