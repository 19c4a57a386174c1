package store

// CanonicalUUID is id in the form the server gives UUIDs out and stores them
// in, lower case, when id is a UUID in its hyphenated form (8-4-4-4-12 hex
// digits) written in any case: RFC 9562 reads a UUID without regard to
// case, so QUEUE-ID and queue-id name one message. Anything else is
// returned as it is (it names nothing the server made; no other form, such
// as braces or urn:uuid:, is read).
func CanonicalUUID(id string) string {
	if len(id) != 36 {
		return id
	}
	var b [36]byte
	upper := false
	for i := range 36 {
		c := id[i]
		switch {
		case i == 8 || i == 13 || i == 18 || i == 23:
			if c != '-' {
				return id
			}
		case '0' <= c && c <= '9', 'a' <= c && c <= 'f':
		case 'A' <= c && c <= 'F':
			c += 'a' - 'A'
			upper = true
		default:
			return id
		}
		b[i] = c
	}
	if !upper {
		return id
	}
	return string(b[:])
}
