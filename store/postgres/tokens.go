package postgres

// Sign-in tokens: refresh-token families, one-time tokens, console
// sessions, and the server's secrets (the rules are in accounts.go).

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/simrelay/simrelay/store"
)

// StartRefreshFamily stores the first refresh token of a new login, with
// its family; a user who is not stored (a company removed since) is
// ErrNotFound.
func (s *Store) StartRefreshFamily(hash []byte, tok store.RefreshToken, now time.Time) error {
	fam, err := rec(store.TokenFamily{UserID: tok.UserID, CreatedAt: now})
	if err != nil {
		return err
	}
	raw, err := rec(tok)
	if err != nil {
		return err
	}
	return s.write("start refresh family", func(t *txn) error {
		if err := userStored(t, tok.UserID); err != nil {
			return err
		}
		if _, err := t.exec("INSERT INTO token_families (family, user_id, revoked, rec) VALUES ($1, $2, false, $3)", tok.Family, id(tok.UserID), fam); err != nil {
			return err
		}
		_, err := t.exec("INSERT INTO refresh_tokens (hash, family, expires_at, rec) VALUES ($1, $2, $3, $4)", hash, tok.Family, tok.ExpiresAt, raw)
		return err
	})
}

// RotateRefreshToken spends the token with oldHash and stores the next of
// its family, in one transaction, under the token's row lock. A token
// presented again revokes its family and answers ErrTokenReused (the spent
// token is returned, for the log); of racing refreshes with one token one
// wins. A token of a revoked family is ErrTokenRevoked, one past its
// expiry ErrTokenExpired.
func (s *Store) RotateRefreshToken(oldHash, newHash []byte, newExpiry, now time.Time) (store.RefreshToken, error) {
	var old store.RefreshToken
	var outcome error
	err := s.write("rotate refresh token", func(t *txn) error {
		old, outcome = store.RefreshToken{}, nil
		if err := getRec(t, &old, "SELECT rec FROM refresh_tokens WHERE hash = $1 FOR UPDATE", oldHash); err != nil {
			return err
		}
		var revoked bool
		if err := t.row("SELECT revoked FROM token_families WHERE family = $1 FOR UPDATE", old.Family).Scan(&revoked); err != nil {
			return mapErr(err)
		}
		switch {
		case revoked:
			outcome = store.ErrTokenRevoked
			return nil
		case !old.UsedAt.IsZero():
			outcome = store.ErrTokenReused
			_, err := t.exec(`UPDATE token_families SET revoked = true, rec = jsonb_set(rec, '{revoked}', 'true') WHERE family = $1`, old.Family)
			return err
		case !now.Before(old.ExpiresAt):
			outcome = store.ErrTokenExpired
			return nil
		}
		spent := old
		spent.UsedAt = now
		raw, err := rec(spent)
		if err != nil {
			return err
		}
		if _, err := t.exec("UPDATE refresh_tokens SET rec = $2 WHERE hash = $1", oldHash, raw); err != nil {
			return err
		}
		next := store.RefreshToken{UserID: old.UserID, Family: old.Family, ExpiresAt: newExpiry, Generation: old.Generation}
		if raw, err = rec(next); err != nil {
			return err
		}
		_, err = t.exec("INSERT INTO refresh_tokens (hash, family, expires_at, rec) VALUES ($1, $2, $3, $4)", newHash, next.Family, next.ExpiresAt, raw)
		return err
	})
	if err == nil && outcome != nil {
		err = fmt.Errorf("store: rotate refresh token: %w", outcome)
	}
	return old, err
}

