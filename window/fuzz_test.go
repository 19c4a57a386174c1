package window

import (
	"testing"
	"time"

	"github.com/simrelay/simrelay/problem"
)

// askedFrom and askedSpan bound the asked times: 2000 to 2050, years whose
// rules the zone database writes down (past 2037 it repeats the last rule).
var askedFrom = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

const askedSpan = int64(50 * 365 * 24 * 3600)

// FuzzWindow checks a window as a client sends it: Validate never panics,
// and a window it accepts opens, for any asked time, at that time or after
// it, on one of its days and within its hours by the zone's clock.
func FuzzWindow(f *testing.F) {
	berlin := time.Date(2026, 3, 29, 0, 30, 0, 0, time.UTC) // 01:30 in Berlin, before spring forward
	for _, c := range []struct {
		days     uint8
		from, to string
		zone     string
		at       time.Time
	}{
		{0b0111110, "09:00", "17:30", "Europe/Berlin", time.Date(2026, 11, 25, 7, 59, 0, 0, time.UTC)},
		{0b0001000, "10:00", "11:00", "Europe/Berlin", time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)},
		{0, "00:00", "24:00", "Europe/Berlin", time.Date(2026, 11, 28, 22, 59, 0, 0, time.UTC)},
		{0, "02:30", "04:00", "Europe/Berlin", berlin},
		{0, "09:00", "24:00", "UTC", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)},
		// Apia skipped Friday 30 December 2011 (its clock went from
		// Thursday to Saturday): the window was taken as always open.
		{0b0100000, "09:00", "17:00", "Pacific/Apia", time.Date(2011, 12, 24, 10, 0, 0, 0, time.UTC)},
		// West of Greenwich time.Date puts a time the clock skips before
		// the gap: these opened an hour early, the first the evening before.
		{0, "00:00", "00:30", "America/Santiago", time.Date(2026, 9, 6, 3, 0, 0, 0, time.UTC)},
		{0b1000000, "08:00", "24:00", "America/Havana", time.Date(2026, 3, 8, 4, 10, 0, 0, time.UTC)},
		{0, "02:30", "04:00", "America/New_York", time.Date(2026, 3, 8, 6, 0, 0, 0, time.UTC)},
		{0, "01:00", "02:30", "America/New_York", time.Date(2026, 3, 8, 7, 10, 0, 0, time.UTC)},
		{0, "09:00", "17:00", "Mars/Olympus", askedFrom},
		{0, "9:00", "17:00", "UTC", askedFrom},
	} {
		f.Add(c.days, c.from, c.to, c.zone, c.at.Unix()-askedFrom.Unix())
	}
	f.Fuzz(func(t *testing.T, days uint8, from, to, zone string, at int64) {
		w := Window{From: from, To: to, TimeZone: zone}
		for i, d := range dayNames {
			if days&(1<<i) != 0 {
				w.Days = append(w.Days, d)
			}
		}
		if days&0x80 != 0 && len(w.Days) > 0 {
			w.Days = append(w.Days, w.Days[0]) // a day twice
		}
		asked := askedFrom.Add(time.Duration(((at%askedSpan)+askedSpan)%askedSpan) * time.Second)
		if days&0x80 != 0 && len(w.Days) > 1 {
			// A day named twice counts once.
			once := Window{Days: w.Days[:len(w.Days)-1], From: from, To: to, TimeZone: zone}
			if got, want := w.Next(asked), once.Next(asked); !got.Equal(want) {
				t.Errorf("%+v: Next(%s) = %s, and %s with each day once", w, asked, got, want)
			}
			w = once
		}
		if err := w.Validate("window"); err != nil {
			// A name of the host's zoneinfo may keep the hours of a window
			// stored before the list (storedLocation); "" and "Local"
			// were never taken, and are no zone.
			if pe, _ := problem.As(err); pe != nil && pe.Field == "window.time_zone" && zone != "" && zone != "Local" {
				return
			}
			if got := w.Next(asked); !got.Equal(asked) {
				t.Errorf("%+v refused (%v): Next(%s) = %s, want the asked time", w, err, asked, got)
			}
			return
		}
		loc, err := location(zone)
		if err != nil {
			t.Fatalf("%+v: accepted, and its zone does not load: %v", w, err)
		}
		got := w.Next(asked)
		if got.Before(asked) {
			t.Fatalf("%+v: Next(%s) = %s, before the asked time", w, asked, got)
		}
		if !inside(w, got.In(loc)) && !inside(w, shifted(got, loc)) {
			t.Errorf("%+v: Next(%s) = %s, outside the window", w, asked, got.In(loc))
		}
	})
}

// inside reports whether the clock reading c of an instant is on one of w's
// days and within its hours.
func inside(w Window, c time.Time) bool {
	lo, _ := minutes(w.From, false)
	hi, _ := minutes(w.To, true)
	m := c.Hour()*60 + c.Minute()
	day := len(w.Days) == 0
	for _, d := range w.Days {
		day = day || d == dayNames[c.Weekday()]
	}
	return day && m >= lo && m < hi
}

// shifted reads t by the offset loc had a day before. Hours that a
// spring-forward skips come an hour later (docs/routing.md): a window
// from 02:30 in Berlin opens at 03:30 that day, 02:30 by the clock
// before the change.
func shifted(t time.Time, loc *time.Location) time.Time {
	_, off := t.Add(-24 * time.Hour).In(loc).Zone()
	return t.In(time.FixedZone("before", off))
}
