package postgres

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simrelay/simrelay/store"
)

// Webhooks: each company's set is one record (webhook_sets); an event's
// body is stored once (webhook_events) with the count of its deliveries
// still pending, and each delivery is a row of the outbox
// (webhook_deliveries) due at next_attempt_at; the deliveries log is
// webhook_attempts. See migrations/0008_webhooks.sql.
//
// Where this differs from bbolt, and why:
//   - The outbox's counters are split (webhook_outboxes, summed on read),
//     as every inbound message and status change of a company with webhooks
//     adds to them and every ended delivery takes from them: none of these
//     queue on one row. The bound (OutboxLimits) is checked against the sum
//     read without a lock: like the daily storage budget it guards the disk
//     and is not a price, so it may be overshot by the events in flight at
//     once (at most one per connection of each node's pool). An event is
//     refused only when the outbox was full by what had committed.
//   - An attempt reads the company's set without a lock; only when decide
//     changes the entry's health does it lock the set, read it again and
//     decide again on what is stored, so a company's attempts do not queue
//     on its set.
//   - The log is trimmed to the newest keep lines of the company by each
//     write, as on bbolt, but attempts committed at the same moment may each
//     keep their own line: the log may hold a few lines over keep until the
//     next write or prune. No per-company line count is kept.
//   - RecordWebhookAttemptLater runs the write in its own transaction at
//     once, on a goroutine: there is no group commit to join.
//   - The dispatcher claims deliveries with a lease (leases.go), so that
//     several nodes make each attempt once; recording the attempt ends it.

// loadWebhookSet reads the company's set (empty when it has none); with
// lock, it locks the set's row for the transaction, making it first.
func loadWebhookSet(t *txn, companyID uint64, lock bool) (store.WebhookSet, error) {
	set := store.WebhookSet{CompanyID: companyID}
	q := "SELECT rec FROM webhook_sets WHERE company_id = $1"
	if lock {
		q += " FOR UPDATE"
	}
	err := getRec(t, &set, q, id(companyID))
	if errors.Is(err, store.ErrNotFound) && lock {
		empty, merr := rec(set)
		if merr != nil {
			return set, merr
		}
		if _, err := t.exec("INSERT INTO webhook_sets (company_id, rec) VALUES ($1, $2) ON CONFLICT (company_id) DO NOTHING", id(companyID), empty); err != nil {
			return set, err
		}
		err = getRec(t, &set, q, id(companyID))
	}
	if errors.Is(err, store.ErrNotFound) {
		return set, nil
	}
	return set, err
}

// WebhookSet returns the company's webhook set (empty when it has none).
func (s *Store) WebhookSet(companyID uint64) (store.WebhookSet, error) {
	var set store.WebhookSet
	err := s.read(fmt.Sprintf("webhook set of company %d", companyID), func(t *txn) error {
		var err error
		set, err = loadWebhookSet(t, companyID, false)
		return err
	})
	return set, err
}

// UpdateWebhookSet applies fn to the company's webhook set and stores it.
// Entries that fn leaves with ID 0 get new ids and now as CreatedAt. fn runs
// inside the write transaction (perhaps more than once); an error from it
// changes nothing.
func (s *Store) UpdateWebhookSet(companyID uint64, now time.Time, fn func(*store.WebhookSet) error) (store.WebhookSet, error) {
	var set store.WebhookSet
	err := s.write(fmt.Sprintf("update webhook set of company %d", companyID), func(t *txn) error {
		var err error
		if set, err = loadWebhookSet(t, companyID, true); err != nil {
			return err
		}
		if err := fn(&set); err != nil {
			return err
		}
		for i := range set.Entries {
			if set.Entries[i].ID != 0 {
				continue
			}
			var n int64
			if err := t.row("SELECT nextval('webhook_entry_ids')").Scan(&n); err != nil {
				return err
			}
			set.Entries[i].ID, set.Entries[i].CreatedAt = uint64(n), now.UTC()
		}
		set.CompanyID = companyID
		return putWebhookSet(t, set)
	})
	return set, err
}

