package window

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	_ "time/tzdata" // zones do not depend on the host (doc.go)

	"github.com/simrelay/simrelay/problem"
)

// Window is when messages may go out: on Days (none listed means every
// day), from From up to To, both local "HH:MM" times in TimeZone; To is
// after From and may be "24:00", the end of the day. A window never spans
// midnight: the hours belong to the day they are on.
type Window struct {
	Days     []string `json:"days,omitempty"`
	From     string   `json:"from"`
	To       string   `json:"to"`
	TimeZone string   `json:"time_zone"`
}

// dayNames are the accepted names of Days, in time.Weekday order.
var dayNames = []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}

// Validate checks w; its errors are 400s naming the field under at (the
// JSON path of the window, such as "window").
func (w Window) Validate(at string) error {
	if len(w.Days) > len(dayNames) {
		return problem.Invalid(at+".days", "must list each day at most once")
	}
	seen := map[string]bool{}
	for i, d := range w.Days {
		field := fmt.Sprintf("%s.days[%d]", at, i)
		if !slices.Contains(dayNames, d) {
			return problem.Invalid(field, "must be one of mon, tue, wed, thu, fri, sat, sun")
		}
		if seen[d] {
			return problem.Invalid(field, "names a day twice")
		}
		seen[d] = true
	}
	from, ok := minutes(w.From, false)
	if !ok {
		return problem.Invalid(at+".from", "must be a local time HH:MM from 00:00 to 23:59")
	}
	to, ok := minutes(w.To, true)
	if !ok {
		return problem.Invalid(at+".to", "must be a local time HH:MM from 00:01 to 24:00")
	}
	if to <= from {
		return problem.Invalid(at+".to", "must be after from: a window does not span midnight")
	}
	switch {
	case w.TimeZone == "":
		return problem.Invalid(at+".time_zone", "is required, an IANA time zone such as Europe/Berlin or UTC")
	case w.TimeZone == "Local" || strings.HasPrefix(w.TimeZone, "/"):
		return problem.Invalid(at+".time_zone", "must be an IANA time zone such as Europe/Berlin or UTC")
	}
	if _, err := location(w.TimeZone); err != nil {
		return problem.Invalid(at+".time_zone", "is not a known IANA time zone, such as Europe/Berlin or UTC")
	}
	return nil
}

