// Package nulchar finds U+0000 (%00), and bytes that are not UTF-8 (%FF),
// in what a request names: no id, name, number or token the server stores
// holds either, and PostgreSQL (the store of a cluster) cannot even compare
// a text with them. The API (httpapi) and the console (web) refuse such a
// request each in its own words, but they find the fault, and the
// parameter to name, with the functions here (Path, then Values, which
// they call only for a query they parse once for their routes too); and
// so they find a parameter given twice with different values (Repeated).
package nulchar

import (
	"net/url"
	"strings"
	"unicode/utf8"
)

// Part is where in a request a Fault stands.
type Part int

const (
	// InPath is the URL's path: it names no page and no stored object.
	InPath Part = iota + 1
	// InParam is a query or form parameter's name or values; Fault.Param
	// names the parameter.
	InParam
)

// Cause is what the part holds.
type Cause int

const (
	// NUL is U+0000 (%00).
	NUL Cause = iota + 1
	// NotText is bytes that are not UTF-8 (%FF, or an encoded lone
	// surrogate such as %ED%A0%80).
	NotText
)

// Fault is the first thing in a request that nothing stored holds.
type Fault struct {
	Part  Part
	Cause Cause
	// Param is the parameter's name (InParam) as a refusal can show it:
	// its NULs left out (NUL), its bad bytes as U+FFFD (NotText); "" for
	// InPath.
	Param string
}

// Message is the API's words for the fault, the end of a sentence after
// the field's name; the console's forms answer a form field in them too.
func (f Fault) Message() string {
	if f.Cause == NUL {
		return `must not hold the NUL character (\u0000)`
	}
	return "must be UTF-8 text"
}

// Path is the fault of a URL's decoded path, or ok false: a NUL, then
// bytes that are not UTF-8. The decoded path is read, so %00 is a NUL and
// %2500 is only text.
func Path(p string) (f Fault, ok bool) {
	switch {
	case strings.IndexByte(p, 0) >= 0:
		return Fault{Part: InPath, Cause: NUL}, true
	case !utf8.ValidString(p):
		return Fault{Part: InPath, Cause: NotText}, true
	}
	return Fault{}, false
}

// Values is the first parameter of q at fault, or ok false: any parameter
// holding a NUL is named before any that is not UTF-8, each the first by
// name, so that the same one is named every time.
func Values(q url.Values) (f Fault, ok bool) {
	if k, ok := param(q); ok {
		return Fault{Part: InParam, Cause: NUL, Param: k}, true
	}
	if k, ok := notUTF8(q); ok {
		return Fault{Part: InParam, Cause: NotText, Param: k}, true
	}
	return Fault{}, false
}

// param is the first parameter, by name, whose name or values hold U+0000,
// its NULs left out so that the refusal can show it; ok is false when no
// parameter holds one. The names are sorted only when one is at fault: a
// sound query, every request's, costs no allocation.
func param(q url.Values) (name string, ok bool) {
	hasNUL := func(k string) bool {
		bad := strings.IndexByte(k, 0) >= 0
		for _, v := range q[k] {
			bad = bad || strings.IndexByte(v, 0) >= 0
		}
		return bad
	}
	return first(q, hasNUL, func(k string) string { return strings.ReplaceAll(k, "\x00", "") })
}

// notUTF8 is the first parameter, by name, whose name or values are not
// UTF-8; its name's bad bytes become U+FFFD, so that the refusal can name
// it.
func notUTF8(q url.Values) (name string, ok bool) {
	notText := func(k string) bool {
		bad := !utf8.ValidString(k)
		for _, v := range q[k] {
			bad = bad || !utf8.ValidString(v)
		}
		return bad
	}
	return first(q, notText, func(k string) string { return strings.ToValidUTF8(k, "\uFFFD") })
}

// first shows the first parameter of q, by name, that bad finds at
// fault; ok is false when it finds none. One pass, keeping the least name,
// as Repeated: nothing is sorted or allocated.
func first(q url.Values, bad func(k string) bool, show func(k string) string) (name string, ok bool) {
	for k := range q {
		if (!ok || k < name) && bad(k) {
			name, ok = k, true
		}
	}
	if !ok {
		return "", false
	}
	return show(name), true
}

// Repeated is the first parameter of q, by name (so the same every time),
// given more than once with different values, or ok false. A page or
// route reads one value of each, so the others would be dropped without
// a word; the same value given twice means one thing. Names that list
// says are read as lists (nil: none) may repeat.
func Repeated(q url.Values, list func(name string) bool) (name string, ok bool) {
	for k, vs := range q {
		if (!ok || k < name) && Differ(vs) && (list == nil || !list(k)) {
			name, ok = k, true
		}
	}
	return name, ok
}

// Differ reports whether values holds two that are not the same.
func Differ(values []string) bool {
	for _, v := range values[min(1, len(values)):] {
		if v != values[0] {
			return true
		}
	}
	return false
}
