// Package linebreak keeps a one-line text one line. A name a person or a
// device gives (a company's, a user's, a device's, a pool's, a SIM's
// carrier) is written into log lines, exports, e-mail subjects and
// activity lines; a line break inside it (CR, LF, NEL, U+2028, U+2029)
// starts a forged line or record there, and the other control characters
// (NUL, ESC, DEL, the C1 block) corrupt or colour what they meet.
//
// It holds one rule, Is, and its two uses: Fault refuses such a text at
// input (what a person types), Replace mends it (what a phone or an agent
// reports, which must never make its link fail). SentBack says when a
// name stored before the rule, sent back by a form, is kept unchecked.
// Neither Fault nor Replace touches the characters that shape a script or
// a direction (ZWJ, ZWNJ, the bidi marks and isolates): Persian, the Indic
// scripts and emoji need the joiners, and direction is handled where a
// name is shown (package bidi).
package linebreak

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Is reports a rune that breaks a line or a record: the C0 controls
// (U+0000-U+001F, tab included), DEL and the C1 controls (U+007F-U+009F,
// NEL included), and the line and paragraph separators U+2028 and U+2029.
//
// Tab is in: a name never needs one (a form's field cannot take it from
// the keyboard, so one is always pasted by mistake), and in a log line or
// a tab-separated export it splits the field it sits in.
func Is(r rune) bool {
	return unicode.IsControl(r) || r == '\u2028' || r == '\u2029'
}

// FaultMessage is what Fault answers, a sentence's end after a field's name.
const FaultMessage = "must not contain line breaks, tabs or other control characters"

// Fault says why s cannot be a one-line text, or "" when it can.
func Fault(s string) string {
	if strings.ContainsFunc(s, Is) {
		return FaultMessage
	}
	return ""
}

// Replace returns s with each rune Is reports replaced by a space, for a
// text that must be kept whatever it holds. Each replaced rune becomes one
// space byte and every other byte stays as it is (bytes that are not UTF-8
// included: strings.Map wrote each as the 3 bytes of U+FFFD), so s never
// grows and a byte bound checked before still holds.
func Replace(s string) string {
	if !strings.ContainsFunc(s, Is) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if Is(r) {
			b.WriteByte(' ')
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}
