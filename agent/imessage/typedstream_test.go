package imessage

import (
	"encoding/binary"
	"strings"
	"testing"
)

// archived builds an attributedBody as Messages writes it: the typedstream
// header, the NSAttributedString/NSObject class chain, the NSString object
// with its text, and the attribute run that follows.
func archived(text string) []byte {
	b := []byte("\x04\x0bstreamtyped\x81\xe8\x03\x84\x01@\x84\x84\x84\x12NSAttributedString\x00\x84\x84\x08NSObject\x00\x85\x92\x84\x84\x84\x08NSString\x01\x94\x84\x01+")
	switch n := len(text); {
	case n < 0x80:
		b = append(b, byte(n))
	case n <= 0xffff:
		b = append(b, 0x81, 0, 0)
		binary.LittleEndian.PutUint16(b[len(b)-2:], uint16(n))
	default:
		b = append(b, 0x82, 0, 0, 0, 0)
		binary.LittleEndian.PutUint32(b[len(b)-4:], uint32(n))
	}
	b = append(b, text...)
	return append(b, "\x86\x84\x02iI\x01\x05\x92\x84\x84\x84\x0cNSDictionary\x00\x94\x84\x01i\x01\x92\x84\x96\x96\x1d__kIMMessagePartAttributeName\x86"...)
}

func TestAttributedText(t *testing.T) {
	t.Parallel()
	for _, text := range []string{"Hi from the Mac", "é ✓ 😀", strings.Repeat("long text ", 40), strings.Repeat("x", 70000)} {
		got, ok := attributedText(archived(text))
		if !ok || got != text {
			t.Errorf("len %d: got %q %v", len(text), got[:min(len(got), 40)], ok)
		}
	}
	for name, blob := range map[string][]byte{
		"empty":     nil,
		"no string": []byte("\x04\x0bstreamtypedNSDictionary"),
		"cut":       archived("Hello there, how are you")[:80],
	} {
		if got, ok := attributedText(blob); ok {
			t.Errorf("%s: got %q", name, got)
		}
	}
}
