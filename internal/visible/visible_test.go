package visible

import "testing"

func TestNone(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", " ", "\t\n\r", "\u200b", "\u200b \ufeff", "\u00a0\u3000", "\u2060\u200c\u200d",
		"\u3164", "\u2800", "\ufe0f", "\u202e", "\x00", "\u180e"} {
		if !None(s) {
			t.Errorf("None(%+q) = false, want true", s)
		}
	}
	for _, s := range []string{"a", " a ", "😀", "\u200bx", "❤\ufe0f", "می\u200cخواهم", ".", "\u0301", "\ufffd"} {
		if None(s) {
			t.Errorf("None(%+q) = true, want false", s)
		}
	}
}
