package linebreak

import "strings"

// SentBack reports whether sent is the stored value sent back, spaces
// around either aside. The console's forms send every field with the value
// they were shown, and a browser or the form may trim the spaces around it:
// a name stored before a rule tightened (a line break, say) must not refuse
// the save of another field, so a value sent back is kept as stored, not
// checked again. A value that differs in anything else is checked in full.
//
// Account, device and pool names all keep this one rule, whatever else
// their own rules are (a pool's name refuses spaces around it and direction
// marks too).
func SentBack(sent, stored string) bool {
	return strings.TrimSpace(sent) == strings.TrimSpace(stored)
}
