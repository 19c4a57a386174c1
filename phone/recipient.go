package phone

import (
	"strings"
	"unicode"

	"github.com/simrelay/simrelay/internal/linebreak"
)

// RecipientFault says why s cannot be a recipient handed to a device's tool
// (osascript, termux-sms-send, mmcli), or "" when nothing is wrong with it:
// a control character such as a newline, an invisible one (Unicode's format
// characters, e.g. a direction override or a zero-width space, and the line
// and paragraph separators: the console would show another address than
// the tool is given), or a leading '-' that a tool could read as an option.
// The server and the agent both ask it, so the two never drift apart. The
// control characters and the separators are linebreak.Is, the rule every
// name is held to too; a recipient is stricter still.
func RecipientFault(s string) string {
	switch {
	case strings.IndexFunc(s, linebreak.Is) >= 0:
		return "must not contain control characters such as a newline"
	case strings.IndexFunc(s, invisible) >= 0:
		return "must not contain invisible characters such as a zero-width space or a direction override"
	case strings.HasPrefix(strings.TrimSpace(s), "-"):
		return "must not begin with -"
	}
	return ""
}

// invisible reports a rune that shows as nothing, or moves the text around
// it: Unicode's format characters (Cf). The line and paragraph separators,
// invisible too, are refused as line breaks (linebreak.Is) before.
func invisible(r rune) bool {
	return unicode.Is(unicode.Cf, r)
}
