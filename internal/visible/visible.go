// Package visible tells a text that shows something from one that does not.
// A message of spaces, or of a zero-width space alone, reaches its recipient
// as an empty bubble, and a name of nothing visible leaves a blank row in a
// list and a blank word in an activity line: both are refused where they are
// typed, as an absent text is. The rule lives here so that every send route
// and every name a person chooses apply the same one.
//
// It only reads a text: what is accepted is stored exactly as written.
package visible

import (
	"strings"
	"unicode"
)

// None reports whether s holds no visible character: it is empty, or holds
// only white space (unicode.IsSpace), control characters, format characters
// (Unicode category Cf: the zero-width space U+200B, the joiners U+200C and
// U+200D, the word joiner U+2060, the byte order mark U+FEFF, the
// direction marks) and the other code points Unicode lists as
// default-ignorable or that render as a blank cell (variation selectors, the
// combining grapheme joiner, the Hangul fillers, the Khmer inherent vowels,
// the Mongolian free variation selectors, the blank Braille pattern).
//
// A joiner or a variation selector beside a visible character is part of
// it (an emoji sequence, a Persian word): only a text made of nothing else
// is refused.
func None(s string) bool {
	for _, r := range s {
		if !invisible(r) {
			return false
		}
	}
	return true
}

// Trim returns s without the characters None counts as invisible at either
// end: white space, and the zero-width spaces, joiners, byte order marks,
// direction marks and the like that a keyboard, a paste or a phone puts
// around a word without showing them. It is for reading a text as a word
// (a joiner or variation selector at an end goes too, even after an emoji),
// never for changing what is stored.
func Trim(s string) string {
	return strings.TrimFunc(s, invisible)
}

func invisible(r rune) bool {
	if unicode.IsSpace(r) || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Variation_Selector, r) {
		return true
	}
	switch r {
	case '\u034F', // combining grapheme joiner
		'\u115F', '\u1160', '\u3164', '\uFFA0', // Hangul fillers
		'\u17B4', '\u17B5', // Khmer inherent vowels
		'\u180B', '\u180C', '\u180D', '\u180F', // Mongolian free variation selectors
		'\u2800': // Braille pattern blank
		return true
	}
	return false
}

// FaultMessage is what a refusal says, a sentence's end after the field's
// name.
const FaultMessage = "must hold a visible character (spaces and invisible characters alone are refused)"