// putWebhookSet stores the set over its locked row.
func putWebhookSet(t *txn, set store.WebhookSet) error {
	raw, err := rec(set)
	if err != nil {
		return err
	}
	_, err = t.exec("UPDATE webhook_sets SET rec = $2 WHERE company_id = $1", id(set.CompanyID), raw)
	return err
}

// outboxSize sums the company's outbox counters.
func outboxSize(t *txn, companyID uint64) (deliveries, bytes int64, err error) {
	err = t.row("SELECT coalesce(sum(deliveries), 0)::bigint, coalesce(sum(bytes), 0)::bigint FROM webhook_outboxes WHERE company_id = $1",
		id(companyID)).Scan(&deliveries, &bytes)
	return deliveries, bytes, err
}

// addOutbox adds to a random shard of the company's outbox counters.
func addOutbox(t *txn, companyID uint64, deliveries, bytes int64) error {
	_, err := t.exec(`INSERT INTO webhook_outboxes (company_id, shard, deliveries, bytes) VALUES ($1, $2, $3, $4)
		ON CONFLICT (company_id, shard) DO UPDATE SET deliveries = webhook_outboxes.deliveries + EXCLUDED.deliveries, bytes = webhook_outboxes.bytes + EXCLUDED.bytes`,
		id(companyID), shard(), deliveries, bytes)
	return err
}

// WebhookOutboxSize returns how many deliveries the company has pending and
// how many bytes of event bodies they hold.
func (s *Store) WebhookOutboxSize(companyID uint64) (deliveries int, bytes int64, err error) {
	err = s.read(fmt.Sprintf("webhook outbox of company %d", companyID), func(t *txn) error {
		d, b, err := outboxSize(t, companyID)
		deliveries, bytes = int(d), b
		return err
	})
	return deliveries, bytes, err
}

// addWebhookEvent is the outbox write of an event, in the transaction t of
// the change it tells of (a status change, an inbound message, a device's
// change: events.go): it hands the company's webhook set to build, and
// stores the event's body once and the deliveries build returns, due at
// their NextAttemptAt. A company without webhooks costs one lookup. The
// body is counted against the company's daily storage budget without being
// refused (chargeAfter). When the company's outbox would go over lim,
// nothing of the event is queued: each of its deliveries gets a failed line
// in the deliveries log instead, and the result says how many were
// refused. An event id that is empty or still pending is ErrConflict.
func (s *Store) addWebhookEvent(t *txn, companyID uint64, now time.Time, lim store.OutboxLimits, build func(store.WebhookSet) (store.WebhookEvent, []store.WebhookDelivery, error)) (store.OutboxAdd, error) {
	var out store.OutboxAdd
	set, err := loadWebhookSet(t, companyID, false)
	if err != nil || len(set.Entries) == 0 {
		return out, err
	}
	ev, ds, err := build(set)
	if err != nil || len(ds) == 0 {
		return out, err
	}
	n, size := int64(len(ds)), int64(len(ev.Body))
	pending, pendingBytes, err := outboxSize(t, companyID)
	if err != nil {
		return out, err
	}
	out.Pending, out.PendingBytes = int(pending), pendingBytes
	if lim.MaxDeliveries > 0 && pending+n > int64(lim.MaxDeliveries) || lim.MaxBytes > 0 && pendingBytes+size > lim.MaxBytes {
		for _, d := range ds {
			a := store.WebhookAttempt{
				CompanyID: companyID, WebhookID: d.WebhookID, EventID: ev.ID, DeliveryID: d.UUID, EventType: d.EventType,
				State: store.WebhookFailed, CreatedAt: now.UTC(),
				Error: fmt.Sprintf("not queued: the company's webhook outbox is full (%d deliveries pending, %d bytes; the limits are %d and %d)",
					pending, pendingBytes, lim.MaxDeliveries, lim.MaxBytes),
			}
			if err := appendAttempt(t, &a, lim.LogKeep); err != nil {
				return out, err
			}
		}
		out.Refused = len(ds)
		return out, nil
	}
	if ev.ID == "" {
		return out, fmt.Errorf("%w: webhook event id is empty", store.ErrConflict)
	}
	// DO NOTHING keeps the caller's transaction usable after a refusal.
	tag, err := t.exec("INSERT INTO webhook_events (id, company_id, pending, body) VALUES ($1, $2, $3, $4) ON CONFLICT (id) DO NOTHING",
		ev.ID, id(companyID), n, ev.Body)
	if err != nil {
		return out, err
	}
	if tag.RowsAffected() == 0 {
		return out, fmt.Errorf("%w: webhook event id %q is taken", store.ErrConflict, ev.ID)
	}
	if err := s.chargeAfter(t, companyID, now, size+n*store.DeliveryRowCost); err != nil {
		return out, err
	}
	rows, err := t.query("SELECT nextval(pg_get_serial_sequence('webhook_deliveries', 'id')) FROM generate_series(1, $1)", n)
	if err != nil {
		return out, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return out, err
	}
	webhooks := make([]int64, len(ds))
	due := make([]time.Time, len(ds))
	recs := make([]string, len(ds))
	for i, d := range ds {
		d.ID, d.CompanyID, d.EventID, d.Body = uint64(ids[i]), companyID, ev.ID, nil
		raw, err := json.Marshal(d)
		if err != nil {
			return out, err
		}
		webhooks[i], due[i], recs[i] = id(d.WebhookID), d.NextAttemptAt, string(raw)
	}
	if _, err := t.exec(`INSERT INTO webhook_deliveries (id, company_id, webhook_id, event_id, next_attempt_at, rec)
		SELECT d.id, $2, d.webhook_id, $3, d.due, d.rec FROM unnest($1::bigint[], $4::bigint[], $5::timestamptz[], $6::jsonb[]) AS d (id, webhook_id, due, rec)`,
		ids, id(companyID), ev.ID, webhooks, due, recs); err != nil {
		return out, err
	}
	if err := addOutbox(t, companyID, n, size); err != nil {
		return out, err
	}
	out.Queued, out.Pending, out.PendingBytes = len(ds), int(pending+n), pendingBytes+size
	return out, nil
}

