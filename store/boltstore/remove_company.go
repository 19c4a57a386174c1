package boltstore

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/simrelay/simrelay/store"
)

// RemoveCompanyStep removes, in one transaction, up to about limit records
// of the company (store.CompanyRemoval): the first step its credentials
// whole (the API key, the users with their address, sessions, refresh
// and one-time tokens, the devices with their tokens, the pairing codes,
// its mail), then, step by step, its webhook deliveries with their events
// and its media (what leaves the server without a credential: gone before
// the many steps of a large company's messages), its messages with every
// index of them, then the records
// of every bucket keyed by company id, and its own record last, in the
// step that finds nothing else left. The buckets not keyed by company id
// are reached through the company's own indexes (company_users,
// company_device_ids, dev_conv_messages, agent_messages,
// webhook_due_entries, media_keys, agent_numbers, the subscription's
// customer, mail_company), or, for the few small ones no index names
// (api_keys, refresh_tokens, onetime_tokens, pairings, billing_customer: a
// record or a few per company, user or session, pruned by the server),
// read whole in the first step and again in the last; the steps between
// read none of them. A company that is not stored is ErrNotFound.
func (s *Store) RemoveCompanyStep(companyID uint64, limit int) (store.CompanyRemoval, error) {
	limit = max(limit, 1)
	var r store.CompanyRemoval
	err := s.update(func(tx *bolt.Tx) error {
		r = store.CompanyRemoval{}
		companies := tx.Bucket(bucketCompanies)
		var co Company
		if err := getJSON(companies, itob(companyID), &co); err != nil {
			return err
		}
		if credentialsLeft(tx, co) {
			if err := removeCredentials(tx, companyID, &r); err != nil {
				return err
			}
		}
		left := limit
		// What leaves the server without a credential of the company (its
		// pending webhook deliveries, its media files behind signed links)
		// goes first, before messages that may take many steps.
		for _, phase := range []func(*bolt.Tx, uint64, int, *store.CompanyRemoval) (int, error){
			removeDeliveries, removeCompanyMedia, removeMessages(bucketConvMessages), removeMessages(bucketAgentMessages), sweepCompany,
		} {
			n, err := phase(tx, companyID, left, &r)
			if err != nil {
				return err
			}
			if left -= n; left <= 0 {
				return nil
			}
		}
		// Nothing keyed by the company is left: what a write since the
		// first step may have put in the buckets keyed otherwise goes too
		// (on a stopped server, none), then the company's record.
		if err := removeCredentials(tx, companyID, &r); err != nil {
			return err
		}
		r.Done = true
		return companies.Delete(itob(companyID))
	})
	if err != nil {
		return store.CompanyRemoval{}, fmt.Errorf("store: remove company %d: %w", companyID, err)
	}
	return r, nil
}

// userStored refuses, with ErrNotFound, a sign-in record (a refresh
// family, a console session, an e-mailed link) of a user who is not
// stored, or whose company is closing (companyOpen): a sign-in that
// checked the password of a user whose company was removed since
// (RemoveCompanyStep) stores nothing that no index of the company names
// any more, and none begins once the company is closing, though the
// removal's first step has not taken its users yet (or failed).
func userStored(tx *bolt.Tx, userID uint64) error {
	v := tx.Bucket(bucketUsers).Get(itob(userID))
	if v == nil {
		return fmt.Errorf("user %d: %w", userID, ErrNotFound)
	}
	var u User
	if err := jsonUnmarshal(v, &u); err != nil {
		return err
	}
	if err := companyOpen(tx, u.CompanyID); err != nil {
		return err
	}
	return nil
}

// credentialsLeft says whether the company still has its API key, a user
// or a live device: whether its credentials are still to be removed. They
// go in one transaction (removeCredentials), so once none of the three is
// left none of them is, and the steps after the first read none of the
// buckets removeCredentials reads whole.
func credentialsLeft(tx *bolt.Tx, co Company) bool {
	id := itob(co.ID)
	if held := tx.Bucket(bucketAPIKeys).Get(co.APIKeyHash); held != nil && bytes.Equal(held, id) {
		return true
	}
	return countPrefix(tx.Bucket(bucketCompanyUsers), id, 1) > 0 || countPrefix(tx.Bucket(bucketCompanyDeviceIDs), id, 1) > 0
}

