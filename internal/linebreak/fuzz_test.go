package linebreak

import (
	"strings"
	"testing"
)

// FuzzReplace checks Replace's promise on any text a phone or an agent
// could report: nothing Is reports is left, the text never grows, and
// Fault finds a fault exactly where Replace changes something.
func FuzzReplace(f *testing.F) {
	for _, s := range []string{"Pixel 7", "Café Zürich", "", "a\r\nb", "a\tb", "a\x00b\x1bc\x7fd", "a\u0085b",
		"a\u009fb", "a\u2028b\u2029c", "\u0645\u06cc\u200c\u062e", "\U0001F469\u200d\U0001F4BB", "a\u200fb\u2068c\u2069\u202e", "a\u00a0b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Replace(s)
		if len(got) > len(s) {
			t.Errorf("Replace(%q) = %q: longer", s, got)
		}
		if strings.ContainsFunc(got, Is) {
			t.Errorf("Replace(%q) = %q: a line break left", s, got)
		}
		if (Fault(s) != "") != (got != s) {
			t.Errorf("Replace(%q) = %q, and Fault says %q", s, got, Fault(s))
		}
		if Replace(got) != got {
			t.Errorf("Replace(%q) = %q, and Replace of that differs", s, got)
		}
	})
}
