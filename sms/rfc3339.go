package sms

import (
	"errors"
	"strings"
	"time"
)

// errYearRange refuses a time whose UTC form has no four-digit year.
var errYearRange = errors.New("the time in UTC is outside the years 0000 to 9999")

// errFractionComma refuses a comma before the fraction of a second.
var errFractionComma = errors.New("the fraction of a second follows a dot, not a comma")

// errOffsetRange refuses an offset past RFC 3339's: hours 00 to 23,
// minutes 00 to 59.
var errOffsetRange = errors.New("the offset from UTC is outside -23:59 to +23:59")

// ParseTime reads an RFC 3339 time as the API and the phones give it:
// time.RFC3339Nano, which wants an upper-case "T" and "Z", and also with
// the lower-case "t" and "z" that RFC 3339 allows (section 5.6). The date
// before the "T" is always ten characters, so only that place and the last
// one are read again, upper-cased. The fraction of a second follows a dot
// only, as RFC 3339 writes it: Go's comma is refused.
//
// A time whose instant in UTC falls outside the years 0000 to 9999 (year
// 0000 with an offset east of UTC, 9999 with one west of it) is refused:
// a phone's time is stored and shown in UTC, and such a time has no
// RFC 3339 form there ("-0001-12-31T23:00:00.000Z", "10000-01-01T..."),
// so nothing, ParseTime included, could read it back.
func ParseTime(v string) (time.Time, error) {
	// Go reads a comma before the fraction of a second as a dot (ISO 8601
	// allows either); RFC 3339's time-secfrac is a dot, and nothing else in
	// its form is a comma.
	if strings.IndexByte(v, ',') >= 0 {
		return time.Time{}, errFractionComma
	}
	if n := len(v); n > 10 && (v[10] == 't' || v[n-1] == 'z') {
		b := []byte(v)
		if b[10] == 't' {
			b[10] = 'T'
		}
		if b[n-1] == 'z' {
			b[n-1] = 'Z'
		}
		v = string(b)
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return t, err
	}
	// Go reads an offset's hour up to 24 and its minute up to 60, so
	// +00:60 was taken as +01:00 and +24:00 as a day; RFC 3339's
	// time-numoffset has hours 00 to 23 and minutes 00 to 59. A time that
	// parsed and does not end in Z ends in its offset, +hh:mm.
	if n := len(v); v[n-1] != 'Z' && (v[n-5:n-3] > "23" || v[n-2:] > "59") {
		return time.Time{}, errOffsetRange
	}
	if y := t.UTC().Year(); y < 0 || y > 9999 {
		return time.Time{}, errYearRange
	}
	return t, nil
}