// removeCredentials removes what lets anyone act for the company, with
// the records reached through it: the API key, the users (pending
// invitations too) with their address, refresh-token families and tokens,
// console sessions and one-time tokens, the live devices with their
// tokens, the pairing codes, the agent numbers' public ids, the
// subscription's customer and the company's mail. Each kind is a few
// records per user or device, or a bucket the server prunes (tokens,
// pairing codes, mail: a week of the company's, found by its index), so it
// is one step whatever the company's size.
func removeCredentials(tx *bolt.Tx, companyID uint64, r *store.CompanyRemoval) error {
	id := itob(companyID)
	drop := func(bucket []byte, match func(k, v []byte) (bool, error)) error {
		n, err := deleteWhere(tx.Bucket(bucket), match)
		r.Records += int64(n)
		return err
	}
	if err := drop(bucketAPIKeys, func(_, v []byte) (bool, error) { return bytes.Equal(v, id), nil }); err != nil {
		return err
	}
	users := map[uint64]bool{}
	members := tx.Bucket(bucketCompanyUsers)
	c := members.Cursor()
	for k, _ := c.Seek(id); k != nil && bytes.HasPrefix(k, id); k, _ = c.Seek(id) {
		uid := btoi(k[8:])
		users[uid] = true
		var u User
		switch err := getJSON(tx.Bucket(bucketUsers), itob(uid), &u); {
		case err == nil:
			if err := removeUser(tx, u, r); err != nil {
				return err
			}
		case err != ErrNotFound:
			return err
		}
		if err := c.Delete(); err != nil {
			return err
		}
	}
	userOwned := func(bucket []byte) error {
		return drop(bucket, func(_, v []byte) (bool, error) {
			var t struct {
				UserID uint64 `json:"user_id"`
			}
			err := jsonUnmarshal(v, &t)
			return err == nil && users[t.UserID], err
		})
	}
	if err := userOwned(bucketRefreshTokens); err != nil {
		return err
	}
	if err := userOwned(bucketOneTimeTokens); err != nil {
		return err
	}
	if err := removeDevices(tx, companyID, r); err != nil {
		return err
	}
	companyOwned := func(bucket []byte) error {
		return drop(bucket, func(_, v []byte) (bool, error) {
			var rec struct {
				CompanyID uint64 `json:"company_id"`
			}
			err := jsonUnmarshal(v, &rec)
			return err == nil && rec.CompanyID == companyID, err
		})
	}
	if err := companyOwned(bucketPairings); err != nil {
		return err
	}
	if err := removeCompanyMail(tx, companyID, r); err != nil {
		return err
	}
	if err := drop(bucketCustomers, func(_, v []byte) (bool, error) { return bytes.Equal(v, id), nil }); err != nil {
		return err
	}
	// The agent numbers' public ids; the numbers themselves are keyed by
	// company and go with the sweep.
	ids := tx.Bucket(bucketAgentNumberIDs)
	nc := tx.Bucket(bucketAgentNumbers).Cursor()
	for k, v := nc.Seek(id); k != nil && bytes.HasPrefix(k, id); k, v = nc.Next() {
		var n AgentNumber
		if err := jsonUnmarshal(v, &n); err != nil {
			return err
		}
		if held := ids.Get([]byte(n.PublicID)); held != nil && bytes.Equal(held, k) {
			if err := ids.Delete([]byte(n.PublicID)); err != nil {
				return err
			}
			r.Records++
		}
	}
	return nil
}

