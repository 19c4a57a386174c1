package postgres

// Accounts: companies and their API keys, users and invitations,
// refresh-token families, one-time tokens, console sessions and the
// server's secrets (migrations/0003_accounts.sql); the tokens, sessions
// and secrets are in tokens.go.
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
// came (the unique index; boltstore's company_emails): CreateUser of a
// pending invitee's address in the same company is ErrConflict, in both.
// Secrets live in the secrets table, made by the first node to ask.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

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

// DeviceCompany returns the company of one of its live devices, for what
// the device's link does on its behalf (an inbound message, the numbers of
// a hello, read in the company's region), in one statement. It is
// store.ErrDeviceGone, and only then, when the device is not a live
// registration of the company (deleted, or an id of another company), or
// the company is not stored (its removal took its record) or is closing
// (MarkCompanyClosing): the phone is told what a deleted device's is. Any
// other error is the store's fault, never a removal; in particular a
// missing company is not store.ErrNotFound here.
func (s *Store) DeviceCompany(companyID, deviceID uint64) (store.Company, error) {
	var c store.Company
	err := s.read(fmt.Sprintf("company %d of device %d", companyID, deviceID), func(t *txn) error {
		c = store.Company{}
		var raw []byte
		err := t.row(`SELECT c.rec FROM `+openCompanyDevice, id(companyID), id(deviceID)).Scan(&raw)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return store.ErrDeviceGone
		case err != nil:
			return mapErr(err)
		}
		return json.Unmarshal(raw, &c)
	})
	return c, err
}

// CompanyByAPIKeyHash returns the company whose current API key has this
// hash. A company closing (MarkCompanyClosing) is ErrNotFound: its key is
// refused from the mark on, though the removal's first step has not taken
// it yet (or failed, and is tried again later).
func (s *Store) CompanyByAPIKeyHash(hash []byte) (store.Company, error) {
	var c store.Company
	err := s.read("company by api key", func(t *txn) error {
		c = store.Company{}
		return getRec(t, &c, "SELECT rec FROM companies WHERE api_key_hash = $1 AND NOT rec ? 'closing_at'", hash)
	})
	return c, err
}

// UpdateCompany applies fn to a company under its row lock and stores the
// result. fn must only change the record; it may run more than once. A
// changed API key hash moves the key's lookup in the same commit (the old
// key is refused on every node from then on) and adds the rotation to the
// company's activity. An e-mail device that fn changes to one the company
// has no live device of is store.ErrEmailDeviceGone. The device is read
// under the company's lock, unlocked: a deletion of it that commits after
// this read waits for this commit at the company's row (DeleteDevice), and
// then clears the setting this writes. A company closing
// (MarkCompanyClosing) is store.ErrNotFound, as one removed: a key rotated
// by a request that checked its credential before the removal took the
// company's would work until the removal's next step.
func (s *Store) UpdateCompany(companyID uint64, fn func(*store.Company) error) (store.Company, error) {
	var c store.Company
	err := s.write(fmt.Sprintf("update company %d", companyID), func(t *txn) error {
		c = store.Company{}
		if err := getRec(t, &c, "SELECT rec FROM companies WHERE id = $1 FOR UPDATE", id(companyID)); err != nil {
			return err
		}
		if !c.ClosingAt.IsZero() {
			return fmt.Errorf("company %d is closing: %w", companyID, store.ErrNotFound)
		}
		oldHash, oldEmailDevice := bytes.Clone(c.APIKeyHash), c.EmailDevice
		if err := fn(&c); err != nil {
			return err
		}
		c.ID = companyID
		if c.EmailDevice != "" && c.EmailDevice != oldEmailDevice {
			if _, err := liveDevice(t, companyID, c.EmailDevice, false); errors.Is(err, store.ErrDeviceGone) {
				return store.ErrEmailDeviceGone
			} else if err != nil {
				return err
			}
		}
		raw, err := rec(c)
		if err != nil {
			return err
		}
		if _, err := t.exec("UPDATE companies SET api_key_hash = $2, rec = $3 WHERE id = $1", id(companyID), c.APIKeyHash, raw); err != nil {
			return err
		}
		if len(oldHash) > 0 && !bytes.Equal(oldHash, c.APIKeyHash) {
			// The pairing codes the old key made end with it (store.Pairing).
			if _, err := t.exec(`DELETE FROM pairings WHERE company_id = $1 AND `+pairingViaAPIKey+` AND rec->>'used_at' IS NULL`, id(companyID)); err != nil {
				return err
			}
			return addActivity(t, companyID, store.Activity{Type: store.ActAPIKeyRotated, At: c.APIKeyCreatedAt, Description: "The API key was rotated; the previous key no longer works"})
		}
		return nil
	})
	return c, err
}

