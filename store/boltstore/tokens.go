package boltstore

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// StartRefreshFamily stores the first refresh token of a new login; a
// user who is not stored (a company removed since) is ErrNotFound.
func (s *Store) StartRefreshFamily(hash []byte, t RefreshToken, now time.Time) error {
	err := s.update(func(tx *bolt.Tx) error {
		if err := userStored(tx, t.UserID); err != nil {
			return err
		}
		if err := putJSON(tx.Bucket(bucketTokenFamilies), []byte(t.Family), TokenFamily{UserID: t.UserID, CreatedAt: now}); err != nil {
			return err
		}
		if err := tx.Bucket(bucketUserFamilies).Put(append(itob(t.UserID), t.Family...), nil); err != nil {
			return err
		}
		return putJSON(tx.Bucket(bucketRefreshTokens), hash, t)
	})
	if err != nil {
		return fmt.Errorf("store: start refresh family: %w", err)
	}
	return nil
}

// RotateRefreshToken spends the token with oldHash and stores next in its
// family, in one transaction. A token presented again revokes its family and
// answers ErrTokenReused; so two racing refreshes with one token leave at most one winner.
func (s *Store) RotateRefreshToken(oldHash, newHash []byte, newExpiry, now time.Time) (RefreshToken, error) {
	var old RefreshToken
	var outcome error
	err := s.update(func(tx *bolt.Tx) error {
		tokens := tx.Bucket(bucketRefreshTokens)
		if err := getJSON(tokens, oldHash, &old); err != nil {
			return err
		}
		families := tx.Bucket(bucketTokenFamilies)
		var fam TokenFamily
		if err := getJSON(families, []byte(old.Family), &fam); err != nil {
			return err
		}
		switch {
		case fam.Revoked:
			outcome = ErrTokenRevoked
			return nil
		case !old.UsedAt.IsZero():
			fam.Revoked = true
			outcome = ErrTokenReused
			return putJSON(families, []byte(old.Family), fam)
		case !now.Before(old.ExpiresAt):
			outcome = ErrTokenExpired
			return nil
		}
		old.UsedAt = now
		if err := putJSON(tokens, oldHash, old); err != nil {
			return err
		}
		return putJSON(tokens, newHash, RefreshToken{UserID: old.UserID, Family: old.Family, ExpiresAt: newExpiry, Generation: old.Generation})
	})
	if err == nil {
		err = outcome
	}
	if err != nil {
		return old, fmt.Errorf("store: rotate refresh token: %w", err)
	}
	return old, nil
}

// revokeUserFamilies signs a user out everywhere (a removal, a password
// set through a mailed link): their refresh token families, console
// sessions and the pairing codes they made that no phone used yet (not the
// API key's made in their name: dropPairings).
func revokeUserFamilies(tx *bolt.Tx, userID uint64) error {
	if err := revokeConsoleSessions(tx, userID); err != nil {
		return err
	}
	if err := dropPairings(tx, func(p Pairing) bool { return p.UserID == userID && !p.ViaAPIKey }); err != nil {
		return err
	}
	families := tx.Bucket(bucketTokenFamilies)
	prefix := itob(userID)
	c := tx.Bucket(bucketUserFamilies).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		id := k[8:]
		var fam TokenFamily
		if err := getJSON(families, id, &fam); err != nil {
			if errors.Is(err, ErrNotFound) {
				continue
			}
			return err
		}
		if fam.Revoked {
			continue
		}
		fam.Revoked = true
		if err := putJSON(families, id, fam); err != nil {
			return err
		}
	}
	return nil
}

// RevokeUserSessions revokes every refresh token family of a user.
func (s *Store) RevokeUserSessions(userID uint64) error {
	if err := s.update(func(tx *bolt.Tx) error { return revokeUserFamilies(tx, userID) }); err != nil {
		return fmt.Errorf("store: revoke sessions of user %d: %w", userID, err)
	}
	return nil
}

// PutOneTimeToken stores an e-mailed token; a user who is not stored is
// ErrNotFound.
func (s *Store) PutOneTimeToken(hash []byte, t OneTimeToken) error {
	if err := s.update(func(tx *bolt.Tx) error {
		if err := userStored(tx, t.UserID); err != nil {
			return err
		}
		return putJSON(tx.Bucket(bucketOneTimeTokens), hash, t)
	}); err != nil {
		return fmt.Errorf("store: put one-time token: %w", err)
	}
	return nil
}

// ConsumeOneTimeToken spends a token of one of the given kinds and applies fn
// to its user, in one transaction: the token is spent only if the change is
// stored; the user's id, company, address and creation time stay as they
// were. With revokeSessions the user's refresh tokens are revoked as well.
// An unknown, used, expired or other-kind token, or one mailed under an earlier
// TokenGeneration of its user, answers ErrNotFound or ErrTokenExpired.
func (s *Store) ConsumeOneTimeToken(hash []byte, kinds []string, now time.Time, revokeSessions bool, fn func(*User) error) (User, error) {
	var u User
	err := s.update(func(tx *bolt.Tx) error {
		tokens := tx.Bucket(bucketOneTimeTokens)
		var t OneTimeToken
		if err := getJSON(tokens, hash, &t); err != nil {
			return err
		}
		kindOK := false
		for _, k := range kinds {
			kindOK = kindOK || k == t.Kind
		}
		if !kindOK || !t.UsedAt.IsZero() {
			return ErrNotFound
		}
		if !now.Before(t.ExpiresAt) {
			return ErrTokenExpired
		}
		users := tx.Bucket(bucketUsers)
		if err := getJSON(users, itob(t.UserID), &u); err != nil {
			return err
		}
		if t.Generation != u.TokenGeneration {
			return ErrNotFound // mailed before the user's latest password reset
		}
		before := u
		if err := fn(&u); err != nil {
			return err
		}
		// The address is kept in the e-mail indexes under the user's id
		// and company: fn changes neither them nor the address.
		u.ID, u.CompanyID, u.Email, u.CreatedAt = before.ID, before.CompanyID, before.Email, before.CreatedAt
		// An invitee who sets a password now holds the address (invites.go).
		if err := claimEmail(tx, u); err != nil {
			return err
		}
		t.UsedAt = now
		if err := putJSON(tokens, hash, t); err != nil {
			return err
		}
		if revokeSessions {
			if err := revokeUserFamilies(tx, u.ID); err != nil {
				return err
			}
		}
		return putJSON(users, itob(u.ID), &u)
	})
	if err != nil {
		return u, fmt.Errorf("store: consume token: %w", err)
	}
	return u, nil
}

// PruneTokens deletes refresh and one-time tokens that expired before cutoff,
// and returns how many it removed.
func (s *Store) PruneTokens(cutoff time.Time) (int, error) {
	n := 0
	err := s.update(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bucketRefreshTokens, bucketOneTimeTokens} {
			dropped, err := deleteWhere(tx.Bucket(name), func(_, v []byte) (bool, error) {
				var t struct {
					ExpiresAt time.Time `json:"expires_at"`
				}
				err := jsonUnmarshal(v, &t)
				return err == nil && t.ExpiresAt.Before(cutoff), err
			})
			if err != nil {
				return err
			}
			n += dropped
		}
		return nil
	})
	return n, err
}
