package account

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"runtime"
	"strings"

	"golang.org/x/crypto/argon2"

	"github.com/simrelay/simrelay/internal/base62"
	"github.com/simrelay/simrelay/store"
)

// DefaultPasswordTime and DefaultPasswordMemory (KiB) are the argon2id cost
// of new password hashes (Config.PasswordTime, Config.PasswordMemory):
// OWASP's minimum recommendation (m=19 MiB, t=2, p=1), about 30 ms a hash on
// one core, which bounds what a stolen store is worth without making login a
// denial-of-service lever.
const (
	DefaultPasswordTime   = 2
	DefaultPasswordMemory = 19 * 1024
)

const (
	argonThreads = 1
	argonKeyLen  = 32
	argonSaltLen = 16
)

// argonCost is the time and memory (KiB) of an argon2id hash.
type argonCost struct{ time, memory uint32 }

// hashesAtOnce bounds the argon2id hashes computed at once, server-wide:
// each holds its memory cost (19 MiB by default) while it runs, and the
// credential routes count per client address, so logins, sign-ups and
// resets sent together from many addresses each held theirs at once (100
// concurrent logins held 1.7 GB of heap). A hash is work for one core:
// more at once than the process has cores finish no sooner, so the others
// wait their turn, holding nothing but their request, and no longer than
// it lasts: one whose client went away computes nothing for nobody, and
// the logins behind it do not wait for it.
var hashesAtOnce = max(2, runtime.GOMAXPROCS(0))

// hashing holds a place per argon2id hash under way (hashesAtOnce).
var hashing = make(chan struct{}, hashesAtOnce)

// idKey computes an argon2id hash: argon2.IDKey, which a test replaces to
// count the hashes under way at once.
var idKey = argon2.IDKey

// argonKey is argon2.IDKey, computed once a place among hashesAtOnce is
// free; ctx's error when ctx ends first (the request's client went away).
func argonKey(ctx context.Context, pw, salt []byte, time, memory uint32, threads uint8, keyLen uint32) ([]byte, error) {
	select {
	case hashing <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-hashing }()
	return idKey(pw, salt, time, memory, threads, keyLen), nil
}

// APIKeyPrefix starts every API key, so keys are recognisable in logs and scanners.
const APIKeyPrefix = "sk_"

// apiKeyChars is the length of the random base62 part of an API key (238 bits).
const apiKeyChars = 40

// hashPassword returns the PHC string of an argon2id hash of pw at cost c;
// ctx's error when ctx ends before its turn (argonKey).
func hashPassword(ctx context.Context, pw string, c argonCost) (string, error) {
	salt := make([]byte, argonSaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", err
	}
	sum, err := argonKey(ctx, []byte(pw), salt, c.time, c.memory, argonThreads, argonKeyLen)
	if err != nil {
		return "", err
	}
	enc := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, c.memory, c.time, argonThreads, enc.EncodeToString(salt), enc.EncodeToString(sum)), nil
}

// checkPassword reports whether pw matches the PHC string, reading the cost
// parameters from the string so hashes made with older settings still verify;
// ctx's error when ctx ends before its turn (argonKey).
func checkPassword(ctx context.Context, phc, pw string) (bool, error) {
	parts := strings.Split(phc, "$")
	if len(parts) != 6 || parts[1] != "argon2id" {
		return false, errors.New("account: not an argon2id hash")
	}
	var version int
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version {
		return false, errors.New("account: unsupported argon2 version")
	}
	var m uint32
	var t uint32
	var p uint8
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &m, &t, &p); err != nil {
		return false, fmt.Errorf("account: argon2 parameters: %w", err)
	}
	enc := base64.RawStdEncoding
	salt, err := enc.DecodeString(parts[4])
	if err != nil {
		return false, err
	}
	want, err := enc.DecodeString(parts[5])
	if err != nil {
		return false, err
	}
	got, err := argonKey(ctx, []byte(pw), salt, t, m, p, uint32(len(want)))
	if err != nil {
		return false, err
	}
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}

// randomToken returns n random bytes as unpadded base64url.
func randomToken(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("account: crypto/rand failed: %v", err))
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// newAPIKey returns a fresh API key: the prefix and 40 random base62
// characters (base62.Random).
func newAPIKey() string {
	s, err := base62.Random(apiKeyChars)
	if err != nil {
		panic(fmt.Sprintf("account: crypto/rand failed: %v", err))
	}
	return APIKeyPrefix + s
}

// tokenHash is how every bearer secret (API key, refresh, e-mail tokens) is
// looked up: the store never holds the secret itself.
func tokenHash(s string) []byte {
	h := sumToken(s)
	return h[:]
}

// sumToken is tokenHash's digest as a value. A token of up to 64 bytes (an
// API key is 43) is hashed from a copy on the stack, so that the check of
// the API key every request makes (authenticate) allocates nothing.
func sumToken(s string) [sha256.Size]byte {
	var buf [64]byte
	return sha256.Sum256(append(buf[:0], s...))
}

// sealer encrypts API keys at rest with the server's key (AES-256-GCM), so the
// key can be shown again without being readable from a copy of the store alone.
type sealer struct{ aead cipher.AEAD }

func newSealer(key []byte) (*sealer, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &sealer{aead: aead}, nil
}

func (s *sealer) seal(plain string) []byte {
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		panic(fmt.Sprintf("account: crypto/rand failed: %v", err))
	}
	return s.aead.Seal(nonce, nonce, []byte(plain), nil)
}

func (s *sealer) open(sealed []byte) (string, error) {
	n := s.aead.NonceSize()
	if len(sealed) < n {
		return "", errors.New("account: sealed value too short")
	}
	plain, err := s.aead.Open(nil, sealed[:n], sealed[n:], nil)
	if err != nil {
		return "", fmt.Errorf("account: open sealed value: %w", err)
	}
	return string(plain), nil
}

// The store secrets (store.Backend.Secret) the service keys with, made at
// its first start: JWTSecret signs the access tokens, SealSecret seals each
// company's API key (sealer), LoginSecret keys the digests that count failed
// sign-ins by address, client and device cookie (loginKey, windowKey).
const (
	JWTSecret   = "jwt-hs256"
	SealSecret  = "api-key-seal"
	LoginSecret = "login-failures"
)

// ResealAPIKey is the store.Reseal of a rotation of the server's secrets
// (simrelay admin rotate-keys): a company's sealed API key opened with the
// old SealSecret and sealed with the fresh one, the key itself unchanged.
// A rotation that leaves SealSecret as it was leaves the sealed key too.
// A sealed key that does not open under the old SealSecret (corrupt, or
// sealed under a key that is gone) is store.ErrSealedUnopened: the
// rotation keeps it as it is and goes on.
func ResealAPIKey(old, fresh map[string][]byte, sealed []byte) ([]byte, error) {
	next, ok := fresh[SealSecret]
	if !ok {
		return sealed, nil
	}
	from, err := newSealer(old[SealSecret])
	if err != nil {
		return nil, fmt.Errorf("account: the old seal key: %w", err)
	}
	key, err := from.open(sealed)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", store.ErrSealedUnopened, err)
	}
	to, err := newSealer(next)
	if err != nil {
		return nil, fmt.Errorf("account: the new seal key: %w", err)
	}
	return to.seal(key), nil
}
