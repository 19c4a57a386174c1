package sms

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

// Segments is how many SMS parts (credits) text takes: GSM-7 when every
// character is in the GSM alphabet (extension characters count two), 160 in
// one part or 153 per part; otherwise UCS-2, 70 in one part or 67 per part
// (counted in UTF-16 code units, so an emoji takes two).
func Segments(text string) int {
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
		if r > 0xFFFF {
			units += 2
		} else {
			units++
		}
	}
	if isGSM {
		return parts(septets, 160, 153)
	}
	return parts(units, 70, 67)
}

func parts(n, single, multi int) int {
	if n == 0 {
		return 1
	}
	if n <= single {
		return 1
	}
	return (n + multi - 1) / multi
}
