package androidproto

import (
	"strings"
	"unicode/utf8"
)

// CutBytes returns s cut to at most n bytes, before the character that
// would cross byte n, so that a cut text stays UTF-8: the rule for what the
// server keeps of a long status.error (section 8.5) and repeats of a
// phone's frame in an error frame (MaxEchoBytes). A cut inside a character
// left bytes that are not UTF-8, which one store kept as they were and
// another stored as U+FFFD. Invalid UTF-8 is cut anywhere after at most
// three steps back. A cut text is a copy: kept, it does not keep the whole
// text it was cut from (up to a frame's 64 KiB) alive with it.
func CutBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for i := 0; i < utf8.UTFMax-1 && n > 0 && !utf8.RuneStart(s[n]); i++ {
		n--
	}
	return strings.Clone(s[:n])
}
