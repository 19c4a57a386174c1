// Package smsparts counts the parts (SMS) a text takes as a phone or a
// modem splits it: the server's credits and the agent's own pacing count
// alike.
package smsparts

// gsm7 holds the GSM 03.38 basic character set; gsm7Ext the characters of its
// extension table, which take two septets (an escape and the character).
var gsm7 = map[rune]bool{}
var gsm7Ext = map[rune]bool{}

func init() {
	const basic = "@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !\"#¤%&'()*+,-./0123456789:;<=>?¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà"
	for _, r := range basic {
		gsm7[r] = true
	}
	for _, r := range "^{}\\[~]|€\f" {
		gsm7Ext[r] = true
	}
}

// Count is how many SMS parts (credits) text takes: GSM-7 when every
// character is in the GSM alphabet (extension characters count two), 160 in
// one part or 153 per part; otherwise UCS-2, 70 in one part or 67 per part
// (counted in UTF-16 code units, so an emoji takes two).
//
// A character is never split between two parts, as phones split a long
// text (Android's SmsMessage.fragmentText, a modem's PDU encoder): an
// extension character's escape and septet, or an emoji's surrogate pair,
// that would straddle a part's end go whole into the next part, so such a
// text can take one part more than its length divided by 153 or 67.
func Count(text string) int {
	septets, units, isGSM := 0, 0, true
	for _, r := range text {
		switch {
		case gsm7[r]:
			septets++
		case gsm7Ext[r]:
			septets += 2
		default:
			isGSM = false
		}
		units += utf16Units(r)
	}
	if isGSM {
		return parts(text, septets, 160, 153, gsmSeptets)
	}
	return parts(text, units, 70, 67, utf16Units)
}

// gsmSeptets is the septets a GSM-7 character takes: two for one of the
// extension table (an escape and the character).
func gsmSeptets(r rune) int {
	if gsm7Ext[r] {
		return 2
	}
	return 1
}

// utf16Units is the UTF-16 code units r takes in UCS-2: two past U+FFFF
// (a surrogate pair).
func utf16Units(r rune) int {
	if r > 0xFFFF {
		return 2
	}
	return 1
}

// parts is how many parts text of total units takes: one when it fits in
// single, else parts of multi units each, filled in order, a character
// whose width does not fit the room left in a part starting the next.
func parts(text string, total, single, multi int, width func(rune) int) int {
	if total <= single {
		return 1
	}
	n, room := 1, multi
	for _, r := range text {
		w := width(r)
		if w > room {
			n, room = n+1, multi
		}
		room -= w
	}
	return n
}
