package postgres

// An attempt's outcome (its delivery ended or put off, its entry's health)
// and the deliveries log it writes, read and pruned.

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/simrelay/simrelay/store"
)

// RecordWebhookAttempt writes the outcome of one attempt at a pending
// delivery, in one transaction that locks the delivery's row: decide runs
// with the delivery and its entry (nil when removed; changes to it are
// stored) and returns the log line: its State, StatusCode, Error,
// DurationMS, CreatedAt and, when pending, NextAttemptAt. The store fills
// in the rest. A pending line moves the delivery to its next attempt;
// delivered or failed ends it, and only the log keeps it. The company's log
// then keeps its newest keep lines (all when keep is 0). decide may run
// more than once, so it must only compute. A delivery that ended (or never
// was) is ErrNotFound.
func (s *Store) RecordWebhookAttempt(deliveryID uint64, keep int, decide func(d store.WebhookDelivery, e *store.WebhookEntry) store.WebhookAttempt) (store.WebhookAttempt, error) {
	var a store.WebhookAttempt
	err := s.write(fmt.Sprintf("record webhook attempt of delivery %d", deliveryID), func(t *txn) error {
		var err error
		a, err = s.recordAttempt(t, deliveryID, keep, decide)
		return err
	})
	if err != nil {
		return store.WebhookAttempt{}, err
	}
	return a, nil
}

// attemptRecord is an attempt's line on its way to its commit.
type attemptRecord struct {
	done chan struct{}
	out  store.WebhookAttempt
	err  error
}

// RecordWebhookAttemptLater starts the write of RecordWebhookAttempt and
// returns at once; Wait gives the line once it is committed.
func (s *Store) RecordWebhookAttemptLater(deliveryID uint64, keep int, decide func(d store.WebhookDelivery, e *store.WebhookEntry) store.WebhookAttempt) store.AttemptRecord {
	r := &attemptRecord{done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.out, r.err = s.RecordWebhookAttempt(deliveryID, keep, decide)
	}()
	return r
}

// Wait returns the attempt's line once it is committed, or the write's
// error; call it once.
func (r *attemptRecord) Wait() (store.WebhookAttempt, error) {
	<-r.done
	return r.out, r.err
}

