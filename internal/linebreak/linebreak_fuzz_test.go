package linebreak

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzReplace mends what a phone reports about itself (a carrier, an
// operator, an app version): the result holds no rune Is reports, is never
// longer than the text (a byte bound checked before still holds), differs
// from it only where Is reported a rune, each now one space, and so
// exactly where Fault finds a fault; mending again changes nothing.
func FuzzReplace(f *testing.F) {
	for _, s := range []string{"Pixel 7", "Café Zürich", "", "a\nb", "a\r\nb", "a\tb", "a\x00b\x1bc\x7fd", "a\u0085b", "a\u009fb",
		"a\u2028b\u2029c", "\u0645\u06cc\u200c\u062e", "\U0001F469\u200d\U0001F4BB", "a\u200fb\u2068c\u2069\u202e", "a\u00a0b",
		"\n\xff", "\xc2\x85\xc2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Replace(s)
		if len(got) > len(s) {
			t.Fatalf("Replace(%q) = %q grew the text", s, got)
		}
		if strings.ContainsFunc(got, Is) || Fault(got) != "" {
			t.Fatalf("Replace(%q) = %q holds a line break", s, got)
		}
		if (Fault(s) != "") != (got != s) {
			t.Fatalf("Replace(%q) = %q, and Fault says %q", s, got, Fault(s))
		}
		if Replace(got) != got {
			t.Fatalf("Replace(%q) = %q, and Replace of that differs", s, got)
		}
		// Only the runes Is reports change, each to one space.
		var want strings.Builder
		for rest := s; len(rest) > 0; {
			r, size := utf8.DecodeRuneInString(rest)
			if Is(r) {
				want.WriteByte(' ')
			} else {
				want.WriteString(rest[:size])
			}
			rest = rest[size:]
		}
		if got != want.String() {
			t.Fatalf("Replace(%q) = %q, want %q", s, got, want.String())
		}
	})
}
