package sms_test

import (
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/sms"
)

// FuzzParseTime reads times as a phone's status.at and received_at give
// them: never a panic, and a time ParseTime takes is stored and shown in
// UTC with milliseconds, a form ParseTime (and every RFC 3339 reader) takes
// again, as the same instant to the millisecond; written with the
// lower-case "t" and "z" it reads the same.
func FuzzParseTime(f *testing.F) {
	for _, s := range []string{
		"2026-12-01T09:00:00Z", "2026-12-01t09:00:00z", "2026-12-01t09:00:00.000z", "2026-12-01t10:00:00+01:00",
		"2026-12-01 09:00:00Z", "2026-12-01t09:00:00", "2026-12-01t09:00:00zz", "2026-12-01", "z", "",
		"2026-11-22T10:04:05.123456789+05:30", "0000-01-01T00:00:00Z", "9999-12-31T23:59:59.999Z",
	} {
		f.Add(s)
	}
	const layout = "2006-01-02T15:04:05.000Z" // as the server stores a phone's time
	f.Fuzz(func(t *testing.T, v string) {
		at, err := sms.ParseTime(v)
		if err != nil {
			return
		}
		shown := at.UTC().Format(layout)
		again, err := sms.ParseTime(shown)
		if err != nil {
			t.Fatalf("ParseTime(%q) = %v, shown as %q, which does not read: %v", v, at, shown, err)
		}
		if want := at.UTC().Truncate(time.Millisecond); !again.Equal(want) {
			t.Fatalf("ParseTime(%q) = %v, shown as %q, reads as %v", v, at, shown, again)
		}
		lower := []byte(at.Format(time.RFC3339Nano))
		lower[10] = 't'
		if s := string(lower); strings.HasSuffix(s, "Z") {
			lower[len(lower)-1] = 'z'
		}
		if back, err := sms.ParseTime(string(lower)); err != nil || !back.Equal(at) {
			t.Fatalf("ParseTime(%q) = %v; in lower case %q reads as %v, %v", v, at, lower, back, err)
		}
	})
}