// revokeUser ends every session of a user: its refresh families are
// revoked (their tokens are refused as such until pruned), its console
// sessions and its unused pairing codes deleted.
func revokeUser(t *txn, userID uint64) error {
	if _, err := t.exec(`UPDATE token_families SET revoked = true, rec = jsonb_set(rec, '{revoked}', 'true')
		WHERE user_id = $1 AND NOT revoked`, id(userID)); err != nil {
		return err
	}
	// The pairing codes the user made that no phone used yet (not the API
	// key's made in their name; store.Pairing). A registration holds its
	// code's row (FOR UPDATE) until it commits: it pairs before this or
	// finds no code. The table holds the codes of about the last day
	// (PrunePairings), so the scan is short; this runs on a removal or a
	// password set through a mailed link.
	if _, err := t.exec(`DELETE FROM pairings WHERE (rec->>'user_id')::bigint = $1 AND NOT `+pairingViaAPIKey+` AND rec->>'used_at' IS NULL`, id(userID)); err != nil {
		return err
	}
	_, err := t.exec("DELETE FROM console_sessions WHERE user_id = $1", id(userID))
	return err
}

// RevokeUserSessions revokes every refresh token family of a user and
// signs every browser of the user out.
func (s *Store) RevokeUserSessions(userID uint64) error {
	return s.write(fmt.Sprintf("revoke sessions of user %d", userID), func(t *txn) error { return revokeUser(t, userID) })
}

// PutOneTimeToken stores an e-mailed token by its hash; a user who is not
// stored is ErrNotFound.
func (s *Store) PutOneTimeToken(hash []byte, tok store.OneTimeToken) error {
	raw, err := rec(tok)
	if err != nil {
		return err
	}
	return s.write("put one-time token", func(t *txn) error {
		// The user's row, shared: the prune of an abandoned sign-up, which
		// holds it while it reads the owner's live links and removes the
		// company, ends before the link is stored, or reads it; so does a
		// company's removal (userStored).
		if err := userStored(t, tok.UserID); err != nil {
			return err
		}
		_, err := t.exec("INSERT INTO one_time_tokens (hash, expires_at, rec) VALUES ($1, $2, $3)", hash, tok.ExpiresAt, raw)
		return err
	})
}

// ConsumeOneTimeToken spends a token of one of the given kinds and applies
// fn to its user, in one transaction under the token's row lock: the token
// is spent only if the change is stored, and once. fn may run more than
// once; the user's id, company, address and creation time stay as they
// were. A user who has a password afterwards holds its address (an
// accepted invitation): ErrConflict when another account took it. With
// revokeSessions the user's sessions end too. An unknown, used or
// other-kind token, or one mailed under an earlier TokenGeneration of its
// user, is ErrNotFound, an expired one ErrTokenExpired.
func (s *Store) ConsumeOneTimeToken(hash []byte, kinds []string, now time.Time, revokeSessions bool, fn func(*store.User) error) (store.User, error) {
	var u store.User
	err := s.write("consume token", func(t *txn) error {
		var tok store.OneTimeToken
		if err := getRec(t, &tok, "SELECT rec FROM one_time_tokens WHERE hash = $1 FOR UPDATE", hash); err != nil {
			return err
		}
		if !slices.Contains(kinds, tok.Kind) || !tok.UsedAt.IsZero() {
			return store.ErrNotFound
		}
		if !now.Before(tok.ExpiresAt) {
			return store.ErrTokenExpired
		}
		var err error
		if u, err = lockUser(t, tok.UserID); err != nil {
			return err
		}
		if tok.Generation != u.TokenGeneration {
			return store.ErrNotFound // mailed before the user's latest password reset
		}
		before := u
		if err := fn(&u); err != nil {
			return err
		}
		u.ID, u.CompanyID, u.Email, u.CreatedAt = before.ID, before.CompanyID, before.Email, before.CreatedAt
		if err := putUser(t, u, u.PasswordHash != ""); err != nil {
			return err
		}
		tok.UsedAt = now
		raw, err := rec(tok)
		if err != nil {
			return err
		}
		if _, err := t.exec("UPDATE one_time_tokens SET rec = $2 WHERE hash = $1", hash, raw); err != nil {
			return err
		}
		if revokeSessions {
			return revokeUser(t, u.ID)
		}
		return nil
	})
	return u, err
}

