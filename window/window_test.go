package window

import (
	"testing"
	"time"

	"github.com/simrelay/simrelay/problem"
)

func TestValidateNamesTheField(t *testing.T) {
	t.Parallel()
	ok := Window{Days: []string{"mon", "fri"}, From: "09:00", To: "24:00", TimeZone: "Europe/Berlin"}
	if err := ok.Validate("window"); err != nil {
		t.Fatalf("a good window: got %v, want nil", err)
	}
	for _, c := range []struct {
		w     Window
		field string
	}{
		{Window{Days: []string{"monday"}, From: "09:00", To: "17:00", TimeZone: "UTC"}, "window.days[0]"},
		{Window{Days: []string{"mon", "mon"}, From: "09:00", To: "17:00", TimeZone: "UTC"}, "window.days[1]"},
		{Window{From: "9:00", To: "17:00", TimeZone: "UTC"}, "window.from"},
		{Window{From: "24:00", To: "24:00", TimeZone: "UTC"}, "window.from"},
		{Window{From: "09:60", To: "17:00", TimeZone: "UTC"}, "window.from"},
		{Window{From: "09:00", To: "24:01", TimeZone: "UTC"}, "window.to"},
		{Window{From: "09:00", To: "", TimeZone: "UTC"}, "window.to"},
		{Window{From: "17:00", To: "09:00", TimeZone: "UTC"}, "window.to"},
		{Window{From: "09:00", To: "17:00"}, "window.time_zone"},
		{Window{From: "09:00", To: "17:00", TimeZone: "Local"}, "window.time_zone"},
		{Window{From: "09:00", To: "17:00", TimeZone: "Mars/Olympus"}, "window.time_zone"},
		{Window{From: "09:00", To: "17:00", TimeZone: "/etc/passwd"}, "window.time_zone"},
	} {
		err := c.w.Validate("window")
		pe, isProblem := problem.As(err)
		if !isProblem || pe.Field != c.field || pe.Code != problem.ValidationFailed {
			t.Errorf("%+v: got %v, want validation_failed on %s", c.w, err, c.field)
		}
	}
}

