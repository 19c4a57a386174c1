package store

import "testing"

// TestKeywordOf: the whole text is the keyword, trimmed of white space and of
// the invisible characters a keyboard or a phone puts around a word (a
// zero-width space, a byte order mark, a word joiner, a direction mark), its
// ASCII letters in any case.
func TestKeywordOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		text        string
		stop, start bool
	}{
		{"STOP", true, false},
		{"  stop \n", true, false},
		{"\u200bSTOP", true, false},
		{"\ufeffstop", true, false},
		{"Stop\u200b", true, false},
		{"\u2060\u00a0QUIT\u200d\u200e", true, false},
		{"\u200fUnsubscribe\ufe0f", true, false},
		{"\u200bSTART\ufeff", false, true},
		{"ST\u200bOP", false, false},
		{"please stop", false, false},
		{"ſtop", false, false},
		{"\u200b", false, false},
		{"", false, false},
	} {
		stop, start := KeywordOf(tc.text)
		if stop != tc.stop || start != tc.start {
			t.Errorf("KeywordOf(%+q) = %v, %v, want %v, %v", tc.text, stop, start, tc.stop, tc.start)
		}
	}
}