// PruneTokens deletes refresh and one-time tokens that expired before
// cutoff, used or not, and returns how many it removed.
func (s *Store) PruneTokens(cutoff time.Time) (int, error) {
	n := 0
	for _, table := range []string{"refresh_tokens", "one_time_tokens"} {
		m, err := s.pruneBatches("prune "+table, func(t *txn, limit int) (int, error) {
			return deleteSome(t, table, "expires_at < $2", limit, cutoff)
		})
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// PruneTokenFamilies drops refresh-token families that have no token left
// (PruneTokens drops expired ones). A family with a token stays, revoked or
// not, so that token is still refused as its family says.
func (s *Store) PruneTokenFamilies() (int, error) {
	return s.pruneBatches("prune token families", func(t *txn, limit int) (int, error) {
		return deleteSome(t, "token_families f", "NOT EXISTS (SELECT 1 FROM refresh_tokens r WHERE r.family = f.family)", limit)
	})
}

// PutConsoleSession stores a new console session under the hash of its
// id; a user who is not stored (a company removed since) is ErrNotFound.
func (s *Store) PutConsoleSession(hash []byte, sess store.ConsoleSession) error {
	raw, err := rec(sess)
	if err != nil {
		return err
	}
	return s.write("put console session", func(t *txn) error {
		if err := userStored(t, sess.UserID); err != nil {
			return err
		}
		_, err := t.exec("INSERT INTO console_sessions (hash, user_id, seen_at, expires_at, rec) VALUES ($1, $2, $3, $4, $5)",
			hash, id(sess.UserID), sess.SeenAt, sess.ExpiresAt, raw)
		return err
	})
}

// ConsoleSession returns a session by the hash of its id (ErrNotFound when
// absent, signed out or revoked).
func (s *Store) ConsoleSession(hash []byte) (store.ConsoleSession, error) {
	var sess store.ConsoleSession
	err := s.read("console session", func(t *txn) error {
		sess = store.ConsoleSession{}
		return getRec(t, &sess, "SELECT rec FROM console_sessions WHERE hash = $1", hash)
	})
	return sess, err
}

// TouchConsoleSession moves a session's last activity to at, in one
// statement; a session that is gone stays gone, and one seen after at
// keeps its later time (two requests' touches may commit in either
// order).
func (s *Store) TouchConsoleSession(hash []byte, at time.Time) error {
	seen, err := json.Marshal(at)
	if err != nil {
		return err
	}
	return s.write("touch console session", func(t *txn) error {
		_, err := t.exec("UPDATE console_sessions SET seen_at = $2, rec = jsonb_set(rec, '{seen_at}', $3::jsonb) WHERE hash = $1 AND seen_at < $2", hash, at, seen)
		return err
	})
}

// DeleteConsoleSession signs one browser out; one already out is no error.
func (s *Store) DeleteConsoleSession(hash []byte) error {
	return s.write("delete console session", func(t *txn) error {
		_, err := t.exec("DELETE FROM console_sessions WHERE hash = $1", hash)
		return err
	})
}

// PruneConsoleSessions deletes sessions idle since before idleCutoff or at
// their absolute end at now, and returns how many it removed.
func (s *Store) PruneConsoleSessions(idleCutoff, now time.Time) (int, error) {
	return s.pruneBatches("prune console sessions", func(t *txn, limit int) (int, error) {
		return deleteSome(t, "console_sessions", "seen_at < $2 OR expires_at <= $3", limit, idleCutoff, now)
	})
}

// Secret returns the named server secret, made of size random bytes by the
// first node to ask; every node gets the same bytes after, even nodes that
// ask first at the same time.
func (s *Store) Secret(name string, size int) ([]byte, error) {
	fresh := make([]byte, size)
	if _, err := rand.Read(fresh); err != nil {
		return nil, fmt.Errorf("store: secret %s: %w", name, err)
	}
	var out []byte
	err := s.write("secret "+name, func(t *txn) error {
		if _, err := t.exec("INSERT INTO secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING", name, fresh); err != nil {
			return err
		}
		return mapErr(t.row("SELECT value FROM secrets WHERE name = $1", name).Scan(&out))
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
