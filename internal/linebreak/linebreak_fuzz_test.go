package linebreak

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzReplace mends what a phone reports about itself (a carrier, an
// operator, an app version): the result holds no rune Is reports, is never
// longer than the text (a byte bound checked before still holds), and
// differs from it only where Is reported a rune, each now one space.
func FuzzReplace(f *testing.F) {
	for _, s := range []string{"Pixel 7", "Café Zürich", "", "a\nb", "a\r\nb", "a\x00b\x1bc\x7fd", "a\u0085b",
		"a\u2028b\u2029c", "\u0645\u06cc\u200c\u062e", "\U0001F469\u200d\U0001F4BB", "a\u00a0b", "\n\xff", "\xc2\x85\xc2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Replace(s)
		if len(got) > len(s) {
			t.Fatalf("Replace(%q) = %q grew the text", s, got)
		}
		if strings.ContainsFunc(got, Is) {
			t.Fatalf("Replace(%q) = %q holds a line break", s, got)
		}
		if Fault(got) != "" {
			t.Fatalf("Replace(%q) = %q is at fault: %s", s, got, Fault(got))
		}
		// Only the runes Is reports change, each to one space.
		var want strings.Builder
		for len(s) > 0 {
			r, size := utf8.DecodeRuneInString(s)
			if Is(r) {
				want.WriteByte(' ')
			} else {
				want.WriteString(s[:size])
			}
			s = s[size:]
		}
		if got != want.String() {
			t.Fatalf("Replace = %q, want %q", got, want.String())
		}
	})
}
