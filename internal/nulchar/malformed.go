package nulchar

import (
	"net/url"
	"strings"
)

// Malformed names the first query parameter that a parser drops
// without a word: a % not followed by two hex digits, or a ; (Go's query
// parser drops the pair holding either), so ?phone=%2B1555%zz answered
// "phone is required" and ?limit=5;x=1 read no limit. The API and the
// console refuse it each in its own words. A byte scan first: a
// well-formed query is not parsed again.
func Malformed(raw string) (string, bool) {
	if !strings.Contains(raw, ";") && !badEscape(raw) {
		return "", false
	}
	for pair := range strings.SplitSeq(raw, "&") {
		if !strings.Contains(pair, ";") && !badEscape(pair) {
			continue
		}
		key, _, _ := strings.Cut(pair, "=")
		key, _, _ = strings.Cut(key, ";")
		if k, err := url.QueryUnescape(key); err == nil {
			key = k
		}
		if key == "" {
			key = pair
		}
		return key, true
	}
	return "", false
}

// badEscape reports whether s holds a % not followed by two hex digits.
func badEscape(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && (i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2])) {
			return true
		}
	}
	return false
}

func isHex(b byte) bool {
	return '0' <= b && b <= '9' || 'a' <= b && b <= 'f' || 'A' <= b && b <= 'F'
}
