package postgres

// Accounts: companies and their API keys, users and invitations,
// refresh-token families, one-time tokens, console sessions and the
// server's secrets (migrations/0003_accounts.sql).
//
// Who holds an address. users.email is every user's address (lower case);
// users.held says whether the user holds it on the whole server, as
// boltstore's users_by_email index does: a partial unique index allows one
// holder per address, and another allows an address once per company.
// InviteUser writes held false; ConsumeOneTimeToken sets it once the
// invitee has a password, which is ErrConflict when an account took the
// address meanwhile.
//
// The last admin. UpdateUser and DeleteUser lock the user's row, then,
// when the change would take an admin away, the company's row, and count
// the other admins who can sign in after that lock: two admins demoted or
// removed at once cannot both pass.
//
// Tokens. A refresh token is spent under its row's lock, so of many
// refreshes with one token the first wins and the others, reading the row
// it committed, find it used and revoke the family (ErrTokenReused). A
// one-time token is spent the same way. Lock order, everywhere: a token,
// then its user, then the company, then the user's families and sessions.
//
// Versus the embedded store: a token, a console session or a refresh
// family is written once under its hash (or id), where boltstore's Put
// would overwrite one of the same hash: the values are random, so only a
// bug could collide, and then a spent token is never brought back
// (ErrConflict). For the same reason an API key hash another company uses
// is ErrConflict in UpdateCompany (boltstore would move that company's
// lookup). An address is there once per company whichever way the user
// came (the unique index): CreateUser of a pending invitee's address in
// the same company is ErrConflict, which boltstore, checking only in
// InviteUser, would let through. Secrets live in the secrets table, made
// by the first node to ask.

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/simrelay/simrelay/store"
)

// Company returns one company.
func (s *Store) Company(companyID uint64) (store.Company, error) {
	var c store.Company
	err := s.read(fmt.Sprintf("company %d", companyID), func(t *txn) error {
		c = store.Company{}
		return getRec(t, &c, "SELECT rec FROM companies WHERE id = $1", id(companyID))
	})
	return c, err
}

// CompanyByAPIKeyHash returns the company whose current API key has this hash.
func (s *Store) CompanyByAPIKeyHash(hash []byte) (store.Company, error) {
	var c store.Company
	err := s.read("company by api key", func(t *txn) error {
		c = store.Company{}
		return getRec(t, &c, "SELECT rec FROM companies WHERE api_key_hash = $1", hash)
	})
	return c, err
}

// UpdateCompany applies fn to a company under its row lock and stores the
// result. fn must only change the record; it may run more than once. A
// changed API key hash moves the key's lookup in the same commit (the old
// key is refused on every node from then on) and adds the rotation to the
// company's activity.
func (s *Store) UpdateCompany(companyID uint64, fn func(*store.Company) error) (store.Company, error) {
	var c store.Company
	err := s.write(fmt.Sprintf("update company %d", companyID), func(t *txn) error {
		c = store.Company{}
		if err := getRec(t, &c, "SELECT rec FROM companies WHERE id = $1 FOR UPDATE", id(companyID)); err != nil {
			return err
		}
		oldHash := bytes.Clone(c.APIKeyHash)
		if err := fn(&c); err != nil {
			return err
		}
		c.ID = companyID
		raw, err := rec(c)
		if err != nil {
			return err
		}
		if _, err := t.exec("UPDATE companies SET api_key_hash = $2, rec = $3 WHERE id = $1", id(companyID), c.APIKeyHash, raw); err != nil {
			return err
		}
		if len(oldHash) > 0 && !bytes.Equal(oldHash, c.APIKeyHash) {
			return addActivity(t, companyID, store.Activity{Type: store.ActAPIKeyRotated, At: c.APIKeyCreatedAt, Description: "The API key was rotated; the previous key no longer works"})
		}
		return nil
	})
	return c, err
}

// CompanyIDs lists every company id, oldest first.
func (s *Store) CompanyIDs() ([]uint64, error) {
	var ids []uint64
	err := s.read("company ids", func(t *txn) error {
		ids = nil
		rows, err := t.query("SELECT id FROM companies ORDER BY id")
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var n int64
			if err := rows.Scan(&n); err != nil {
				return err
			}
			ids = append(ids, uint64(n))
		}
		return rows.Err()
	})
	return ids, err
}

// CreateUser stores a new user of an existing company (ErrNotFound
// otherwise), holding its address; an address in use is ErrConflict.
func (s *Store) CreateUser(u *store.User) error {
	return s.write("create user", func(t *txn) error {
		if err := lockCompany(t, u.CompanyID); err != nil {
			return err
		}
		return insertUser(t, u)
	})
}

