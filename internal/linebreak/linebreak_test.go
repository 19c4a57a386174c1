package linebreak

import "testing"

func TestIsAndReplace(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in, replaced string
	}{
		{"Pixel 7", "Pixel 7"},
		{"Café Zürich", "Café Zürich"},
		{"", ""},
		{"a\nb", "a b"},
		{"a\r\nb", "a  b"},
		{"a\tb", "a b"},
		{"a\x00b\x1bc\x7fd", "a b c d"},
		{"a\u0085b", "a b"}, // NEL
		{"a\u009fb", "a b"}, // the last C1 control
		{"a\u2028b\u2029c", "a b c"},
		{"\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645", "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645"}, // ZWNJ in Persian stays
		{"\U0001F469\u200d\U0001F4BB", "\U0001F469\u200d\U0001F4BB"},                                             // ZWJ in an emoji stays
		{"a\u200fb\u2068c\u2069\u202e", "a\u200fb\u2068c\u2069\u202e"},                                           // direction is the display's business
		{"a\u00a0b", "a\u00a0b"}, // a no-break space is a space
	} {
		if got := Replace(c.in); got != c.replaced {
			t.Errorf("Replace(%q) = %q, want %q", c.in, got, c.replaced)
		}
		if len(Replace(c.in)) > len(c.in) {
			t.Errorf("Replace(%q) grew the text", c.in)
		}
		fault := Fault(c.in) != ""
		if want := c.in != c.replaced; fault != want {
			t.Errorf("Fault(%q) = %q, want a fault: %v", c.in, Fault(c.in), want)
		}
	}
}