// DueWebhookDeliveries returns up to limit deliveries due at now, the
// longest due first, passing over those skip names (nil skips none; it sees
// each candidate in order, so it may also count what it lets through). It
// also returns when to look again: the due time of the first delivery still
// waiting, now when more are due than limit, zero when nothing waits. The
// whole pass reads one snapshot.
func (s *Store) DueWebhookDeliveries(now time.Time, limit int, skip func(d store.WebhookDue) bool) ([]store.WebhookDue, time.Time, error) {
	var due []store.WebhookDue
	var next time.Time
	err := s.read("due webhook deliveries", func(t *txn) error {
		var full bool
		var err error
		due, full, err = scanDue(t, now, limit, false, nil, skip)
		if err != nil || full {
			next = now
			return err
		}
		next, err = nextAttempt(t, now)
		return err
	})
	if err != nil {
		return nil, time.Time{}, err
	}
	return due, next, nil
}

// scanDue reads, a page at a time, the deliveries due at now, the longest
// due first (those under a live lease left out when unleased), fills each
// with note (nil: nothing) and passes over those skip names, until it has
// limit of them (full) or none is left.
func scanDue(t *txn, now time.Time, limit int, unleased bool, note func(d *store.WebhookDue), skip func(d store.WebhookDue) bool) (due []store.WebhookDue, full bool, err error) {
	const page = 256
	after, afterID := time.Time{}, int64(0)
	for {
		rows, err := t.query(`SELECT id, webhook_id, company_id, next_attempt_at FROM webhook_deliveries
			WHERE next_attempt_at <= $1 AND (next_attempt_at, id) > ($2, $3)
			AND (NOT $5 OR leased_until IS NULL OR leased_until <= clock_timestamp())
			ORDER BY next_attempt_at, id LIMIT $4`,
			now, after, afterID, page, unleased)
		if err != nil {
			return nil, false, err
		}
		n := 0
		for rows.Next() {
			var d store.WebhookDue
			var did, wid, cid int64
			if err := rows.Scan(&did, &wid, &cid, &after); err != nil {
				rows.Close()
				return nil, false, err
			}
			n, afterID = n+1, did
			d.ID, d.WebhookID, d.CompanyID = uint64(did), uint64(wid), uint64(cid)
			if note != nil {
				note(&d)
			}
			if skip != nil && skip(d) {
				continue
			}
			if len(due) == limit {
				rows.Close()
				return due, true, rows.Err()
			}
			due = append(due, d)
		}
		rows.Close()
		if err := rows.Err(); err != nil || n < page {
			return due, false, err
		}
	}
}

