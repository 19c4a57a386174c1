package imessage

import (
	"bytes"
	"encoding/binary"
	"unicode/utf8"
)

// attributedText finds the text of a message's attributedBody: an
// NSAttributedString archived in Apple's "typedstream" format, which
// Messages writes when the text column is NULL (macOS 13 and later, for
// most messages). The string is the NSString object's payload: after the
// class name "NSString", the type code '+' (a C string), then its length
// in typedstream's integer encoding (one byte below 0x80; 0x81 then two
// bytes little-endian; 0x82 then four), then the UTF-8 bytes. Only that
// payload is read; the attributes (links, mentions) are not needed.
func attributedText(blob []byte) (string, bool) {
	i := bytes.Index(blob, []byte("NSString"))
	if i < 0 {
		return "", false
	}
	rest := blob[i+len("NSString"):]
	p := bytes.IndexByte(rest, '+')
	if p < 0 || p > 16 { // the class version and type markers come first
		return "", false
	}
	rest = rest[p+1:]
	if len(rest) == 0 {
		return "", false
	}
	var n int
	switch rest[0] {
	case 0x81:
		if len(rest) < 3 {
			return "", false
		}
		n, rest = int(binary.LittleEndian.Uint16(rest[1:3])), rest[3:]
	case 0x82:
		if len(rest) < 5 {
			return "", false
		}
		n, rest = int(binary.LittleEndian.Uint32(rest[1:5])), rest[5:]
	default:
		if rest[0] >= 0x80 {
			return "", false
		}
		n, rest = int(rest[0]), rest[1:]
	}
	if n > len(rest) || !utf8.Valid(rest[:n]) {
		return "", false
	}
	return string(rest[:n]), true
}
