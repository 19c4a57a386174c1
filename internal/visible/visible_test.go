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

func TestTrim(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{" a ", "a"},
		{"\u200bSTOP\ufeff", "STOP"},
		{"\u2060\u00a0\u200e stop \u200f\u200d", "stop"},
		{"a\u200bb", "a\u200bb"},
		{"\u200b \ufeff", ""},
		{"❤\ufe0f", "❤"},
	} {
		if got := Trim(tc.in); got != tc.want {
			t.Errorf("Trim(%+q) = %+q, want %+q", tc.in, got, tc.want)
		}
	}
}
