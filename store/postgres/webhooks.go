package postgres

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

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
		if err := companyOpen(t, companyID); err != nil {
			return err
		}
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

// addOutbox adds to the transaction's shard of the company's outbox counters.
func addOutbox(t *txn, companyID uint64, deliveries, bytes int64) error {
	_, err := t.exec(`INSERT INTO webhook_outboxes (company_id, shard, deliveries, bytes) VALUES ($1, $2, $3, $4)
		ON CONFLICT (company_id, shard) DO UPDATE SET deliveries = webhook_outboxes.deliveries + EXCLUDED.deliveries, bytes = webhook_outboxes.bytes + EXCLUDED.bytes`,
		id(companyID), t.shard(), deliveries, bytes)
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
// the change it tells of (a status change, a device's change: events.go):
// it hands the company's webhook set to build, and stores the event's body
// once and the deliveries build returns, due at their NextAttemptAt. It
// costs two round trips: one reads the set and the outbox's size
// (queueWebhookFacts), one writes the event (webhookWrite.queue); a
// company without webhooks costs the first alone. The body is counted
// against the company's daily storage budget without being refused
// (chargeAfter). When the company's outbox would go over lim, nothing of
// the event is queued: each of its deliveries gets a failed line in the
// deliveries log instead, and the result says how many were refused. An
// event id that is empty or still pending is ErrConflict.
func (s *Store) addWebhookEvent(t *txn, companyID uint64, now time.Time, lim store.OutboxLimits, build func(store.WebhookSet) (store.WebhookEvent, []store.WebhookDelivery, error)) (store.OutboxAdd, error) {
	var f webhookFacts
	b := &pgx.Batch{}
	queueWebhookFacts(b, companyID, &f)
	if err := t.sendBatch(b); err != nil {
		return store.OutboxAdd{}, err
	}
	w, err := planWebhookEvent(&f, companyID, now, lim, build)
	if err != nil || w == nil {
		return store.OutboxAdd{}, err
	}
	b = &pgx.Batch{}
	if err := w.queue(t, b, nil); err != nil {
		return store.OutboxAdd{}, err
	}
	if err := t.sendBatch(b); err != nil {
		return store.OutboxAdd{}, err
	}
	return w.res, nil
}

// webhookFacts are what an event's write reads of its company first: its
// webhook set (empty when it has none) and, when it has one, what its
// outbox holds.
type webhookFacts struct {
	set    store.WebhookSet
	outbox outboxUse
}

// queueWebhookFacts queues the read of the company's webhook facts into f,
// one statement: the set and the sum of its outbox's counters, read
// without a lock (the outbox's bound may be overshot by the events in
// flight at once: see above).
func queueWebhookFacts(b *pgx.Batch, companyID uint64, f *webhookFacts) {
	f.set, f.outbox = store.WebhookSet{CompanyID: companyID}, outboxUse{}
	b.Queue(`SELECT w.rec, o.deliveries, o.bytes FROM webhook_sets w,
		LATERAL (SELECT coalesce(sum(deliveries), 0)::bigint AS deliveries, coalesce(sum(bytes), 0)::bigint AS bytes
			FROM webhook_outboxes WHERE company_id = w.company_id) o
		WHERE w.company_id = $1`, id(companyID)).QueryRow(func(row pgx.Row) error {
		var raw []byte
		err := row.Scan(&raw, &f.outbox.deliveries, &f.outbox.bytes)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		return json.Unmarshal(raw, &f.set)
	})
}

// webhookWrite is an event built against its company's webhook facts:
// its deliveries to queue, or, when the outbox is full, the failed lines
// of the deliveries log (refused) that take their place.
type webhookWrite struct {
	companyID uint64
	now       time.Time
	keep      int // the deliveries log's length (OutboxLimits.LogKeep)
	ev        store.WebhookEvent
	ds        []store.WebhookDelivery
	refused   []store.WebhookAttempt
	res       store.OutboxAdd
}

// planWebhookEvent builds an event against the company's webhook facts
// (f): nil when the company has no entries or build makes no delivery.
// Nothing is written yet (webhookWrite.queue).
func planWebhookEvent(f *webhookFacts, companyID uint64, now time.Time, lim store.OutboxLimits, build func(store.WebhookSet) (store.WebhookEvent, []store.WebhookDelivery, error)) (*webhookWrite, error) {
	if len(f.set.Entries) == 0 {
		return nil, nil
	}
	ev, ds, err := build(f.set)
	if err != nil || len(ds) == 0 {
		return nil, err
	}
	n, size := int64(len(ds)), int64(len(ev.Body))
	pending, pendingBytes := f.outbox.deliveries, f.outbox.bytes
	w := &webhookWrite{companyID: companyID, now: now, keep: lim.LogKeep, ev: ev, ds: ds}
	w.res.Pending, w.res.PendingBytes = int(pending), pendingBytes
	if lim.MaxDeliveries > 0 && pending+n > int64(lim.MaxDeliveries) || lim.MaxBytes > 0 && pendingBytes+size > lim.MaxBytes {
		for _, d := range ds {
			w.refused = append(w.refused, store.WebhookAttempt{
				CompanyID: companyID, WebhookID: d.WebhookID, EventID: ev.ID, DeliveryID: d.UUID, EventType: d.EventType,
				State: store.WebhookFailed, CreatedAt: now.UTC(),
				Error: fmt.Sprintf("not queued: the company's webhook outbox is full (%d deliveries pending, %d bytes; the limits are %d and %d)",
					pending, pendingBytes, lim.MaxDeliveries, lim.MaxBytes),
			})
		}
		w.res.Refused = len(ds)
		return w, nil
	}
	if ev.ID == "" {
		return nil, fmt.Errorf("%w: webhook event id is empty", store.ErrConflict)
	}
	w.res.Queued, w.res.Pending, w.res.PendingBytes = len(ds), int(pending+n), pendingBytes+size
	return w, nil
}

// queue queues the event's writes, each table's rows in one statement,
// their ids taken from the tables' sequences inside the statements (and
// set in rec there too): the body, its deliveries and the outbox's
// counters, the body charged after the fact to the day's storage
// (written with the transaction's other charges, last); or the refused
// deliveries' lines of the log, then the log's trim to its length (lines
// another transaction drops meanwhile are left to it, as appendAttempt
// leaves them). wrap, when not nil, wraps the error of a taken event id,
// which fails the batch.
func (w *webhookWrite) queue(t *txn, b *pgx.Batch, wrap func(error) error) error {
	c := id(w.companyID)
	if len(w.refused) > 0 {
		webhooks, at, recs := make([]int64, len(w.refused)), make([]time.Time, len(w.refused)), make([]string, len(w.refused))
		for i, a := range w.refused {
			raw, err := rec(a)
			if err != nil {
				return err
			}
			webhooks[i], at[i], recs[i] = id(a.WebhookID), a.CreatedAt, string(raw)
		}
		// OFFSET 0 keeps the subquery whole: each row's id is taken once.
		b.Queue(`INSERT INTO webhook_attempts (id, company_id, webhook_id, created_at, rec)
			SELECT a.id, $1, a.webhook_id, a.created_at, jsonb_set(a.rec, '{id}', to_jsonb(a.id))
			FROM (SELECT nextval(pg_get_serial_sequence('webhook_attempts', 'id')) AS id, u.webhook_id, u.created_at, u.rec
				FROM unnest($2::bigint[], $3::timestamptz[], $4::jsonb[]) AS u (webhook_id, created_at, rec) OFFSET 0) a`,
			c, webhooks, at, recs)
		if w.keep > 0 {
			b.Queue(`DELETE FROM webhook_attempts WHERE ctid = ANY (ARRAY (SELECT ctid FROM webhook_attempts
				WHERE company_id = $1 AND id <= (
					SELECT id FROM webhook_attempts WHERE company_id = $1 ORDER BY id DESC OFFSET $2 LIMIT 1)
				FOR UPDATE SKIP LOCKED))`, c, w.keep)
		}
		return nil
	}
	n, size := int64(len(w.ds)), int64(len(w.ev.Body))
	webhooks, due, recs := make([]int64, len(w.ds)), make([]time.Time, len(w.ds)), make([]string, len(w.ds))
	for i, d := range w.ds {
		d.ID, d.CompanyID, d.EventID, d.Body = 0, w.companyID, w.ev.ID, nil
		raw, err := json.Marshal(d)
		if err != nil {
			return err
		}
		webhooks[i], due[i], recs[i] = id(d.WebhookID), d.NextAttemptAt, string(raw)
	}
	// DO NOTHING keeps the statement from failing: a taken id is the
	// batch's error, and the transaction rolls back what followed it.
	evID := w.ev.ID
	b.Queue("INSERT INTO webhook_events (id, company_id, pending, body) VALUES ($1, $2, $3, $4) ON CONFLICT (id) DO NOTHING",
		evID, c, n, w.ev.Body).Exec(func(tag pgconn.CommandTag) error {
		if tag.RowsAffected() > 0 {
			return nil
		}
		err := fmt.Errorf("%w: webhook event id %q is taken", store.ErrConflict, evID)
		if wrap != nil {
			err = wrap(err)
		}
		return err
	})
	b.Queue(`INSERT INTO webhook_deliveries (id, company_id, webhook_id, event_id, next_attempt_at, rec)
		SELECT d.id, $1, d.webhook_id, $2, d.due, jsonb_set(d.rec, '{id}', to_jsonb(d.id))
		FROM (SELECT nextval(pg_get_serial_sequence('webhook_deliveries', 'id')) AS id, u.webhook_id, u.due, u.rec
			FROM unnest($3::bigint[], $4::timestamptz[], $5::jsonb[]) AS u (webhook_id, due, rec) OFFSET 0) d`,
		c, evID, webhooks, due, recs)
	b.Queue(`INSERT INTO webhook_outboxes (company_id, shard, deliveries, bytes) VALUES ($1, $2, $3, $4)
		ON CONFLICT (company_id, shard) DO UPDATE SET deliveries = webhook_outboxes.deliveries + EXCLUDED.deliveries, bytes = webhook_outboxes.bytes + EXCLUDED.bytes`,
		c, t.shard(), n, size)
	t.chargeStorage(w.companyID, day(w.now), size+n*store.DeliveryRowCost)
	return nil
}