// GoneCompanies answers, of the companies given, those not stored (their
// removal ended), in ascending order: one query, a primary key lookup per
// company. A company closing is stored until its removal's last step.
func (s *Store) GoneCompanies(companyIDs []uint64) ([]uint64, error) {
	if len(companyIDs) == 0 {
		return nil, nil
	}
	ids := make([]int64, len(companyIDs))
	for i, id := range companyIDs {
		ids[i] = int64(id)
	}
	var gone []uint64
	err := s.read("companies gone", func(t *txn) error {
		gone = nil // a retried read starts over
		rows, err := t.query(`SELECT DISTINCT g.id FROM unnest($1::bigint[]) AS g(id)
			WHERE NOT EXISTS (SELECT 1 FROM companies c WHERE c.id = g.id) ORDER BY g.id`, ids)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				return err
			}
			gone = append(gone, uint64(id))
		}
		return rows.Err()
	})
	return gone, err
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

// User returns one user. A user of a company closing (MarkCompanyClosing)
// is ErrNotFound: every sign-in of the company (an access token, a console
// session, a refresh) is refused from the mark on, though the removal's
// first step has not taken its users yet (or failed).
func (s *Store) User(userID uint64) (store.User, error) {
	var u store.User
	err := s.read(fmt.Sprintf("user %d", userID), func(t *txn) error {
		u = store.User{}
		return getRec(t, &u, `SELECT u.rec FROM users u JOIN companies c ON c.id = u.company_id
			WHERE u.id = $1 AND NOT c.rec ? 'closing_at'`, id(userID))
	})
	return u, err
}

// UserByEmail finds the account that holds an address, ignoring case; a
// pending invitee holds none. A user of a company closing
// (MarkCompanyClosing) is ErrNotFound, as for User: no login or reset
// finds the account from the mark on. The address stays held until the
// removal's first step takes it: CreateCompany and an invitee's claim of
// it are ErrConflict until then.
func (s *Store) UserByEmail(email string) (store.User, error) {
	var u store.User
	err := s.read("user by email", func(t *txn) error {
		u = store.User{}
		return getRec(t, &u, `SELECT u.rec FROM users u JOIN companies c ON c.id = u.company_id
			WHERE u.email = $1 AND u.held AND NOT c.rec ? 'closing_at'`, emailKey(email))
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
// sessions (refresh families revoked, console sessions deleted) and the
// pairing codes it made that no phone used yet (a code is its maker's
// credential; revokeUser). Removing the last admin of a company fails with
// ErrLastAdmin.
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
		// An address the company has already is told as such, before the
		// count: at the cap it would otherwise read as "remove one first".
		var n int
		var there bool
		if err := t.row("SELECT count(*), bool_or(email = $2) IS TRUE FROM users WHERE company_id = $1", id(u.CompanyID), emailKey(u.Email)).Scan(&n, &there); err != nil {
			return err
		}
		if there {
			return store.ErrConflict
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
		// The inviter is named by the address the record holds (the
		// column is the lower-cased key), as the embedded store does.
		// The inviter travels in rec (invited_by) like the record's other
		// fields: no column, since nothing looks users up by it.
		var by string
		if u.InvitedBy != 0 {
			err := t.row("SELECT rec->>'email' FROM users WHERE id = $1 AND company_id = $2", id(u.InvitedBy), id(u.CompanyID)).Scan(&by)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
		}
		return addActivity(t, u.CompanyID, store.InviteActivity(*u, by))
	})
	if err != nil {
		u.ID = 0
		return false, err
	}
	return heldElsewhere, nil
}
