// Package phone normalises phone numbers to E.164, the one format simrelay
// stores and answers with.
package phone

import (
	"errors"
	"strings"
)

// ErrInvalid explains the accepted format; callers attach the field name.
var ErrInvalid = errors.New("must be in international format: + then 8 to 15 digits (spaces, dashes, dots and brackets are allowed)")

// Normalize returns s in E.164 form. Spaces, dashes, dots and brackets are
// dropped; anything else, or a number without its leading +, is refused: the
// server never guesses a country.
func Normalize(s string) (string, error) {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, "+") {
		return "", ErrInvalid
	}
	if digitsOnly(s[1:]) { // written as stored, as nearly every API call writes it: s itself
		if n := len(s) - 1; n < 8 || n > 15 || s[1] == '0' {
			return "", ErrInvalid
		}
		return s, nil
	}
	var b strings.Builder
	b.Grow(len(s))
	b.WriteByte('+')
	for _, r := range s[1:] {
		switch {
		case r >= '0' && r <= '9':
			b.WriteRune(r)
		case r == ' ' || r == '-' || r == '.' || r == '(' || r == ')':
		default:
			return "", ErrInvalid
		}
	}
	out := b.String()
	if n := len(out) - 1; n < 8 || n > 15 || out[1] == '0' {
		return "", ErrInvalid
	}
	return out, nil
}

// digitsOnly reports whether s holds the digits 0 to 9 alone.
func digitsOnly(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// NormalizeSender reads the sender a phone reports for a received message:
// a number with its + as Normalize does, and 8 to 15 digits without it
// (some phones drop the + of an international sender) as those digits after
// a +. The length rule is E.164's, so nothing shorter, such as a short code,
// is taken for a number; ok is false for every sender that is no number
// (a short code, a name such as "BANK"), which callers keep as given.
func NormalizeSender(s string) (n string, ok bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", false
	}
	if s[0] != '+' {
		for _, r := range s {
			if r < '0' || r > '9' {
				return "", false
			}
		}
		s = "+" + s
	}
	n, err := Normalize(s)
	return n, err == nil
}