// User returns one user.
func (s *Store) User(userID uint64) (store.User, error) {
	var u store.User
	err := s.read(fmt.Sprintf("user %d", userID), func(t *txn) error {
		u = store.User{}
		return getRec(t, &u, "SELECT rec FROM users WHERE id = $1", id(userID))
	})
	return u, err
}

// UserByEmail finds the account that holds an address, ignoring case; a
// pending invitee holds none.
func (s *Store) UserByEmail(email string) (store.User, error) {
	var u store.User
	err := s.read("user by email", func(t *txn) error {
		u = store.User{}
		return getRec(t, &u, "SELECT rec FROM users WHERE email = $1 AND held", emailKey(email))
	})
	return u, err
}

// CompanyUsers lists a company's users, pending invitees included, oldest first.
func (s *Store) CompanyUsers(companyID uint64) ([]store.User, error) {
	var us []store.User
	err := s.read(fmt.Sprintf("users of company %d", companyID), func(t *txn) error {
		var err error
		us, err = getRecs[store.User](t, "SELECT rec FROM users WHERE company_id = $1 ORDER BY id", id(companyID))
		return err
	})
	return us, err
}

// keepsAdmin refuses with ErrLastAdmin when taking the user away as an
// admin would leave the company with no admin who can sign in (an invited
// admin without a password does not count). It takes the company's row
// lock first, so the count holds until the transaction ends.
func keepsAdmin(t *txn, u store.User) error {
	if err := lockCompany(t, u.CompanyID); err != nil {
		return err
	}
	var others int64
	err := t.row(`SELECT count(*) FROM users WHERE company_id = $1 AND id <> $2
		AND rec->>'role' = $3 AND coalesce(rec->>'password_hash', '') <> ''`,
		id(u.CompanyID), id(u.ID), store.RoleAdmin).Scan(&others)
	if err != nil {
		return err
	}
	if others == 0 {
		return store.ErrLastAdmin
	}
	return nil
}

// lockUser reads a user under its row lock.
func lockUser(t *txn, userID uint64) (store.User, error) {
	var u store.User
	err := getRec(t, &u, "SELECT rec FROM users WHERE id = $1 FOR UPDATE", id(userID))
	return u, err
}

// putUser writes a user's record; claim makes the user hold its address
// (ErrConflict when another account holds it).
func putUser(t *txn, u store.User, claim bool) error {
	raw, err := rec(u)
	if err != nil {
		return err
	}
	if claim {
		_, err = t.exec("UPDATE users SET held = true, rec = $2 WHERE id = $1", id(u.ID), raw)
	} else {
		_, err = t.exec("UPDATE users SET rec = $2 WHERE id = $1", id(u.ID), raw)
	}
	return err
}

// UpdateUser applies fn to a user under its row lock and stores the
// result; fn may run more than once. The id, company, address and creation
// time stay as they were. A demotion that would leave the company without
// an admin fails with ErrLastAdmin.
func (s *Store) UpdateUser(userID uint64, fn func(*store.User) error) (store.User, error) {
	var u store.User
	err := s.write(fmt.Sprintf("update user %d", userID), func(t *txn) error {
		var err error
		if u, err = lockUser(t, userID); err != nil {
			return err
		}
		before := u
		if err := fn(&u); err != nil {
			return err
		}
		u.ID, u.CompanyID, u.Email, u.CreatedAt = before.ID, before.CompanyID, before.Email, before.CreatedAt
		if before.Role == store.RoleAdmin && u.Role != store.RoleAdmin {
			if err := keepsAdmin(t, u); err != nil {
				return err
			}
		}
		return putUser(t, u, false)
	})
	return u, err
}

// DeleteUser removes a user, freeing the address it holds, and ends its
// sessions (refresh families revoked, console sessions deleted). Removing
// the last admin of a company fails with ErrLastAdmin.
func (s *Store) DeleteUser(userID uint64) error {
	return s.write(fmt.Sprintf("delete user %d", userID), func(t *txn) error {
		u, err := lockUser(t, userID)
		if err != nil {
			return err
		}
		if u.Role == store.RoleAdmin {
			if err := keepsAdmin(t, u); err != nil {
				return err
			}
		}
		if err := revokeUser(t, userID); err != nil {
			return err
		}
		_, err = t.exec("DELETE FROM users WHERE id = $1", id(userID))
		return err
	})
}

