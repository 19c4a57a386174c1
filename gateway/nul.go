package gateway

import "bytes"

// withoutNUL returns a frame's JSON with each U+0000 in its strings read as
// U+FFFD, the replacement character. PostgreSQL (the store of a cluster)
// cannot hold U+0000 in a record, so a phone's inbound text holding one
// (a GSM decoder's slip: GSM 7-bit writes '@' as 0x00) would fail its
// store on every resend and close the link each time, a message the phone
// can never deliver and the link never keeps. Replaced, the message is
// stored as its text with a visible mark, on either store alike; the same
// holds for every other string a phone sends (names, carriers, errors).
//
// A valid JSON text carries U+0000 only as the escape \u0000 (a raw control
// byte in a string is invalid JSON); an escaped backslash before "u0000"
// is the text \u0000, which stays.
func withoutNUL(data []byte) []byte {
	if !bytes.Contains(data, []byte(`\u0000`)) {
		return data
	}
	out := make([]byte, 0, len(data))
	for i := 0; i < len(data); i++ {
		if data[i] != '\\' || i+1 >= len(data) {
			out = append(out, data[i])
			continue
		}
		if bytes.HasPrefix(data[i+1:], []byte("u0000")) {
			out = append(out, `\ufffd`...)
			i += 5
			continue
		}
		out = append(out, data[i], data[i+1]) // any other escape, \\ included
		i++
	}
	return out
}
