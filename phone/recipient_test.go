package phone

import "testing"

func TestRecipientFault(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want bool // a fault
	}{
		{"+15551234567", false},
		{"ana-maria@example.com", false},
		{" bob@example.com ", false},
		{"b\u00fccher@example.com", false},
		{"-e@example.com", true},
		{"  -ljavascript@x.co", true},
		{"bob@example.com\n", true},
		{"bob\x00@example.com", true},
		{"bob\u202e@example.com", true},
		{"\ufeff-e@example.com", true},
		{"bob@exa\u200bmple.com", true},
		{"bob@example.com\u2028", true},
		{"bob\u2029@example.com", true},
	} {
		if got := RecipientFault(tc.in) != ""; got != tc.want {
			t.Errorf("RecipientFault(%q) = %q, want a fault: %v", tc.in, RecipientFault(tc.in), tc.want)
		}
	}
}
