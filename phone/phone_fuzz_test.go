package phone

import (
	"regexp"
	"strings"
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

// FuzzNormalizeAsBuilt holds Normalize, which answers a number written as
// it is stored with itself, to the number it builds for every other: the
// same answer and the same refusal for whatever it is given.
func FuzzNormalizeAsBuilt(f *testing.F) {
	for _, s := range []string{"+15551234567", "+1234567", "+12345678", "+123456789012345", "+1234567890123456", "+0123456789",
		"+", "", " +15551234567\t", "+1 555 123 4567", "+١٢٣٤٥٦٧٨٩", "15551234567", "++15551234567"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, gotErr := Normalize(s)
		want, wantErr := normalizeBuilt(s)
		if got != want || gotErr != wantErr {
			t.Fatalf("Normalize(%q) = %q, %v; want %q, %v", s, got, gotErr, want, wantErr)
		}
	})
}

// normalizeBuilt is Normalize building every number it answers.
func normalizeBuilt(s string) (string, error) {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, "+") {
		return "", ErrInvalid
	}
	var b strings.Builder
	b.WriteByte('+')
	for _, r := range s[1:] {
		switch {
		case r >= '0' && r <= '9':
			b.WriteRune(r)
		case r == ' ' || r == '-' || r == '.' || r == '(' || r == ')':
		default:
			return "", ErrInvalid
		}
	}
	out := b.String()
	if n := len(out) - 1; n < 8 || n > 15 || out[1] == '0' {
		return "", ErrInvalid
	}
	return out, nil
}