// removeCompanyMail removes the company's mails, pending or done, found in
// bucketMailCompany (schema 14: the outbox holds a week of every
// company's mail, which the removal read whole, twice), each with its
// entry there; their entries in mail_company_pending, keyed by company,
// go with the sweep.
func removeCompanyMail(tx *bolt.Tx, companyID uint64, r *store.CompanyRemoval) error {
	prefix := itob(companyID)
	outbox := tx.Bucket(bucketMailOutbox)
	c := tx.Bucket(bucketMailCompany).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Seek(prefix) {
		mid := bytes.Clone(k[8:])
		var m Mail
		switch err := getJSON(outbox, mid, &m); {
		case err == nil && m.CompanyID == companyID:
			if err := outbox.Delete(mid); err != nil {
				return err
			}
			r.Records++
		case err != nil && err != ErrNotFound:
			return err
		}
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return nil
}

// removeUser removes a user of the company with the address the user
// holds, their refresh-token families and console sessions (the tokens,
// not indexed by user, go in removeCredentials).
func removeUser(tx *bolt.Tx, u User, r *store.CompanyRemoval) error {
	if err := releaseEmail(tx, u); err != nil {
		return err
	}
	if err := dropCompanyEmail(tx, u); err != nil {
		return err
	}
	prefix := itob(u.ID)
	for _, idx := range []struct{ index, records []byte }{
		{bucketUserFamilies, bucketTokenFamilies}, {bucketUserConsoleSess, bucketConsoleSessions},
	} {
		records := tx.Bucket(idx.records)
		c := tx.Bucket(idx.index).Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Seek(prefix) {
			if err := records.Delete(k[8:]); err != nil {
				return err
			}
			if err := c.Delete(); err != nil {
				return err
			}
			r.Records++
		}
	}
	r.Users++
	return tx.Bucket(bucketUsers).Delete(itob(u.ID))
}

// removeDevices removes the company's live devices, each with its token;
// their other records are keyed by company and go with the sweep.
func removeDevices(tx *bolt.Tx, companyID uint64, r *store.CompanyRemoval) error {
	id := itob(companyID)
	devices, tokens := tx.Bucket(bucketDevices), tx.Bucket(bucketDeviceTokens)
	c := tx.Bucket(bucketCompanyDeviceIDs).Cursor()
	for k, v := c.Seek(id); k != nil && bytes.HasPrefix(k, id); k, v = c.Seek(id) {
		v = bytes.Clone(v)
		var d Device
		switch err := getJSON(devices, v, &d); {
		case err == nil && d.CompanyID == companyID:
			if held := tokens.Get(d.TokenHash); len(d.TokenHash) > 0 && len(held) >= 8 && btoi(held[:8]) == d.ID {
				if err := tokens.Delete(d.TokenHash); err != nil {
					return err
				}
			}
			if err := devices.Delete(v); err != nil {
				return err
			}
			r.Devices++
		case err != nil && err != ErrNotFound:
			return err
		}
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return nil
}

// removeMessages removes up to limit of the company's messages found in
// index (dev_conv_messages for SMS, agent_messages for WhatsApp and
// iMessage: each message is under one key of one of them, its id last),
// each with its uuid, expiry and schedule entries; the indexes keyed by
// company go with the sweep.
func removeMessages(index []byte) func(*bolt.Tx, uint64, int, *store.CompanyRemoval) (int, error) {
	return func(tx *bolt.Tx, companyID uint64, limit int, r *store.CompanyRemoval) (int, error) {
		prefix := itob(companyID)
		msgs, uuids := tx.Bucket(bucketMessages), tx.Bucket(bucketMessageUUIDs)
		n := 0
		c := tx.Bucket(index).Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && n < limit; k, _ = c.Seek(prefix) {
			n++
			mid := bytes.Clone(k[len(k)-8:])
			var m Message
			switch err := getJSON(msgs, mid, &m); {
			case err == nil && m.CompanyID == companyID:
				if held := uuids.Get([]byte(m.UUID)); held != nil && bytes.Equal(held, mid) {
					if err := uuids.Delete([]byte(m.UUID)); err != nil {
						return n, err
					}
				}
				if !m.ExpiresAt.IsZero() {
					if err := tx.Bucket(bucketQueueExpiry).Delete(append(timeKey(m.ExpiresAt), mid...)); err != nil {
						return n, err
					}
				}
				if err := tx.Bucket(bucketScheduleDue).Delete(append(timeKey(m.DueAt()), mid...)); err != nil {
					return n, err
				}
				if err := msgs.Delete(mid); err != nil {
					return n, err
				}
				r.Messages++
			case err != nil && err != ErrNotFound:
				return n, err
			}
			if err := c.Delete(); err != nil {
				return n, err
			}
		}
		return n, nil
	}
}

// removeDeliveries removes up to limit of the company's pending webhook
// deliveries, found in webhook_due_entries, each with its due entry and
// its reference to its event, whose body goes with the last one.
func removeDeliveries(tx *bolt.Tx, companyID uint64, limit int, r *store.CompanyRemoval) (int, error) {
	prefix := itob(companyID)
	deliveries := tx.Bucket(bucketWebhookDeliveries)
	n := 0
	c := tx.Bucket(bucketWebhookDueEntries).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && n < limit; k, _ = c.Seek(prefix) {
		n++
		k = bytes.Clone(k)
		did := k[len(k)-8:]
		var d WebhookDelivery
		switch err := getJSON(deliveries, did, &d); {
		case err == nil && d.CompanyID == companyID:
			if err := deleteDue(tx, d); err != nil {
				return n, err
			}
			if err := endDelivery(tx, d); err != nil {
				return n, err
			}
			if err := deliveries.Delete(did); err != nil {
				return n, err
			}
			r.Records++
		case err != nil && err != ErrNotFound:
			return n, err
		}
		// deleteDue took the entry already, unless it was stale: the cursor
		// is not on it any more, so the key is deleted by name.
		if err := tx.Bucket(bucketWebhookDueEntries).Delete(k); err != nil {
			return n, err
		}
	}
	return n, nil
}

// removeCompanyMedia removes up to limit of the company's media files,
// found in media_keys, each with its chunks and index entries.
func removeCompanyMedia(tx *bolt.Tx, companyID uint64, limit int, r *store.CompanyRemoval) (int, error) {
	prefix := itob(companyID)
	media := tx.Bucket(bucketMedia)
	n := 0
	c := tx.Bucket(bucketMediaKeys).Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && n < limit; k, v = c.Seek(prefix) {
		n++
		k, v = bytes.Clone(k), bytes.Clone(v)
		var md Media
		switch err := getJSON(media, v, &md); {
		case err == nil && md.CompanyID == companyID:
			if err := deleteMedia(tx, md); err != nil {
				return n, err
			}
			r.Records++
		case err != nil && err != ErrNotFound:
			return n, err
		}
		if err := tx.Bucket(bucketMediaKeys).Delete(k); err != nil {
			return n, err
		}
	}
	return n, nil
}

// sweepCompany removes up to limit keys that begin with the company's id
// from the buckets keyed by company id (every bucket but notCompanyKeyed's,
// and the company's users and addresses), the company's record aside.
func sweepCompany(tx *bolt.Tx, companyID uint64, limit int, r *store.CompanyRemoval) (int, error) {
	prefix := itob(companyID)
	n := 0
	err := tx.ForEach(func(name []byte, b *bolt.Bucket) error {
		if n >= limit || (notCompanyKeyed[string(name)] && !bytes.Equal(name, bucketCompanyUsers) && !bytes.Equal(name, bucketCompanyEmails)) {
			return nil
		}
		c := b.Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && n < limit; k, _ = c.Seek(prefix) {
			if err := c.Delete(); err != nil {
				return err
			}
			n++
			r.Records++
		}
		return nil
	})
	return n, err
}

// MarkCompanyClosing marks the company closing (store.Company.ClosingAt)
// in one transaction with vet's look at its record and subscription, so
// that nothing vet refuses (a checkout claim, a live subscription) is
// taken between the look and the mark: a subscription write after it
// finds the company closing (companyOpen) and is ErrNotFound. A company
// already closing is answered as it is, without vet. A company that is not
// stored is ErrNotFound.
func (s *Store) MarkCompanyClosing(companyID uint64, now time.Time, vet store.RemovalVet) (Company, error) {
	var co Company
	err := s.update(func(tx *bolt.Tx) error {
		co = Company{}
		companies := tx.Bucket(bucketCompanies)
		if err := getJSON(companies, itob(companyID), &co); err != nil {
			return err
		}
		if !co.ClosingAt.IsZero() {
			return nil
		}
		sub := Subscription{CompanyID: companyID}
		found := true
		switch err := getJSON(tx.Bucket(bucketSubscriptions), itob(companyID), &sub); {
		case errors.Is(err, ErrNotFound):
			found = false
		case err != nil:
			return err
		}
		if err := vet(co, sub, found); err != nil {
			return err
		}
		co.ClosingAt = now.UTC()
		return putJSON(companies, itob(companyID), co)
	})
	if err != nil {
		return Company{}, fmt.Errorf("store: mark company %d closing: %w", companyID, err)
	}
	return co, nil
}

// closingMark is how a company record that carries a closing mark
// (store.Company.ClosingAt) reads in its JSON; one without it carries no
// such key (omitzero).
var closingMark = []byte(`"closing_at":`)

// ClosingCompanies lists the companies marked closing
// (MarkCompanyClosing) whose removal is not finished, oldest first. It
// reads the companies bucket, a record per company, and decodes only
// the records that carry the mark.
func (s *Store) ClosingCompanies() ([]uint64, error) {
	var ids []uint64
	err := s.view(func(tx *bolt.Tx) error {
		ids = nil
		return tx.Bucket(bucketCompanies).ForEach(func(k, v []byte) error {
			closing, err := markedClosing(v)
			if closing {
				ids = append(ids, btoi(k))
			}
			return err
		})
	})
	if err != nil {
		return nil, fmt.Errorf("store: closing companies: %w", err)
	}
	return ids, nil
}

// companyOpen refuses, with ErrNotFound, a write under a company that is
// not stored (one removed, RemoveCompanyStep) or is closing
// (MarkCompanyClosing): its subscription, which the removal's vet looked
// at, takes no change after the mark, and a record of a kind that nothing
// else ties to a live device, user or number (an opt-out, a company mail,
// a pairing code, a pool, a webhook set) is not written under a company
// that is gone or going, by a request that checked its credential before
// the removal's first step took it.
func companyOpen(tx *bolt.Tx, companyID uint64) error {
	v := tx.Bucket(bucketCompanies).Get(itob(companyID))
	if v == nil {
		return fmt.Errorf("company %d: %w", companyID, ErrNotFound)
	}
	closing, err := markedClosing(v)
	if closing {
		return fmt.Errorf("company %d is closing: %w", companyID, ErrNotFound)
	}
	return err
}

// markedClosing says whether a company's record carries the closing mark,
// decoding only a record whose bytes hold its key.
func markedClosing(v []byte) (bool, error) {
	if !bytes.Contains(v, closingMark) {
		return false, nil
	}
	var co Company
	if err := jsonUnmarshal(v, &co); err != nil {
		return false, err
	}
	return !co.ClosingAt.IsZero(), nil
}
