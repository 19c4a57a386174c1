package androidproto

import (
	"strings"
	"testing"
	"unicode/utf8"
	"unsafe"
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

// A cut text is a copy: kept (a status error stored, an id repeated in an
// error frame, a report's answer waiting for its commit), it holds no
// reference to the whole text it was cut from, up to a frame's 64 KiB.
func TestCutBytesKeepsNoReferenceToTheText(t *testing.T) {
	long := strings.Repeat("x", 64<<10)
	if got := CutBytes(long, MaxEchoBytes); unsafe.StringData(got) == unsafe.StringData(long) {
		t.Fatal("the cut text shares the long text's bytes, which it keeps alive")
	}
	short := "short"
	if got := CutBytes(short, MaxEchoBytes); unsafe.StringData(got) != unsafe.StringData(short) {
		t.Fatal("a text that needs no cut was copied")
	}
}
