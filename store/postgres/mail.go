package postgres

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/simrelay/simrelay/store"
)

// The e-mail outbox (mail_outbox): one row per mail, its state and
// creation time beside the record for the pending list and the prune, and
// for a company's mail (an e-mail webhook entry's) its company and size,
// counted by the partial index mail_outbox_company_pending.
//
// The company's bound (store.MailLimits) is checked and the mail inserted
// under an advisory lock of the company's (mailLock), so that the mails a
// company's webhook attempts queue at the same moment, on one node or
// several, take turns and the bound holds exactly, as bbolt's single
// writer makes it hold there. Only these writes take it, first in their
// transaction, so it orders nothing else.

// mailLockBase is the high half of a company's mail lock key: "mail", apart
// from the store's other advisory keys ("simr...").
const mailLockBase int64 = 0x6d61696c << 32

// mailLock is the advisory lock key of the company's mails. Companies
// whose ids share their low 32 bits share a key: they only take turns.
func mailLock(companyID uint64) int64 { return mailLockBase | int64(companyID&0xffffffff) }

// AppendMail adds a mail to the outbox and gives it its ID. A mail with a
// CompanyID is counted as the company's, without a bound.
func (s *Store) AppendMail(m *store.Mail) error {
	return s.appendMail(m, nil)
}

// AppendCompanyMail adds a mail of m.CompanyID's (an e-mail webhook
// entry's) to the outbox and gives it its ID, unless the company's pending
// mails would go over lim: then nothing is stored and the error is a
// *store.MailOutboxFullError. The mail counts against the company's daily
// storage budget on the day of its CreatedAt, after the fact: it is never
// refused for it (the event it tells of was admitted).
func (s *Store) AppendCompanyMail(m *store.Mail, lim store.MailLimits) error {
	if m.CompanyID == 0 {
		return fmt.Errorf("store: append company mail: %w: no company", store.ErrConflict)
	}
	return s.appendMail(m, &lim)
}

func (s *Store) appendMail(m *store.Mail, lim *store.MailLimits) error {
	out := *m
	size := store.MailSize(out)
	var full *store.MailOutboxFullError
	err := s.write("append mail", func(t *txn) error {
		full = nil
		if lim != nil {
			if err := companyOpen(t, out.CompanyID); err != nil {
				return err
			}
			if _, err := t.exec("SELECT pg_advisory_xact_lock($1)", mailLock(out.CompanyID)); err != nil {
				return err
			}
			pending, pendingBytes, err := mailOutboxSize(t, out.CompanyID)
			if err != nil {
				return err
			}
			if lim.Over(pending, pendingBytes, size) {
				full = &store.MailOutboxFullError{CompanyID: out.CompanyID, Pending: pending, PendingBytes: pendingBytes, Limits: *lim}
				return nil
			}
			if err := s.chargeAfter(t, out.CompanyID, out.CreatedAt, size+store.MailRowCost); err != nil {
				return err
			}
		}
		var err error
		if out.ID, err = nextID(t, "mail_outbox"); err != nil {
			return err
		}
		raw, err := rec(out)
		if err != nil {
			return err
		}
		_, err = t.exec("INSERT INTO mail_outbox (id, state, created_at, rec, company_id, size) VALUES ($1, $2, $3, $4, $5, $6)",
			id(out.ID), out.State, out.CreatedAt, raw, id(out.CompanyID), size)
		return err
	})
	if err != nil {
		return err
	}
	if full != nil {
		return full
	}
	m.ID = out.ID
	return nil
}

// mailOutboxSize counts the company's pending mails and their bytes.
func mailOutboxSize(t *txn, companyID uint64) (pending int, bytes int64, err error) {
	err = t.row("SELECT count(*), coalesce(sum(size), 0) FROM mail_outbox WHERE company_id = $1 AND state = 'pending' AND company_id <> 0",
		id(companyID)).Scan(&pending, &bytes)
	return pending, bytes, err
}

// MailOutboxSize is how many of the company's mails are pending in the
// outbox, and their bytes (store.MailSize as queued).
func (s *Store) MailOutboxSize(companyID uint64) (pending int, bytes int64, err error) {
	err = s.read("mail outbox size", func(t *txn) error {
		var err error
		pending, bytes, err = mailOutboxSize(t, companyID)
		return err
	})
	return pending, bytes, err
}

// ClaimMail leases the mail to this store for one attempt (Options.Lease;
// see leases.go) and returns it as stored, when it is still pending and no
// other node's live lease holds it; false otherwise (another node sends it,
// or sent it, or it is gone). UpdateMail, recording the attempt, ends the lease; a lease
// left by a dead node runs out and the mail is claimed again.
func (s *Store) ClaimMail(mailID uint64) (store.Mail, bool, error) {
	var m store.Mail
	claimed := false
	err := s.write(fmt.Sprintf("claim mail %d", mailID), func(t *txn) error {
		m, claimed = store.Mail{}, false
		err := getRec(t, &m, `UPDATE mail_outbox
			SET leased_until = clock_timestamp() + $2 * interval '1 millisecond', leased_by = $3
			WHERE id = $1 AND state = 'pending' AND (leased_until IS NULL OR leased_until <= clock_timestamp())
			RETURNING rec`, id(mailID), s.lease.Milliseconds(), s.holder)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		claimed = err == nil
		return err
	})
	if err != nil {
		return store.Mail{}, false, err
	}
	return m, claimed, nil
}