// recordAttempt is the write of RecordWebhookAttempt, inside t.
func (s *Store) recordAttempt(t *txn, deliveryID uint64, keep int, decide func(d store.WebhookDelivery, e *store.WebhookEntry) store.WebhookAttempt) (store.WebhookAttempt, error) {
	var d store.WebhookDelivery
	var raw []byte
	var late bool
	if err := t.row(`SELECT rec, leased_by IS NOT NULL AND leased_by <> $2 AND leased_until > clock_timestamp()
		FROM webhook_deliveries WHERE id = $1 FOR UPDATE`, id(deliveryID), s.holder).Scan(&raw, &late); err != nil {
		return store.WebhookAttempt{}, mapErr(err)
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		return store.WebhookAttempt{}, err
	}
	set, err := loadWebhookSet(t, d.CompanyID, false)
	if err != nil {
		return store.WebhookAttempt{}, err
	}
	entry := set.Entry(d.WebhookID)
	if late {
		// A late record: this node's lease ran out during the attempt (its
		// beats stopped) and another node's live lease holds the delivery,
		// its own attempt under way. The line is logged, but the holder's
		// lease, the schedule and the entry's health are the holder's to
		// write: clearing the lease here let a third attempt start beside
		// the second.
		var copied store.WebhookEntry
		if entry != nil {
			copied = *entry
			entry = &copied
		}
		a := decide(d, entry)
		if a.State == store.WebhookPending {
			a.NextAttemptAt = d.NextAttemptAt
		} else {
			a.NextAttemptAt = time.Time{}
		}
		a.CompanyID, a.WebhookID, a.EventID, a.DeliveryID, a.EventType, a.Attempt = d.CompanyID, d.WebhookID, d.EventID, d.UUID, d.EventType, d.Attempts+1
		if err := appendAttempt(t, &a, keep); err != nil {
			return store.WebhookAttempt{}, err
		}
		return a, nil
	}
	var before store.WebhookEntry
	if entry != nil {
		before = *entry
	}
	a := decide(d, entry)
	if entry != nil && entryHealthChanged(before, *entry) {
		// Decide again on the set as it is stored, locked until the commit,
		// so that no other attempt's or edit's change of it is lost.
		if set, err = loadWebhookSet(t, d.CompanyID, true); err != nil {
			return store.WebhookAttempt{}, err
		}
		entry = set.Entry(d.WebhookID)
		before = store.WebhookEntry{}
		if entry != nil {
			before = *entry
		}
		a = decide(d, entry)
		if entry != nil && entryHealthChanged(before, *entry) {
			if err := putWebhookSet(t, set); err != nil {
				return store.WebhookAttempt{}, err
			}
			if before.DisabledAt.IsZero() && !entry.DisabledAt.IsZero() {
				if err := addActivity(t, d.CompanyID, store.Activity{Type: store.ActWebhookDisabled, At: entry.DisabledAt,
					Description: fmt.Sprintf("Webhook %d disabled after failed deliveries", entry.ID)}); err != nil {
					return store.WebhookAttempt{}, err
				}
			}
		}
	}
	d.Attempts++
	if a.State != store.WebhookPending {
		a.NextAttemptAt = time.Time{}
	}
	a.CompanyID, a.WebhookID, a.EventID, a.DeliveryID, a.EventType, a.Attempt = d.CompanyID, d.WebhookID, d.EventID, d.UUID, d.EventType, d.Attempts
	// The log's line (and its trim) before the outbox's counters, as a
	// batch of reports writes a refused event's line before the outbox
	// (doc.go, Counters): written after, an ended delivery held its
	// company's outbox row while it waited for the log's oldest lines,
	// which such a batch held while it waited for the outbox
	// (TestAttemptLogsBeforeTheOutbox).
	if err := appendAttempt(t, &a, keep); err != nil {
		return store.WebhookAttempt{}, err
	}
	if a.State == store.WebhookPending {
		d.NextAttemptAt = a.NextAttemptAt
		d.Body = nil
		raw, err := rec(d)
		if err != nil {
			return store.WebhookAttempt{}, err
		}
		if _, err := t.exec("UPDATE webhook_deliveries SET next_attempt_at = $2, rec = $3, leased_until = NULL, leased_by = NULL WHERE id = $1", id(d.ID), d.NextAttemptAt, raw); err != nil {
			return store.WebhookAttempt{}, err
		}
	} else if err := endDelivery(t, d); err != nil {
		return store.WebhookAttempt{}, err
	}
	return a, nil
}

// entryHealthChanged reports whether delivery changed what it may change of
// an entry, so an attempt rewrites the set only when it must.
func entryHealthChanged(a, b store.WebhookEntry) bool {
	return a.Active != b.Active || !a.FailingSince.Equal(b.FailingSince) || !a.DisabledAt.Equal(b.DisabledAt) || a.DisabledReason != b.DisabledReason
}

// endDelivery removes a pending delivery (its row locked by t) and releases
// what it held: its place in the company's outbox and its share of the
// event, whose body goes with the last delivery.
func endDelivery(t *txn, d store.WebhookDelivery) error {
	if _, err := t.exec("DELETE FROM webhook_deliveries WHERE id = $1", id(d.ID)); err != nil {
		return err
	}
	var bytes int64
	if len(d.Body) > 0 { // a row with its own body has no shared event
		bytes = int64(len(d.Body))
	} else {
		var left, size int64
		err := t.row("UPDATE webhook_events SET pending = pending - 1 WHERE id = $1 RETURNING pending, length(body)", d.EventID).Scan(&left, &size)
		if err := mapErr(err); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if err == nil && left <= 0 {
			if _, err := t.exec("DELETE FROM webhook_events WHERE id = $1", d.EventID); err != nil {
				return err
			}
			bytes = size
		}
	}
	return addOutbox(t, d.CompanyID, -1, -bytes)
}

