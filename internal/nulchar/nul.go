// Package nulchar finds U+0000 (%00), and bytes that are not UTF-8 (%FF),
// in what a request names: no id, name, number or token the server stores
// holds either, and PostgreSQL (the store of a cluster) cannot even compare
// a text with them. The API (httpapi) and the
// console (web) refuse such a request each in its own words, but they find
// the parameter to name the same way.
package nulchar

import (
	"maps"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"
)

// Param is the first parameter, by name, whose name or values hold U+0000,
// its NULs left out so that the refusal can show it; ok is false when no
// parameter holds one. Taking them by name names the same parameter every
// time.
func Param(q url.Values) (name string, ok bool) {
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

// NotUTF8 is the first parameter, by name (as Param takes them, so that
// the same one is named every time), whose name or values are not UTF-8;
// its name's bad bytes become U+FFFD, so that the refusal can name it.
func NotUTF8(q url.Values) (name string, ok bool) {
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
