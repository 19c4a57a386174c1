// Package bidi keeps a user's or a stranger's text from reordering the text
// around it where it meets other text as plain text: in a sentence the server
// composes (a console notice, an activity line, an e-mail). Markup places
// isolate with <bdi> instead (package web); neither changes the text as
// stored, sent on or exported, which stays exactly as written.
//
// A right-to-left override (U+202E) in a device name makes the rest of the
// line read backwards ("Phone X is offline" becomes "enilffo si"), and plain
// Arabic or Hebrew text pulls neighbouring digits and punctuation to its side.
// Unicode's answer is an isolate: FIRST STRONG ISOLATE (U+2068) before the
// text and POP DIRECTIONAL ISOLATE (U+2069) after it. The isolate takes its
// direction from the text's own first strong character, and the closing
// U+2069 also ends every embedding or override the text left open, so
// nothing inside it reaches the text after it (UAX #9, rules X6a and BD8).
package bidi

import (
	"strings"
	"unicode/utf8"

	xbidi "golang.org/x/text/unicode/bidi"
)

const (
	// FSI and PDI open and close a first-strong isolate.
	FSI = "\u2068"
	PDI = "\u2069"
)

// Isolate returns s between FSI and PDI when s could reorder its
// surroundings: it holds right-to-left letters (or a right-to-left mark) or
// an explicit directional control. Other text, nearly every name, is
// returned as it is, so that a reader without the Unicode 6.3 isolates (an
// old mail client) sees no stray characters where none are needed.
func Isolate(s string) string {
	if !Reorders(s) {
		return s
	}
	return FSI + s + PDI
}

// Reorders reports whether s holds a right-to-left character or an explicit
// directional control (U+202A-U+202E, U+2066-U+2069).
func Reorders(s string) bool {
	for _, r := range s {
		if r < 0x0590 { // below Hebrew nothing is right to left or a control
			continue
		}
		p, _ := xbidi.LookupRune(r)
		switch p.Class() {
		case xbidi.R, xbidi.AL, xbidi.LRE, xbidi.RLE, xbidi.LRO, xbidi.RLO, xbidi.PDF,
			xbidi.LRI, xbidi.RLI, xbidi.FSI, xbidi.PDI:
			return true
		}
	}
	return false
}

// StripControls removes the explicit embeddings, overrides and isolates
// (U+202A-U+202E, U+2066-U+2069) from s and keeps everything else, marks
// (U+200E, U+200F), right-to-left letters and bytes that are not UTF-8
// included. It is for the places
// where a name is shown by a reader that may not honour isolates, such as
// an e-mail subject in a phone's notification: there a control cannot be
// contained, and a name never needs one.
func StripControls(s string) string {
	if !strings.ContainsFunc(s, isControl) {
		return s
	}
	// By hand: strings.Map writes each byte that is not UTF-8 as U+FFFD,
	// which is not keeping it.
	var out strings.Builder
	out.Grow(len(s))
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !isControl(r) {
			out.WriteString(s[i : i+n])
		}
		i += n
	}
	return out.String()
}

func isControl(r rune) bool {
	return r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069
}
