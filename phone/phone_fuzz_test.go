package phone

import (
	"regexp"
	"testing"
)

var e164 = regexp.MustCompile(`^\+[1-9][0-9]{7,14}$`)

// FuzzNormalize reads numbers as a phone reports them (a SIM's number, a
// sender) and as a client sends them: what Normalize and NormalizeSender
// take is E.164, which reads again as itself; a sender that is no number
// comes back empty, for the caller to keep as given.
func FuzzNormalize(f *testing.F) {
	for _, s := range []string{"+15551234567", " +1 (555) 123-4567 ", "+44.20.7946.0958", "+1234567", "+1234567890123456",
		"15551234567", "+1555abc4567", "+0123456789", "", "+", "72345", "BANK", "+١٢٣٤٥٦٧٨٩", "\u00a0+15551234567"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if n, err := Normalize(s); err == nil {
			if !e164.MatchString(n) {
				t.Fatalf("Normalize(%q) = %q, not E.164", s, n)
			}
			if again, err := Normalize(n); err != nil || again != n {
				t.Fatalf("Normalize(%q) = %q, which normalises to %q, %v", s, n, again, err)
			}
		} else if n != "" {
			t.Fatalf("Normalize(%q) = %q with error %v", s, n, err)
		}
		n, ok := NormalizeSender(s)
		switch {
		case ok && !e164.MatchString(n):
			t.Fatalf("NormalizeSender(%q) = %q, not E.164", s, n)
		case !ok && n != "":
			t.Fatalf("NormalizeSender(%q) = %q, not ok", s, n)
		}
		if want, err := Normalize(s); err == nil && n != want {
			t.Fatalf("NormalizeSender(%q) = %q, Normalize takes it as %q", s, n, want)
		}
	})
}
