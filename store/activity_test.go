package store

import (
	"testing"
	"time"
)

// TestActivityIsolatesNames: a device name that ends in a right-to-left
// override (or is written right to left) stays inside its isolate in an
// activity line, and an ordinary name is written as it is.
func TestActivityIsolatesNames(t *testing.T) {
	at := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	m := Message{Phone: "+15550100999"}
	for _, c := range []struct{ device, want string }{
		{"Pixel", "SMS to +1555… sent via Pixel"},
		{"Evil\u202e", "SMS to +1555… sent via \u2068Evil\u202e\u2069"},
		{"هاتف", "SMS to +1555… sent via \u2068هاتف\u2069"},
	} {
		a, ok := MessageActivity(m, MsgSent, c.device, at)
		if !ok || a.Description != c.want {
			t.Errorf("device %q: got %q, want %q", c.device, a.Description, c.want)
		}
	}
}
