package sms

import "time"

// ParseTime reads an RFC 3339 time as the API and the phones give it:
// time.RFC3339Nano, which wants an upper-case "T" and "Z", and also with
// the lower-case "t" and "z" that RFC 3339 allows (section 5.6). The date
// before the "T" is always ten characters, so only that place and the last
// one are read again, upper-cased.
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
	return time.Parse(time.RFC3339Nano, v)
}
