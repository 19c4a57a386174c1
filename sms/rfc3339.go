package sms

import (
	"errors"
	"time"
)

// errYearRange refuses a time whose UTC form has no four-digit year.
var errYearRange = errors.New("the time in UTC is outside the years 0000 to 9999")

// ParseTime reads an RFC 3339 time as the API and the phones give it:
// time.RFC3339Nano, which wants an upper-case "T" and "Z", and also with
// the lower-case "t" and "z" that RFC 3339 allows (section 5.6). The date
// before the "T" is always ten characters, so only that place and the last
// one are read again, upper-cased.
//
// A time whose instant in UTC falls outside the years 0000 to 9999 (year
// 0000 with an offset east of UTC, 9999 with one west of it) is refused:
// a phone's time is stored and shown in UTC, and such a time has no
// RFC 3339 form there ("-0001-12-31T23:00:00.000Z", "10000-01-01T..."),
// so nothing, ParseTime included, could read it back.
func ParseTime(v string) (time.Time, error) {
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
	if y := t.UTC().Year(); y < 0 || y > 9999 {
		return time.Time{}, errYearRange
	}
	return t, nil
}
