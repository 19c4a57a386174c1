// Package base62 draws random strings of the 62 digits and ASCII letters:
// the API keys (sk_...) and the agent numbers' public ids (wa_..., im_...).
package base62

import (
	"crypto/rand"
	"io"
)

// Alphabet is the 62 characters, digits first, then upper and lower case.
// An id or key is checked against it (strings.Trim(s, Alphabet) == ""),
// never decoded: the order only matters to how bytes map to characters.
const Alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// limit is the largest multiple of len(Alphabet) a byte can be (4 × 62):
// a byte at or above it is drawn again, since taking it modulo 62 would
// make the first 256-248 = 8 characters 5/4 as likely as the others.
const limit = 256 - 256%len(Alphabet)

// Random is n characters of Alphabet, each drawn uniformly from
// crypto/rand.
func Random(n int) (string, error) { return From(rand.Reader, n) }

// From is n characters of Alphabet drawn from r's bytes by rejection: a
// byte below limit gives the character at its value modulo 62, a byte at
// or above it is skipped. About 3% of the bytes are skipped; r is read in
// batches until n characters are drawn.
func From(r io.Reader, n int) (string, error) {
	out := make([]byte, 0, n)
	buf := make([]byte, n+n/8+1)
	for len(out) < n {
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		for _, b := range buf {
			if int(b) < limit {
				out = append(out, Alphabet[int(b)%len(Alphabet)])
				if len(out) == n {
					break
				}
			}
		}
	}
	return string(out), nil
}
