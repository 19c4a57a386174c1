package base62

import (
	"bytes"
	"strings"
	"testing"
)

// Every character is as likely as another: fed each byte value once, 248
// to 255 first, 248 characters take each of the 62 exactly four times,
// the bytes 248 to 255 skipped. Taken modulo 62, those eight bytes made
// 0 to 7 5/4 as likely as the rest.
func TestFromIsUniform(t *testing.T) {
	t.Parallel()
	var all []byte
	for b := range 256 {
		all = append(all, byte((b+248)%256))
	}
	// From reads in batches of n+n/8+1 bytes (280 for 248): the bytes past
	// the 256 are zeros, never reached.
	s, err := From(bytes.NewReader(append(all, make([]byte, 64)...)), 248)
	if err != nil {
		t.Fatal(err)
	}
	if len(s) != 248 {
		t.Fatalf("got %d characters, want 248", len(s))
	}
	for _, c := range Alphabet {
		if got := strings.Count(s, string(c)); got != 4 {
			t.Errorf("%q drawn %d times, want 4", c, got)
		}
	}
}

// A reader that gives only rejected bytes at first still yields n
// characters once it gives others; one that ends early is an error.
func TestFromDrawsAgain(t *testing.T) {
	t.Parallel()
	src := append(bytes.Repeat([]byte{255}, 30), bytes.Repeat([]byte{61}, 100)...)
	s, err := From(bytes.NewReader(src), 20)
	if err != nil || s != strings.Repeat("z", 20) {
		t.Fatalf("got %q, %v; want 20 z", s, err)
	}
	if _, err := From(bytes.NewReader(bytes.Repeat([]byte{255}, 100)), 20); err == nil {
		t.Fatal("a reader of rejected bytes only that ends: no error")
	}
}

// Random draws from crypto/rand: n characters of the alphabet, fresh each time.
func TestRandom(t *testing.T) {
	t.Parallel()
	a, err := Random(40)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Random(40)
	if len(a) != 40 || strings.Trim(a, Alphabet) != "" || a == b {
		t.Fatalf("got %q and %q", a, b)
	}
}