// InviteUser stores a user invited into an existing company, without a
// password and holding no address. Within the company an address is there
// once (ErrConflict: a member or a pending invitee, whatever the case).
// heldElsewhere says whether another account holds the address now; it
// chooses the invitation mail's wording and must not reach the inviting
// company. The invitation counts against the company's daily storage
// budget (a *store.BudgetError when spent) and enters its activity. A
// company that has store.MaxUsers users gets store.ErrTooManyUsers.
func (s *Store) InviteUser(u *store.User, now time.Time) (heldElsewhere bool, err error) {
	err = s.write("invite user", func(t *txn) error {
		if err := lockCompany(t, u.CompanyID); err != nil {
			return err
		}
		// The company's row lock above orders invitations of one company, so
		// the count cannot be passed by two at once.
		var n int
		if err := t.row("SELECT count(*) FROM users WHERE company_id = $1", id(u.CompanyID)).Scan(&n); err != nil {
			return err
		}
		if n >= store.MaxUsers {
			return store.ErrTooManyUsers
		}
		if err := s.charge(t, u.CompanyID, now, store.InvitationCost); err != nil {
			return err
		}
		key := emailKey(u.Email)
		if err := t.row("SELECT EXISTS (SELECT 1 FROM users WHERE email = $1 AND held)", key).Scan(&heldElsewhere); err != nil {
			return err
		}
		uid, err := nextID(t, "users")
		if err != nil {
			return err
		}
		u.ID = uid
		raw, err := rec(u)
		if err != nil {
			return err
		}
		if _, err := t.exec("INSERT INTO users (id, company_id, email, held, rec) VALUES ($1, $2, $3, false, $4)", id(uid), id(u.CompanyID), key, raw); err != nil {
			return err
		}
		return addActivity(t, u.CompanyID, store.Activity{Type: store.ActUserInvited, At: u.CreatedAt, Description: store.ActivityName(u.Email) + " invited as " + u.Role})
	})
	if err != nil {
		u.ID = 0
		return false, err
	}
	return heldElsewhere, nil
}

// StartRefreshFamily stores the first refresh token of a new login, with
// its family.
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
// revoked (their tokens are refused as such until pruned) and its console
// sessions deleted.
func revokeUser(t *txn, userID uint64) error {
	if _, err := t.exec(`UPDATE token_families SET revoked = true, rec = jsonb_set(rec, '{revoked}', 'true')
		WHERE user_id = $1 AND NOT revoked`, id(userID)); err != nil {
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

// PutOneTimeToken stores an e-mailed token by its hash.
func (s *Store) PutOneTimeToken(hash []byte, tok store.OneTimeToken) error {
	raw, err := rec(tok)
	if err != nil {
		return err
	}
	return s.write("put one-time token", func(t *txn) error {
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
	var n int
	err := s.write("prune tokens", func(t *txn) error {
		n = 0
		for _, table := range []string{"refresh_tokens", "one_time_tokens"} {
			tag, err := t.exec("DELETE FROM "+table+" WHERE expires_at < $1", cutoff)
			if err != nil {
				return err
			}
			n += int(tag.RowsAffected())
		}
		return nil
	})
	return n, err
}

// PruneTokenFamilies drops refresh-token families that have no token left
// (PruneTokens drops expired ones). A family with a token stays, revoked or
// not, so that token is still refused as its family says.
func (s *Store) PruneTokenFamilies() (int, error) {
	var n int
	err := s.write("prune token families", func(t *txn) error {
		tag, err := t.exec("DELETE FROM token_families f WHERE NOT EXISTS (SELECT 1 FROM refresh_tokens r WHERE r.family = f.family)")
		n = int(tag.RowsAffected())
		return err
	})
	return n, err
}

// PutConsoleSession stores a new console session under the hash of its id.
func (s *Store) PutConsoleSession(hash []byte, sess store.ConsoleSession) error {
	raw, err := rec(sess)
	if err != nil {
		return err
	}
	return s.write("put console session", func(t *txn) error {
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
// statement; a session that is gone stays gone.
func (s *Store) TouchConsoleSession(hash []byte, at time.Time) error {
	seen, err := json.Marshal(at)
	if err != nil {
		return err
	}
	return s.write("touch console session", func(t *txn) error {
		_, err := t.exec("UPDATE console_sessions SET seen_at = $2, rec = jsonb_set(rec, '{seen_at}', $3::jsonb) WHERE hash = $1", hash, at, seen)
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
	var n int
	err := s.write("prune console sessions", func(t *txn) error {
		tag, err := t.exec("DELETE FROM console_sessions WHERE seen_at < $1 OR expires_at <= $2", idleCutoff, now)
		n = int(tag.RowsAffected())
		return err
	})
	return n, err
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
