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
