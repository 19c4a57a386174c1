package numplan

import (
	"regexp"
	"testing"
)

// e164 is what every number Normalize, Sender and Reported accept comes out
// as: + and 8 to 15 digits, the first not 0.
var e164 = regexp.MustCompile(`^\+[1-9][0-9]{7,14}$`)

// FuzzNormalize reads numbers as strangers write them (an API send, a
// mail's recipient, a phone's report) in a region a company may set.
func FuzzNormalize(f *testing.F) {
	for _, c := range [][2]string{
		{"07400 123456", "GB"}, {"(020) 7946-0958", "GB"}, {"0044 7400 123456", "GB"}, {"+44 7400 123456", "GB"},
		{"+1 (415) 555-0100", "GB"}, {"07700 900123", "GB"}, {"(415) 555-0100", "US"}, {"07400 123456", ""},
		{"+15551234567", ""}, {"07700 9001", "GB"}, {"07700 9001234567", "GB"}, {"7946 0958", "GB"},
		{"07700 ABC123", "GB"}, {"", "GB"}, {"447400123456", "GB"}, {"72345", "GB"}, {"BANK", "GB"},
		{" gb ", "gb"}, {"+0123456789", ""}, {"0039 06 1234 5678", "IT"}, {"06 1234 5678", "it"}, {"1", "XX"},
	} {
		f.Add(c[0], c[1])
	}
	f.Fuzz(func(t *testing.T, s, raw string) {
		_, _ = Normalize(s, raw) // a region never checked must not panic either
		region, err := CheckRegion(raw)
		if err != nil {
			return
		}
		if again, err := CheckRegion(region); err != nil || again != region {
			t.Errorf("CheckRegion(%q) = %q; CheckRegion of that = %q, %v", raw, region, again, err)
		}
		if n, err := Normalize(s, region); err == nil {
			if !e164.MatchString(n) {
				t.Errorf("Normalize(%q, %q) = %q: not E.164", s, region, n)
			}
			for _, r := range []string{region, ""} {
				if again, err := Normalize(n, r); err != nil || again != n {
					t.Errorf("Normalize(%q, %q) = %q; Normalize of that in %q = %q, %v", s, region, n, r, again, err)
				}
			}
			_, _ = Type(n), Display(n)
		}
		if n, ok := Sender(s, region); ok && !e164.MatchString(n) {
			t.Errorf("Sender(%q, %q) = %q: not E.164", s, region, n)
		}
		if n, err := Reported(s, region); err == nil && !e164.MatchString(n) {
			t.Errorf("Reported(%q, %q) = %q: not E.164", s, region, n)
		}
	})
}
