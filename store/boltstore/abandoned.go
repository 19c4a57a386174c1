package boltstore

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/simrelay/simrelay/store"
)

// notCompanyKeyed are the buckets whose keys do not begin with a company
// id: an abandoned sign-up is looked for in every other bucket by its
// company id as a key prefix (abandonedSignup), so a bucket added later is
// looked in without a change here. A bucket left out of this list by
// mistake only keeps a company (an id of another kind that begins a key
// reads as the company's record), never removes one.
var notCompanyKeyed = func() map[string]bool {
	m := map[string]bool{}
	for _, b := range [][]byte{
		bucketMeta, bucketCompanies, bucketAPIKeys, bucketUsers, bucketUsersByEmail, bucketRefreshTokens,
		bucketTokenFamilies, bucketUserFamilies, bucketOneTimeTokens, bucketMailOutbox, bucketPairings,
		bucketDevices, bucketDeviceTokens, bucketMessages, bucketMessageUUIDs, bucketQueueExpiry,
		bucketScheduleDue, bucketBillingEvents, bucketCustomers, bucketMedia, bucketMediaChunks,
		bucketMediaOrphans, bucketWebhookEvents, bucketWebhookEventRefs, bucketWebhookDeliveries,
		bucketWebhookDue, bucketConsoleSessions, bucketUserConsoleSess, bucketAgentNumberIDs,
		bucketMailCompany, // keyed by company, but its mails are not (bucketMailCompany)
	} {
		m[string(b)] = true
	}
	// The owner's own entries, which the removal takes.
	m[string(bucketCompanyUsers)], m[string(bucketCompanyEmails)] = true, true
	return m
}()

// PruneAbandonedSignups removes the abandoned sign-ups (store.AbandonedSignup)
// created before cutoff among at most limit companies whose ids follow
// after, in id order, each with every record of it. It looks for them in
// a read transaction, so a batch with none never holds the file's single
// writer that every send, ack and inbound message waits on; a batch with
// some is removed in one write transaction that checks each again first:
// the check that a company is still abandoned and its removal are one
// commit, so a verification that commits first keeps the company. now
// tells a live one-time token of the owner from an expired one. It
// returns how many it removed and the id of the last company it looked
// at, 0 once none is left after it. A company whose member entry names no
// user record (errOwnerMissing) is kept, and logged (Options.Logger): once
// a pass over the companies, which looks at each in one batch.
func (s *Store) PruneAbandonedSignups(cutoff, now time.Time, after uint64, limit int) (removed int, last uint64, err error) {
	var candidates []uint64
	var missing []User
	err = s.view(func(tx *bolt.Tx) error {
		candidates, missing, last = nil, nil, 0
		live := liveTokens(tx, now)
		c := tx.Bucket(bucketCompanies).Cursor()
		seen := 0
		for k, v := c.Seek(itob(after + 1)); k != nil && seen < limit; k, v = c.Next() {
			seen++
			last = btoi(k)
			var co Company
			if err := jsonUnmarshal(v, &co); err != nil {
				return err
			}
			u, ok, err := abandonedSignup(tx, co, cutoff, live)
			switch {
			case errors.Is(err, errOwnerMissing):
				missing = append(missing, u)
			case err != nil:
				return err
			case ok:
				candidates = append(candidates, co.ID)
			}
		}
		if seen < limit {
			last = 0
		}
		return nil
	})
	if err == nil && s.log != nil {
		for _, u := range missing {
			s.log.Warn("prune abandoned sign-ups: a member entry of the company names a user whose record is not there; the company is kept",
				"company_id", u.CompanyID, "user_id", u.ID)
		}
	}
	if err == nil && len(candidates) > 0 {
		err = s.update(func(tx *bolt.Tx) (err error) {
			removed, err = removeAbandoned(tx, candidates, cutoff, now)
			return err
		})
	}
	if err != nil {
		return 0, 0, fmt.Errorf("store: prune abandoned sign-ups: %w", err)
	}
	return removed, last, nil
}

// removeAbandoned removes those of the companies ids that are still
// abandoned sign-ups, checking each again in tx (a verification, a second
// user or a device may have come since they were found), and returns how
// many it removed.
func removeAbandoned(tx *bolt.Tx, ids []uint64, cutoff, now time.Time) (int, error) {
	var gone []User
	live := liveTokens(tx, now)
	companies := tx.Bucket(bucketCompanies)
	for _, id := range ids {
		v := companies.Get(itob(id))
		if v == nil {
			continue
		}
		var co Company
		if err := jsonUnmarshal(v, &co); err != nil {
			return 0, err
		}
		u, ok, err := abandonedSignup(tx, co, cutoff, live)
		if err != nil && !errors.Is(err, errOwnerMissing) {
			return 0, err
		}
		if ok {
			gone = append(gone, u)
		}
	}
	for _, u := range gone {
		if err := removeSignup(tx, u); err != nil {
			return 0, err
		}
	}
	if len(gone) > 0 {
		users := map[uint64]bool{}
		for _, u := range gone {
			users[u.ID] = true
		}
		if _, err := deleteWhere(tx.Bucket(bucketOneTimeTokens), func(_, v []byte) (bool, error) {
			var t OneTimeToken
			err := jsonUnmarshal(v, &t)
			return err == nil && users[t.UserID], err
		}); err != nil {
			return 0, err
		}
	}
	return len(gone), nil
}

