package store

import (
	"errors"
	"time"
)

var (
	// ErrTokenReused is returned when a refresh token is presented a second time;
	// its whole family has been revoked by then.
	ErrTokenReused = errors.New("store: refresh token already used")
	// ErrTokenExpired is returned for a token past its expiry.
	ErrTokenExpired = errors.New("store: token expired")
	// ErrTokenRevoked is returned for a token whose family was revoked.
	ErrTokenRevoked = errors.New("store: token revoked")
)

// RefreshToken is a single-use refresh token, stored by the hash of its value.
type RefreshToken struct {
	UserID    uint64    `json:"user_id"`
	Family    string    `json:"family"`
	ExpiresAt time.Time `json:"expires_at"`
	UsedAt    time.Time `json:"used_at,omitzero"`
	// Generation is the user's TokenGeneration when the family's login
	// checked the password; RotateRefreshToken hands it down the family.
	// A login that raced a password reset started its family after the
	// reset's revocation, and this is how it is told apart.
	Generation uint64 `json:"generation,omitempty"`
}

// TokenFamily groups the refresh tokens descending from one login.
type TokenFamily struct {
	UserID    uint64    `json:"user_id"`
	CreatedAt time.Time `json:"created_at"`
	Revoked   bool      `json:"revoked"`
}

// OneTimeToken is an e-mailed verification, reset or invite token, stored by hash.
type OneTimeToken struct {
	Kind      string    `json:"kind"`
	UserID    uint64    `json:"user_id"`
	ExpiresAt time.Time `json:"expires_at"`
	UsedAt    time.Time `json:"used_at,omitzero"`
	// Generation is the user's TokenGeneration when the token was mailed.
	// ConsumeOneTimeToken refuses a token of an earlier generation: once a
	// password was set through one link, the links mailed before it are dead.
	Generation uint64 `json:"generation,omitempty"`
}

// Reseal is how RotateSecrets re-seals a company's API key
// (Company.APIKeySealed): given the old and the fresh bytes of each secret
// it replaced, by name, and the sealed key, it returns the key sealed
// anew. The account package owns the seal; the store only keeps its bytes.
// An error that is ErrSealedUnopened (the sealed key does not open under
// the old bytes: corrupt, or sealed under a key that is gone) leaves that
// company's sealed key as it is and the rotation goes on; any other error
// fails the whole rotation.
type Reseal func(old, fresh map[string][]byte, sealed []byte) ([]byte, error)

// ErrSealedUnopened is a Reseal's error for a sealed API key that does not
// open under the seal key being replaced: it was unreadable before the
// rotation and stays so (the key still authenticates by its hash), so
// RotateSecrets keeps it as it is and names its company rather than fail.
var ErrSealedUnopened = errors.New("store: the sealed API key does not open")
