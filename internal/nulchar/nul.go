// Package nulchar finds U+0000 (%00), and bytes that are not UTF-8 (%FF),
// in what a request names: no id, name, number or token the server stores
// holds either, and PostgreSQL (the store of a cluster) cannot even compare
// a text with them. The API (httpapi) and the console (web) refuse such a
// request each in its own words, but they find the fault, and the
// parameter to name, with the one function here (URL, Values).
package nulchar

import (
	"maps"
	"net/url"
	"slices"
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

// URL is the first fault of u, or ok false: its path (a NUL, then bytes
// that are not UTF-8) before its query (Values). The decoded path is read,
// so %00 is a NUL and %2500 is only text.
func URL(u *url.URL) (f Fault, ok bool) {
	switch {
	case strings.IndexByte(u.Path, 0) >= 0:
		return Fault{Part: InPath, Cause: NUL}, true
	case !utf8.ValidString(u.Path):
		return Fault{Part: InPath, Cause: NotText}, true
	}
	return Values(u.Query())
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
// parameter holds one.
func param(q url.Values) (name string, ok bool) {
	for _, k := range slices.Sorted(maps.Keys(q)) {
		bad := strings.IndexByte(k, 0) >= 0
		for _, v := range q[k] {
			bad = bad || strings.IndexByte(v, 0) >= 0
		}
		if bad {
			return strings.ReplaceAll(k, "\x00", ""), true
		}
	}
	return "", false
}

// notUTF8 is the first parameter, by name, whose name or values are not
// UTF-8; its name's bad bytes become U+FFFD, so that the refusal can name
// it.
func notUTF8(q url.Values) (name string, ok bool) {
	for _, k := range slices.Sorted(maps.Keys(q)) {
		bad := !utf8.ValidString(k)
		for _, v := range q[k] {
			bad = bad || !utf8.ValidString(v)
		}
		if bad {
			return strings.ToValidUTF8(k, "\uFFFD"), true
		}
	}
	return "", false
}