// minutes reads "HH:MM" as minutes into the day; end allows "24:00".
func minutes(s string, end bool) (int, bool) {
	if len(s) != 5 || s[2] != ':' {
		return 0, false
	}
	var h, m int
	for _, c := range s[:2] + s[3:] {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	h = int(s[0]-'0')*10 + int(s[1]-'0')
	m = int(s[3]-'0')*10 + int(s[4]-'0')
	switch {
	case m > 59:
		return 0, false
	case end && h == 24 && m == 0:
		return 24 * 60, true
	case h > 23:
		return 0, false
	}
	return h*60 + m, true
}

//go:generate go run genzones.go

// zoneSet holds the names of zoneNames (zones.go).
var zoneSet = sync.OnceValue(func() map[string]bool {
	set := map[string]bool{}
	for _, n := range zoneList() {
		set[n] = true
	}
	return set
})

func zoneList() []string { return strings.Fields(zoneNames) }

// locations caches loaded zones: a zone is read and parsed once per
// process, and only the names of zoneNames load, so the cache is bounded.
var locations sync.Map // name -> *time.Location

// location loads a zone of the embedded database by its name. The name is
// checked against that database's list first: time.LoadLocation reads the
// host's zoneinfo directory before the embedded copy, and that directory
// also answers to "./UTC", "America//New_York", "localtime" (the host's own
// zone), "posixrules" and "right/..." (leap-second clocks). Such a name,
// accepted on one host, would not load on a host without those files (a
// slim container, another node of a cluster), where a stored window that
// cannot load is taken as always open; and each spelling of a path would
// be one more cache entry. A window stored before this check is read with
// storedLocation.
func location(name string) (*time.Location, error) {
	if l, ok := locations.Load(name); ok {
		return l.(*time.Location), nil
	}
	if !zoneSet()[name] {
		return nil, fmt.Errorf("window: %q is not a zone of the embedded database", name)
	}
	l, err := time.LoadLocation(name)
	if err != nil {
		return nil, err
	}
	locations.Store(name, l)
	return l, nil
}

// storedLocations caches the zones of storedLocation, apart from locations:
// a name loaded here must still fail Validate.
var storedLocations sync.Map // name -> *time.Location, or the error loading it gave

// storedLocation loads a zone that is not a name of the embedded database
// the way Validate loaded it before it checked the list (zones.go): from
// the host's zoneinfo, which also answers to "localtime", "posix/..." or
// "America//New_York". A window stored then with such a name keeps its
// hours on the host that took it, where taken as always open it would send
// at any hour; a new window is held to the list. Only stored windows reach
// Next with such a name, so the cache holds the few names stored then;
// a name the host cannot load is remembered too, so that dispatch and the
// sweeps do not look for it on disk at every call.
func storedLocation(name string) (*time.Location, error) {
	if v, ok := storedLocations.Load(name); ok {
		if err, failed := v.(error); failed {
			return nil, err
		}
		return v.(*time.Location), nil
	}
	if name == "" || name == "Local" {
		// Never stored (Validate refused both from the first), and
		// time.LoadLocation reads them as UTC and the host's own zone: a
		// window refused for its zone would keep hours after all.
		return nil, fmt.Errorf("window: %q is no zone", name)
	}
	l, err := time.LoadLocation(name)
	if err != nil {
		storedLocations.Store(name, err)
		return nil, err
	}
	storedLocations.Store(name, l)
	return l, nil
}

// Next returns the earliest instant at or after t inside w: t itself when
// w is open at t. A window that fails Validate is taken as always open,
// since a stored message must never wait for a window that cannot open;
// only a day named twice is no such fault, and counts once.
func (w Window) Next(t time.Time) time.Time {
	loc, err := location(w.TimeZone)
	if err != nil {
		loc, err = storedLocation(w.TimeZone)
	}
	from, ok1 := minutes(w.From, false)
	to, ok2 := minutes(w.To, true)
	if err != nil || !ok1 || !ok2 || to <= from {
		return t
	}
	y, m, d := t.In(loc).Date()
	// Eight days: today's hours may be over, and the same weekday next
	// week is the last that can be the first open one.
	for i := range 8 {
		// The weekday of the date, not of its midnight in loc: where the
		// clock springs forward from midnight, time.Date may put that
		// midnight on the day before (clockAt), and Sunday was taken for
		// Saturday.
		day := time.Date(y, m, d+i, 0, 0, 0, 0, time.UTC)
		if len(w.Days) > 0 && !slices.Contains(w.Days, dayNames[day.Weekday()]) {
			continue
		}
		open, n := spans(y, m, d+i, from, to, loc)
		for _, span := range open[:n] {
			open, end := span[0], span[1]
			if !open.Before(end) {
				// Hours a spring-forward skips (02:30 to 03:00): the
				// opening comes past the gap, at or after the end, and the
				// window has no instant that day. Opening then released a
				// message that the window, closed, held again until the
				// next day.
				continue
			}
			if t.Before(end) {
				if t.Before(open) {
					return open.UTC()
				}
				return t
			}
		}
	}
	return t
}

// spans are the instants of the day y-m-d, in order, at which loc's clock
// reads from from up to to (minutes into the day): one span, or two on a
// day the clock is set back in between and reads inside the hours on both
// sides of the change. A time that the fall-back repeats is then inside
// the hours (or outside) each time the clock reads it, and at no other
// instant: in America/New_York, where 01:00 to 02:00 comes twice, a window
// from 00:00 to 01:30 is open from midnight to the first 01:30 and again
// from the change (the second 01:00) to the second 01:30, and one from
// 01:30 to 09:00 from the first 01:30 to the change and again from the
// second 01:30. time.Date picks one of a repeated time's two instants by
// itself, the later east of Greenwich and the earlier west of it: a window
// to 01:30 in New York held the repeated hour's messages until the next
// day, one to 02:30 in Europe/Berlin sent at 02:45 before the change, and
// one from 02:30 there opened only at the second 02:30.
// The spans are in an array, n of them, so that Next, on the path of
// every dispatch of a job with a window, allocates nothing.
func spans(y int, m time.Month, d, from, to int, loc *time.Location) (spans [2][2]time.Time, n int) {
	open := clockAt(y, m, d, from, loc, false)
	end := clockAt(y, m, d, to, loc, true)
	spans[0] = [2]time.Time{open, end}
	_, change := open.ZoneBounds()
	if change.IsZero() || change.After(end) {
		return spans, 1
	}
	_, before := open.Zone()
	if _, after := change.In(loc).Zone(); after >= before {
		return spans, 1 // set forward: the clock reads on
	}
	firstEnd := clockAt(y, m, d, to, loc, false)
	secondOpen := clockAt(y, m, d, from, loc, true)
	spans[0][1], spans[1] = minTime(firstEnd, change), [2]time.Time{maxTime(secondOpen, change), end}
	return spans, 2
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// clockAt is the instant loc's clock reads min minutes into the day y-m-d
// (1440: the next midnight). A time that a daylight-saving change skips
// comes out past the gap, as far as it is into it (02:30 in a gap from
// 02:00 to 03:00 becomes 03:30). time.Date answers so east of Greenwich,
// but west of it puts such a time before the gap: in America/New_York a
// window from 02:30 opened at 01:30 that day, outside its hours, and where
// the clock springs forward from midnight (America/Santiago,
// America/Havana) a window from 00:00 opened at 23:00 the day before, and
// one to 24:00 closed an hour early.
//
// A time that a fall-back repeats is two instants: the later one when last
// is set, the earlier one otherwise (spans says which it needs). The
// instant is in loc.
func clockAt(y int, m time.Month, d, min int, loc *time.Location, last bool) time.Time {
	at := time.Date(y, m, d, min/60, min%60, 0, 0, loc)
	want := time.Date(y, m, d, min/60, min%60, 0, 0, time.UTC)
	read := time.Date(at.Year(), at.Month(), at.Day(), at.Hour(), at.Minute(), 0, 0, time.UTC)
	if read.Before(want) {
		// Read by the offset before the gap, which at still has.
		_, offset := at.Zone()
		return want.Add(-time.Duration(offset) * time.Second).In(loc)
	}
	// The other instant, if any, has the offset of the zone period next to
	// at's: before it when at is the later, after it when at is the
	// earlier. It is that instant only if that offset is in force there.
	start, end := at.ZoneBounds()
	var next time.Time
	switch {
	case last && !end.IsZero():
		next = end
	case !last && !start.IsZero():
		next = start.Add(-time.Nanosecond)
	default:
		return at
	}
	_, offset := next.Zone()
	other := want.Add(-time.Duration(offset) * time.Second).In(loc)
	if _, o := other.Zone(); o == offset && other.Before(at) != last && !other.Equal(at) {
		return other
	}
	return at
}

// Open says whether w is open at t.
func (w Window) Open(t time.Time) bool { return !w.Next(t).After(t) }
