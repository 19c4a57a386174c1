package linebreak

import "testing"

func TestSentBack(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		sent, stored string
		want         bool
	}{
		{"Old\tname", "Old\tname", true},
		{"Old\tname", " Old\tname ", true}, // trimmed by the browser or the form
		{" Old\tname\n", "Old\tname", true},
		{"", "", true},
		{"Old\tname!", "Old\tname", false},
		{"Old name", "Old\tname", false},
		{"old\tname", "Old\tname", false}, // case is a change
		{"Old\u200ename", "Oldname", false},
	} {
		if got := SentBack(c.sent, c.stored); got != c.want {
			t.Errorf("SentBack(%q, %q) = %v, want %v", c.sent, c.stored, got, c.want)
		}
	}
}
