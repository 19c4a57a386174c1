package account

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/base62"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/boltstore"
)

func TestPasswordHash(t *testing.T) {
	t.Parallel()
	h, err := hashPassword(context.Background(), "Correct-Horse-9", argonCost{DefaultPasswordTime, DefaultPasswordMemory})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(h, "$argon2id$v=19$m=19456,t=2,p=1$") {
		t.Fatalf("got %q, want an argon2id PHC string with m=19456,t=2,p=1", h)
	}
	for pw, want := range map[string]bool{"Correct-Horse-9": true, "correct-horse-9": false, "": false} {
		if got, err := checkPassword(context.Background(), h, pw); err != nil || got != want {
			t.Errorf("checkPassword(%q) = %v, %v; want %v", pw, got, err, want)
		}
	}
	// Cost parameters are read from the hash, so hashes from other settings keep verifying.
	cheap := strings.Replace(h, "m=19456,t=2", "m=8192,t=1", 1)
	if ok, err := checkPassword(context.Background(), cheap, "Correct-Horse-9"); err != nil || ok {
		t.Errorf("a hash whose parameters were altered must not verify: %v %v", ok, err)
	}
	for _, bad := range []string{"", "$bcrypt$x", "$argon2id$v=18$m=1,t=1,p=1$a$b"} {
		if _, err := checkPassword(context.Background(), bad, "x"); err == nil {
			t.Errorf("checkPassword(%q) accepted a malformed hash", bad)
		}
	}
}

// TestPasswordCostFromConfig: the service hashes at OWASP's minimum unless
// its Config names another cost (tests do), and a hash of either cost verifies.
func TestPasswordCostFromConfig(t *testing.T) {
	t.Parallel()
	st, err := boltstore.Open(t.TempDir(), boltstore.Options{BulkLoad: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "$argon2id$v=19$m=19456,t=2,p=1$"},
		{Config{PasswordTime: 1, PasswordMemory: 64}, "$argon2id$v=19$m=64,t=1,p=1$"},
	} {
		s, err := New(tc.cfg, st, nil, slog.New(slog.DiscardHandler), time.Now)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(s.dummyHash, tc.want) {
			t.Errorf("%+v: the unknown-user hash is %q, want the cost %s", tc.cfg, s.dummyHash, tc.want)
		}
		h, err := hashPassword(context.Background(), "Correct-Horse-9", s.cfg.passwordCost())
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(h, tc.want) {
			t.Errorf("%+v: got hash %q, want the cost %s", tc.cfg, h, tc.want)
		}
		if ok, err := checkPassword(context.Background(), h, "Correct-Horse-9"); err != nil || !ok {
			t.Errorf("%+v: the hash does not verify: %v %v", tc.cfg, ok, err)
		}
	}
}

func TestAPIKeyShape(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for range 100 {
		k := newAPIKey()
		if len(k) != len(APIKeyPrefix)+apiKeyChars || !strings.HasPrefix(k, APIKeyPrefix) || strings.Trim(k[3:], base62.Alphabet) != "" {
			t.Fatalf("got key %q, want sk_ and 40 base62 characters", k)
		}
		if seen[k] {
			t.Fatalf("key %q repeated", k)
		}
		seen[k] = true
	}
}

func TestSealer(t *testing.T) {
	t.Parallel()
	s, err := newSealer(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	sealed := s.seal("sk_secret")
	if strings.Contains(string(sealed), "sk_secret") {
		t.Fatal("the sealed value holds the plain text")
	}
	if got, err := s.open(sealed); err != nil || got != "sk_secret" {
		t.Fatalf("got %q, %v", got, err)
	}
	sealed[len(sealed)-1] ^= 1
	if _, err := s.open(sealed); err == nil {
		t.Fatal("a tampered value opened")
	}
	other, _ := newSealer(append(make([]byte, 31), 1))
	if _, err := other.open(s.seal("x")); err == nil {
		t.Fatal("another key opened the value")
	}
}

// ResealAPIKey opens a sealed key with the old seal key and seals the same
// key with the fresh one, which alone opens it after; a rotation that left
// the seal key keeps the sealed bytes, and a value the old key does not
// open (or garbage) is store.ErrSealedUnopened (the rotation keeps it as it
// is and goes on).
func TestResealAPIKey(t *testing.T) {
	t.Parallel()
	oldKey, newKey := []byte(strings.Repeat("o", 32)), []byte(strings.Repeat("n", 32))
	from, err := newSealer(oldKey)
	if err != nil {
		t.Fatal(err)
	}
	to, err := newSealer(newKey)
	if err != nil {
		t.Fatal(err)
	}
	sealed := from.seal("the-api-key")
	old, fresh := map[string][]byte{SealSecret: oldKey}, map[string][]byte{SealSecret: newKey}
	again, err := ResealAPIKey(old, fresh, sealed)
	if err != nil {
		t.Fatal(err)
	}
	if key, err := to.open(again); err != nil || key != "the-api-key" {
		t.Fatalf("the re-sealed key under the new seal key: %q (%v)", key, err)
	}
	if _, err := from.open(again); err == nil {
		t.Fatal("the old seal key opens the re-sealed key")
	}
	jwtOnly := map[string][]byte{JWTSecret: newKey}
	if same, err := ResealAPIKey(map[string][]byte{JWTSecret: oldKey}, jwtOnly, sealed); err != nil || string(same) != string(sealed) {
		t.Fatalf("a rotation without the seal key changed the sealed key: %x (%v)", same, err)
	}
	if _, err := ResealAPIKey(fresh, old, sealed); !errors.Is(err, store.ErrSealedUnopened) {
		t.Fatalf("re-sealing a value the given old key does not open: %v, want store.ErrSealedUnopened", err)
	}
	if _, err := ResealAPIKey(old, fresh, []byte("garbage")); !errors.Is(err, store.ErrSealedUnopened) {
		t.Fatalf("re-sealing garbage: %v, want store.ErrSealedUnopened", err)
	}
}
