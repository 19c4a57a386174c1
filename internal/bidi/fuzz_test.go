package bidi

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzIsolate checks Isolate and StripControls on any name a user or a
// stranger could give.
func FuzzIsolate(f *testing.F) {
	for _, s := range []string{"Pixel 7", "Café Zürich", "", "Evil\u202e", "هاتف", "טלפון 2", "a\u200fb", "a\u2067b",
		"\u202a\u202b\u202c\u202d\u202ex\u2066\u2067\u2068\u2069", "a\u200e\u200fb"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Isolate(s)
		if want := FSI + s + PDI; Reorders(s) && got != want || !Reorders(s) && got != s {
			t.Errorf("Isolate(%q) = %q (Reorders: %v)", s, got, Reorders(s))
		}
		// StripControls removes the controls and keeps every other byte.
		var want strings.Builder
		for rest := s; rest != ""; {
			r, n := utf8.DecodeRuneInString(rest)
			if !isControl(r) {
				want.WriteString(rest[:n])
			}
			rest = rest[n:]
		}
		if got := StripControls(s); got != want.String() {
			t.Errorf("StripControls(%q) = %q, want %q", s, got, want.String())
		}
	})
}