// UpdateMail applies fn to one mail of the outbox and stores it, in one
// transaction that locks its row (fn may run more than once).
func (s *Store) UpdateMail(mailID uint64, fn func(*store.Mail)) (store.Mail, error) {
	var m store.Mail
	err := s.write(fmt.Sprintf("update mail %d", mailID), func(t *txn) error {
		m = store.Mail{}
		var raw []byte
		var late bool
		if err := t.row(`SELECT rec, leased_by IS NOT NULL AND leased_by <> $2 AND leased_until > clock_timestamp()
			FROM mail_outbox WHERE id = $1 FOR UPDATE`, id(mailID), s.holder).Scan(&raw, &late); err != nil {
			return mapErr(err)
		}
		if err := json.Unmarshal(raw, &m); err != nil {
			return err
		}
		if late {
			// A late record: this node's lease ran out during its attempt
			// and another node's live lease holds the mail, its own attempt
			// under way. The holder records the outcome and ends its lease;
			// this one changes nothing (clearing the lease let a third
			// attempt start beside the second). The mail is sent at least
			// once, as across a crash.
			return nil
		}
		fn(&m)
		m.ID = mailID
		raw, err := rec(m)
		if err != nil {
			return err
		}
		// Recording an attempt ends its lease (ClaimMail).
		_, err = t.exec("UPDATE mail_outbox SET state = $2, created_at = $3, rec = $4, leased_until = NULL, leased_by = NULL WHERE id = $1", id(mailID), m.State, m.CreatedAt, raw)
		return err
	})
	return m, err
}

// Mails lists the outbox, oldest first. With pendingOnly it lists only mails
// still waiting for delivery.
func (s *Store) Mails(pendingOnly bool) ([]store.Mail, error) {
	var out []store.Mail
	err := s.read("list mail", func(t *txn) error {
		var err error
		if pendingOnly {
			out, err = getRecs[store.Mail](t, "SELECT rec FROM mail_outbox WHERE state = $1 ORDER BY id", store.MailPending)
		} else {
			out, err = getRecs[store.Mail](t, "SELECT rec FROM mail_outbox ORDER BY id")
		}
		return err
	})
	if err != nil || len(out) == 0 {
		return nil, err
	}
	return out, nil
}

// PruneMail drops mails the outbox is done with: sent or logged ones created
// before doneCutoff, and any other (pending or failed) created before
// unsentCutoff, which it returns too, oldest first and without their text
// (the caller logs them; the links stay out of the log).
func (s *Store) PruneMail(doneCutoff, unsentCutoff time.Time) (done int, unsent []store.Mail, err error) {
	// Batch by batch (pruneBatches), as deleteSome deletes: a mail a
	// sender changed under the batch is left to the next one.
	_, err = s.pruneBatches("prune mail outbox", func(t *txn, limit int) (int, error) {
		rows, err := t.query(`DELETE FROM mail_outbox WHERE ctid = ANY (ARRAY (SELECT ctid FROM mail_outbox
			WHERE (state IN ($2, $3) AND created_at < $4) OR (state NOT IN ($2, $3) AND created_at < $5)
			LIMIT $1))
			RETURNING state IN ($2, $3), rec`, limit, store.MailSent, store.MailLogged, doneCutoff, unsentCutoff)
		if err != nil {
			return 0, err
		}
		defer rows.Close()
		batchDone, batchUnsent := 0, []store.Mail(nil)
		for rows.Next() {
			var isDone bool
			var m store.Mail
			if err := rows.Scan(&isDone, &m); err != nil {
				return 0, err
			}
			if isDone {
				batchDone++
				continue
			}
			m.Text, m.HTML = "", ""
			batchUnsent = append(batchUnsent, m)
		}
		if err := rows.Err(); err != nil {
			return 0, err
		}
		// Counted once the batch's rows are all read: a try that failed
		// and runs again counts its rows once.
		t.OnCommit(func() { done, unsent = done+batchDone, append(unsent, batchUnsent...) })
		return batchDone + len(batchUnsent), nil
	})
	if err != nil {
		// The batches that committed are gone: they are said, with the
		// error, so the caller logs the unsent mails it dropped.
		slices.SortFunc(unsent, func(a, b store.Mail) int { return cmp.Compare(a.ID, b.ID) })
		return done, unsent, err
	}
	slices.SortFunc(unsent, func(a, b store.Mail) int { return cmp.Compare(a.ID, b.ID) })
	return done, unsent, nil
}