// liveTokens answers whether a user holds a one-time token not yet
// expired at now and not used: a verification, reset or invitation link
// that can still be followed. It reads the tokens of tx once, on the
// first question: a batch whose owners are all verified, or that has no
// sign-up old enough, decodes none.
func liveTokens(tx *bolt.Tx, now time.Time) func(user uint64) (bool, error) {
	var live map[uint64]bool
	return func(user uint64) (bool, error) {
		if live == nil {
			m := map[uint64]bool{}
			if err := tx.Bucket(bucketOneTimeTokens).ForEach(func(_, v []byte) error {
				var t OneTimeToken
				if err := jsonUnmarshal(v, &t); err != nil {
					return err
				}
				if t.UsedAt.IsZero() && now.Before(t.ExpiresAt) {
					m[t.UserID] = true
				}
				return nil
			}); err != nil {
				return false, err
			}
			live = m
		}
		return live[user], nil
	}
}

// errOwnerMissing is abandonedSignup's answer for a company whose one
// member entry names a user whose record is not there: a damaged store,
// not an abandoned sign-up. The prune keeps the company and goes on with
// the others.
var errOwnerMissing = errors.New("a member entry of the company names no user record")

// abandonedSignup says whether co is an abandoned sign-up created before
// cutoff (store.AbandonedSignup), and returns its owner; errOwnerMissing,
// with the owner's ids alone, when the owner's record is not there.
func abandonedSignup(tx *bolt.Tx, co Company, cutoff time.Time, live func(user uint64) (bool, error)) (User, bool, error) {
	var u User
	if !co.CreatedAt.Before(cutoff) || !co.APIKeyCreatedAt.Equal(co.CreatedAt) {
		return u, false, nil
	}
	prefix := itob(co.ID)
	members := tx.Bucket(bucketCompanyUsers).Cursor()
	k, _ := members.Seek(prefix)
	if k == nil || !bytes.HasPrefix(k, prefix) || len(k) != 16 {
		return u, false, nil
	}
	if k2, _ := members.Next(); k2 != nil && bytes.HasPrefix(k2, prefix) {
		return u, false, nil // a second user, or a pending invitation
	}
	if err := getJSON(tx.Bucket(bucketUsers), k[8:], &u); errors.Is(err, ErrNotFound) {
		return User{ID: btoi(k[8:]), CompanyID: co.ID}, false, errOwnerMissing
	} else if err != nil {
		return u, false, err
	}
	if !store.SignupOwnerUnverified(u) {
		return u, false, nil
	}
	if held, err := live(u.ID); err != nil || held {
		return u, false, err
	}
	if countPrefix(tx.Bucket(bucketUserFamilies), itob(u.ID), 1) > 0 ||
		countPrefix(tx.Bucket(bucketUserConsoleSess), itob(u.ID), 1) > 0 {
		return u, false, nil
	}
	// The owner's address, in the company's index, and nothing else.
	if countPrefix(tx.Bucket(bucketCompanyEmails), prefix, 2) != 1 {
		return u, false, nil
	}
	found := false
	err := tx.ForEach(func(name []byte, b *bolt.Bucket) error {
		if !found && !notCompanyKeyed[string(name)] {
			found = countPrefix(b, prefix, 1) > 0
		}
		return nil
	})
	return u, !found && err == nil, err
}

// removeSignup deletes an abandoned sign-up: its owner, with the address
// the owner held, and the company with its API key. The buckets' sequences
// stay, so neither id is given again.
func removeSignup(tx *bolt.Tx, u User) error {
	if err := releaseEmail(tx, u); err != nil {
		return err
	}
	if err := dropCompanyEmail(tx, u); err != nil {
		return err
	}
	if err := tx.Bucket(bucketCompanyUsers).Delete(pair(u.CompanyID, u.ID)); err != nil {
		return err
	}
	if err := tx.Bucket(bucketUsers).Delete(itob(u.ID)); err != nil {
		return err
	}
	companies := tx.Bucket(bucketCompanies)
	var co Company
	if err := getJSON(companies, itob(u.CompanyID), &co); err != nil {
		return err
	}
	keys := tx.Bucket(bucketAPIKeys)
	if held := keys.Get(co.APIKeyHash); held != nil && btoi(held) == co.ID {
		if err := keys.Delete(co.APIKeyHash); err != nil {
			return err
		}
	}
	return companies.Delete(itob(co.ID))
}
