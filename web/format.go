package web

import (
	"strconv"
	"strings"
	"time"

	"github.com/simrelay/simrelay/billing"
)

// The console writes every moment one way, with its zone, and every day as
// the first part of it, so a person never has to tell formats apart: the
// wire's RFC 3339 stays in the datetime attribute of <time>, for machines.
const (
	timeLayout = "2006-01-02 15:04 UTC"
	dayLayout  = "2006-01-02"
)

// moment reads the times the console shows: a time.Time, or a string or
// *string as the services hand them out (RFC 3339). ok is false for a
// missing or zero time.
func moment(v any) (t time.Time, ok bool) {
	switch x := v.(type) {
	case time.Time:
		t = x
	case *time.Time:
		if x != nil {
			t = *x
		}
	case *string:
		if x != nil {
			return moment(*x)
		}
	case string:
		p, err := time.Parse(time.RFC3339Nano, x)
		if err != nil {
			return t, false
		}
		t = p
	}
	return t.UTC(), !t.IsZero()
}

// ts is a moment as people read it: "2026-11-26 14:33 UTC"; "never" when
// there is none. A string that is no time is shown as it is.
func ts(v any) string {
	if t, ok := moment(v); ok {
		return t.Format(timeLayout)
	}
	if s, ok := v.(string); ok && s != "" {
		return s
	}
	return "never"
}

// iso is a moment for the datetime attribute.
func iso(v any) string {
	if t, ok := moment(v); ok {
		return t.Format(time.RFC3339)
	}
	return ""
}

// zeroDecimal are the currencies whose minor unit is the unit itself
// (Stripe's list): 900 jpy is 900 yen, not 9.00.
var zeroDecimal = map[string]bool{"bif": true, "clp": true, "djf": true, "gnf": true, "jpy": true, "kmf": true, "krw": true,
	"mga": true, "pyg": true, "rwf": true, "ugx": true, "vnd": true, "vuv": true, "xaf": true, "xof": true, "xpf": true}

// threeDecimal are the currencies whose minor unit is a thousandth
// (Stripe's list): 9000 kwd is 9.000 dinars, not 90.00.
var threeDecimal = map[string]bool{"bhd": true, "jod": true, "kwd": true, "omr": true, "tnd": true}

// price is a plan's price as people read it: "No charge", "9.00 USD / month",
// "1,200 JPY / year", "9.000 KWD / month".
func price(p billing.Price) string {
	if p.Amount == 0 {
		return "No charge"
	}
	cur := strings.ToLower(p.Currency)
	amount := thousands(p.Amount)
	if !zeroDecimal[cur] {
		digits, unit := 2, int64(100)
		if threeDecimal[cur] {
			digits, unit = 3, 1000
		}
		minor := strconv.FormatInt(p.Amount%unit, 10)
		amount = thousands(p.Amount/unit) + "." + strings.Repeat("0", digits-len(minor)) + minor
	}
	return amount + " " + strings.ToUpper(p.Currency) + " / " + p.Interval
}

// integer reads the whole numbers templates hand over (int, int64, uint64).
func integer(v any) int64 {
	switch x := v.(type) {
	case int:
		return int64(x)
	case int64:
		return x
	case uint64:
		return int64(min(x, uint64(1<<63-1)))
	case *int64:
		if x != nil {
			return *x
		}
	}
	return 0
}

// count writes a whole number with thousands separators: 25,000.
func count(v any) string { return thousands(integer(v)) }

func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// plural is "1 device", "3 devices", "1,000 messages".
func plural(v any, one, many string) string {
	if n := integer(v); n != 1 {
		return thousands(n) + " " + many
	}
	return "1 " + one
}

// limit is a plan limit: plural of it, or "unlimited" and the plural noun
// for nil.
func limit(n *int64, one, many string) string {
	if n == nil {
		return "unlimited " + many
	}
	return plural(*n, one, many)
}