func TestNext(t *testing.T) {
	t.Parallel()
	berlin, _ := time.LoadLocation("Europe/Berlin")
	at := func(s string) time.Time {
		v, err := time.ParseInLocation("2006-01-02 15:04", s, berlin)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	weekdays := Window{Days: []string{"mon", "tue", "wed", "thu", "fri"}, From: "09:00", To: "17:30", TimeZone: "Europe/Berlin"}
	for _, c := range []struct {
		w        Window
		now, got string
	}{
		{weekdays, "2026-11-25 08:59", "2026-11-25 09:00"}, // a Wednesday, before the opening
		{weekdays, "2026-11-25 09:00", "2026-11-25 09:00"}, // open from From on
		{weekdays, "2026-11-25 17:29", "2026-11-25 17:29"},
		{weekdays, "2026-11-25 17:30", "2026-11-26 09:00"}, // closed at To
		{weekdays, "2026-11-27 18:00", "2026-11-30 09:00"}, // Friday evening: Monday
		{weekdays, "2026-11-28 12:00", "2026-11-30 09:00"}, // Saturday
		{Window{Days: []string{"wed"}, From: "10:00", To: "11:00", TimeZone: "Europe/Berlin"}, "2026-11-25 11:00", "2026-12-02 10:00"},
		{Window{From: "00:00", To: "24:00", TimeZone: "Europe/Berlin"}, "2026-11-28 23:59", "2026-11-28 23:59"},
		// Spring forward: 02:30 does not exist on 2026-03-29 in Berlin; the window opens past the gap.
		{Window{From: "02:30", To: "04:00", TimeZone: "Europe/Berlin"}, "2026-03-29 01:00", "2026-03-29 03:30"},
		// A window inside the hour skipped has no instant that day: the next day's opening, not 03:30 (past its end).
		{Window{From: "02:30", To: "03:00", TimeZone: "Europe/Berlin"}, "2026-03-29 01:00", "2026-03-30 02:30"},
		{Window{From: "02:15", To: "03:15", TimeZone: "Europe/Berlin"}, "2026-03-29 01:00", "2026-03-30 02:15"},
	} {
		got := c.w.Next(at(c.now))
		if !got.Equal(at(c.got)) {
			t.Errorf("%v at %s: got %s, want %s", c.w, c.now, got.In(berlin), c.got)
		}
		if open := c.w.Open(at(c.now)); open != (c.now == c.got) {
			t.Errorf("%v at %s: Open got %v", c.w, c.now, open)
		}
	}
	// The zone matters: 08:00 UTC is 09:00 in Berlin in winter.
	utc := time.Date(2026, 11, 25, 8, 0, 0, 0, time.UTC)
	if !weekdays.Open(utc) {
		t.Errorf("08:00 UTC on a Wednesday: got closed, want open (09:00 in Berlin)")
	}
}

// TestNextFallBack: in the hour a fall-back repeats, the clock reads each
// time twice, and a window is open at each of the two instants whose time
// is inside its hours, and at no other: east and west of Greenwich alike.
// time.Date picks one of the two instants by itself, the later east of
// Greenwich and the earlier west of it: in New York a window to 01:30
// held the repeated hour's messages until the next day and one from 01:30
// was open at 01:15 after the change; in Berlin a window to 02:30 was open
// at 02:45 before the change and one from 02:30 was closed at 02:45.
func TestNextFallBack(t *testing.T) {
	t.Parallel()
	utc := func(mo time.Month, d, h, mi int) time.Time { return time.Date(2026, mo, d, h, mi, 0, 0, time.UTC) }
	toNY := Window{From: "00:00", To: "01:30", TimeZone: "America/New_York"}
	fromNY := Window{From: "01:30", To: "09:00", TimeZone: "America/New_York"}
	toBerlin := Window{From: "00:00", To: "02:30", TimeZone: "Europe/Berlin"}
	fromBerlin := Window{From: "02:30", To: "09:00", TimeZone: "Europe/Berlin"}
	for _, c := range []struct {
		name     string
		w        Window
		now, got time.Time
	}{
		// New York, 2026-11-01: at 06:00 UTC, 02:00 EDT is 01:00 EST.
		{"01:15 EDT", toNY, utc(11, 1, 5, 15), utc(11, 1, 5, 15)},
		{"01:45 EDT", toNY, utc(11, 1, 5, 45), utc(11, 1, 6, 0)}, // open again at the change (01:00 EST)
		{"01:15 EST", toNY, utc(11, 1, 6, 15), utc(11, 1, 6, 15)},
		{"01:30 EST", toNY, utc(11, 1, 6, 30), utc(11, 2, 5, 0)}, // the next midnight (EST)
		{"01:00 EDT", fromNY, utc(11, 1, 5, 0), utc(11, 1, 5, 30)},
		{"01:45 EDT", fromNY, utc(11, 1, 5, 45), utc(11, 1, 5, 45)},
		{"01:15 EST", fromNY, utc(11, 1, 6, 15), utc(11, 1, 6, 30)}, // the second 01:30
		{"02:00 EST", fromNY, utc(11, 1, 7, 0), utc(11, 1, 7, 0)},
		// Berlin, 2026-10-25: at 01:00 UTC, 03:00 CEST is 02:00 CET.
		{"02:15 CEST", toBerlin, utc(10, 25, 0, 15), utc(10, 25, 0, 15)},
		{"02:45 CEST", toBerlin, utc(10, 25, 0, 45), utc(10, 25, 1, 0)},
		{"02:15 CET", toBerlin, utc(10, 25, 1, 15), utc(10, 25, 1, 15)},
		{"02:30 CET", toBerlin, utc(10, 25, 1, 30), utc(10, 25, 23, 0)}, // the next midnight (CET)
		{"02:00 CEST", fromBerlin, utc(10, 25, 0, 0), utc(10, 25, 0, 30)},
		{"02:45 CEST", fromBerlin, utc(10, 25, 0, 45), utc(10, 25, 0, 45)},
		{"02:15 CET", fromBerlin, utc(10, 25, 1, 15), utc(10, 25, 1, 30)}, // the second 02:30
	} {
		if got := c.w.Next(c.now); !got.Equal(c.got) {
			t.Errorf("%v at %s (%s): got %s, want %s", c.w, c.name, c.now, got.UTC(), c.got)
		}
	}
}
