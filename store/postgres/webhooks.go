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
