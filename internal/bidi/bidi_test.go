package bidi

import "testing"

func TestIsolate(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"Pixel 7", "Pixel 7"},
		{"Café Zürich", "Café Zürich"},
		{"", ""},
		{"Evil\u202e", FSI + "Evil\u202e" + PDI},
		{"هاتف", FSI + "هاتف" + PDI},
		{"טלפון 2", FSI + "טלפון 2" + PDI},
		{"a\u200fb", FSI + "a\u200fb" + PDI}, // a right-to-left mark
		{"a\u2067b", FSI + "a\u2067b" + PDI},
	} {
		if got := Isolate(c.in); got != c.want {
			t.Errorf("Isolate(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestStripControls(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"Pixel 7", "Pixel 7"},
		{"Evil\u202e 1", "Evil 1"},
		{"\u202a\u202b\u202c\u202d\u202ex\u2066\u2067\u2068\u2069", "x"},
		{"a\u200e\u200fb", "a\u200e\u200fb"}, // marks stay
		{"هاتف", "هاتف"},
	} {
		if got := StripControls(c.in); got != c.want {
			t.Errorf("StripControls(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
