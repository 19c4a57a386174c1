package phone

import "testing"

func TestNormalize(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in, want string
		ok       bool
	}{
		{"+15551234567", "+15551234567", true},
		{" +1 (555) 123-4567 ", "+15551234567", true},
		{"+44.20.7946.0958", "+442079460958", true},
		{"+1234567", "", false},          // 7 digits
		{"+1234567890123456", "", false}, // 16 digits
		{"15551234567", "", false},       // no +
		{"+1555abc4567", "", false},
		{"+0123456789", "", false}, // no country code starts with 0
		{"", "", false},
		{"+", "", false},
	}
	for _, c := range cases {
		got, err := Normalize(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("Normalize(%q) = %q, %v; want %q, ok=%v", c.in, got, err, c.want, c.ok)
		}
	}
}

func TestNormalizeSender(t *testing.T) {
	cases := []struct {
		in, want string
		ok       bool
	}{
		{"+15551234567", "+15551234567", true},
		{" +1 (555) 123-4567 ", "+15551234567", true},
		{"15551234567", "+15551234567", true}, // the + dropped by the phone
		{"12345678", "+12345678", true},       // 8 digits
		{"1234567", "", false},                // 7 digits: a short code, not a number
		{"72345", "", false},                  // short code
		{"1234567890123456", "", false},       // 16 digits
		{"0123456789", "", false},             // no country code starts with 0
		{"1 555 123 4567", "", false},         // without +, digits only
		{"BANK", "", false},
		{"", "", false},
	}
	for _, c := range cases {
		got, ok := NormalizeSender(c.in)
		if ok != c.ok || got != c.want {
			t.Errorf("NormalizeSender(%q) = %q, %v; want %q, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}