// appendAttempt adds a line to the company's log, giving it its id, and
// drops the company's lines older than its newest keep (none when keep is
// 0), so the log's size is bounded on every write, whatever the rate. The
// lines another transaction is dropping meanwhile are left to it (SKIP
// LOCKED), as addActivity leaves them: waiting for it made the company's
// attempts commit one at a time.
func appendAttempt(t *txn, a *store.WebhookAttempt, keep int) error {
	var err error
	if a.ID, err = nextID(t, "webhook_attempts"); err != nil {
		return err
	}
	raw, err := rec(a)
	if err != nil {
		return err
	}
	if _, err := t.exec("INSERT INTO webhook_attempts (id, company_id, webhook_id, created_at, rec) VALUES ($1, $2, $3, $4, $5)",
		id(a.ID), id(a.CompanyID), id(a.WebhookID), a.CreatedAt, raw); err != nil {
		return err
	}
	if keep <= 0 {
		return nil
	}
	_, err = t.exec(`DELETE FROM webhook_attempts WHERE ctid = ANY (ARRAY (SELECT ctid FROM webhook_attempts
		WHERE company_id = $1 AND id <= (
			SELECT id FROM webhook_attempts WHERE company_id = $1 ORDER BY id DESC OFFSET $2 LIMIT 1)
		FOR UPDATE SKIP LOCKED))`, id(a.CompanyID), keep)
	return err
}

// WebhookAttempts returns up to limit lines of the company's deliveries log,
// newest first; a webhookID other than 0 keeps only that entry's lines. A
// limit below 1 returns none.
func (s *Store) WebhookAttempts(companyID, webhookID uint64, limit int) ([]store.WebhookAttempt, error) {
	var out []store.WebhookAttempt
	if limit < 1 {
		return nil, nil
	}
	err := s.read(fmt.Sprintf("webhook attempts of company %d", companyID), func(t *txn) error {
		var err error
		if webhookID == 0 {
			out, err = getRecs[store.WebhookAttempt](t, "SELECT rec FROM webhook_attempts WHERE company_id = $1 ORDER BY id DESC LIMIT $2",
				id(companyID), limit)
		} else {
			out, err = getRecs[store.WebhookAttempt](t, "SELECT rec FROM webhook_attempts WHERE company_id = $1 AND webhook_id = $2 ORDER BY id DESC LIMIT $3",
				id(companyID), id(webhookID), limit)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// PruneWebhookAttempts drops log lines created before cutoff and, per
// company, all but the newest keep (as writes do). It returns how many
// lines it dropped.
func (s *Store) PruneWebhookAttempts(cutoff time.Time, keep int) (int, error) {
	// The old lines first (a scan that stops at each batch's limit: the
	// old lines are the table's first), then what is over keep per
	// company: the writes trim it, so there is any only when keep was
	// lowered, and that scan reads what the first left.
	n, err := s.pruneBatches("prune webhook attempts", func(t *txn, limit int) (int, error) {
		return deleteSome(t, "webhook_attempts", "created_at < $2", limit, cutoff)
	})
	if err != nil || keep <= 0 {
		return n, err
	}
	m, err := s.pruneBatches("prune webhook attempts over the kept number", func(t *txn, limit int) (int, error) {
		return deleteSome(t, "webhook_attempts", `id IN (SELECT id FROM (
				SELECT id, row_number() OVER (PARTITION BY company_id ORDER BY id DESC) AS rank FROM webhook_attempts
			) r WHERE r.rank > $2)`, limit, keep)
	})
	return n + m, err
}