// nextAttempt is when the first delivery due after now is due; zero when
// none is.
func nextAttempt(t *txn, now time.Time) (time.Time, error) {
	var first *time.Time
	if err := t.row("SELECT min(next_attempt_at) FROM webhook_deliveries WHERE next_attempt_at > $1", now).Scan(&first); err != nil || first == nil {
		return time.Time{}, err
	}
	return first.UTC(), nil
}

// WebhookJob reads a pending delivery with its body, its entry and the
// company's secret.
func (s *Store) WebhookJob(deliveryID uint64) (store.WebhookJob, error) {
	var job store.WebhookJob
	err := s.read(fmt.Sprintf("webhook delivery %d", deliveryID), func(t *txn) error {
		job = store.WebhookJob{}
		var raw, body, setRaw []byte
		err := t.row(`SELECT d.rec, e.body, w.rec FROM webhook_deliveries d
			LEFT JOIN webhook_events e ON e.id = d.event_id
			LEFT JOIN webhook_sets w ON w.company_id = d.company_id
			WHERE d.id = $1`, id(deliveryID)).Scan(&raw, &body, &setRaw)
		if err != nil {
			return mapErr(err)
		}
		if err := json.Unmarshal(raw, &job.Delivery); err != nil {
			return err
		}
		if len(job.Delivery.Body) == 0 {
			if body == nil {
				return fmt.Errorf("store: webhook event %s of delivery %d is missing", job.Delivery.EventID, deliveryID)
			}
			job.Delivery.Body = store.DeliveryBody(job.Delivery.UUID, body)
		}
		if setRaw == nil {
			return nil
		}
		var set store.WebhookSet
		if err := json.Unmarshal(setRaw, &set); err != nil {
			return err
		}
		job.Secret = set.Secret
		if e := set.Entry(job.Delivery.WebhookID); e != nil {
			entry := *e
			job.Entry = &entry
		}
		return nil
	})
	return job, err
}

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
	if err := getRec(t, &d, "SELECT rec FROM webhook_deliveries WHERE id = $1 FOR UPDATE", id(deliveryID)); err != nil {
		return store.WebhookAttempt{}, err
	}
	set, err := loadWebhookSet(t, d.CompanyID, false)
	if err != nil {
		return store.WebhookAttempt{}, err
	}
	entry := set.Entry(d.WebhookID)
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
	} else {
		a.NextAttemptAt = time.Time{}
		if err := endDelivery(t, d); err != nil {
			return store.WebhookAttempt{}, err
		}
	}
	a.CompanyID, a.WebhookID, a.EventID, a.DeliveryID, a.EventType, a.Attempt = d.CompanyID, d.WebhookID, d.EventID, d.UUID, d.EventType, d.Attempts
	if err := appendAttempt(t, &a, keep); err != nil {
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
// 0), so the log's size is bounded on every write, whatever the rate.
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
	_, err = t.exec(`DELETE FROM webhook_attempts WHERE company_id = $1 AND id <= (
		SELECT id FROM webhook_attempts WHERE company_id = $1 ORDER BY id DESC OFFSET $2 LIMIT 1)`, id(a.CompanyID), keep)
	return err
}

// WebhookAttempts returns up to limit lines of the company's deliveries log,
// newest first; a webhookID other than 0 keeps only that entry's lines.
func (s *Store) WebhookAttempts(companyID, webhookID uint64, limit int) ([]store.WebhookAttempt, error) {
	var out []store.WebhookAttempt
	limit = max(limit, 1) // as on bbolt, which reads a line before it counts
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
	var n int
	err := s.write("prune webhook attempts", func(t *txn) error {
		tag, err := t.exec(`DELETE FROM webhook_attempts a USING (
				SELECT id, created_at, row_number() OVER (PARTITION BY company_id ORDER BY id DESC) AS rank FROM webhook_attempts
			) r WHERE a.id = r.id AND (r.created_at < $1 OR ($2 > 0 AND r.rank > $2))`, cutoff, keep)
		n = int(tag.RowsAffected())
		return err
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}
