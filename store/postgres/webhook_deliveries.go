package postgres

// The outbox's reading side: which deliveries are due, and one delivery
// with its body and entry for an attempt.

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/simrelay/simrelay/store"
)

// DueWebhookDeliveries returns up to limit deliveries due at now, the
// longest due first, passing over those skip names (nil skips none; it sees
// each candidate in order, so it may also count what it lets through). It
// also returns when to look again: the due time of the first delivery still
// waiting, now when more are due than limit, zero when nothing waits. The
// whole pass reads one snapshot.
func (s *Store) DueWebhookDeliveries(now time.Time, limit int, skip store.DueSkip) ([]store.WebhookDue, time.Time, error) {
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
// limit of them (full) or none is left. A company or an entry skip says is
// full (store.DuePassCompany, store.DuePassEntry) is left out of the pages
// after: its rows are passed over by the database, not read one by one
// here, so a company whose receivers hang with a backlog of thousands costs
// the pass a page, not a page per 256 of its deliveries.
func scanDue(t *txn, now time.Time, limit int, unleased bool, note func(d *store.WebhookDue), skip store.DueSkip) (due []store.WebhookDue, full bool, err error) {
	const page = 256
	after, afterID := time.Time{}, int64(0)
	passedCompanies, passedEntries := []int64{}, []int64{} // never nil: <> ALL(NULL) is never true
	passedCompany, passedEntry := map[uint64]bool{}, map[uint64]bool{}
	for {
		rows, err := t.query(`SELECT id, webhook_id, company_id, next_attempt_at FROM webhook_deliveries
			WHERE next_attempt_at <= $1 AND (next_attempt_at, id) > ($2, $3)
			AND (NOT $5 OR leased_until IS NULL OR leased_until <= clock_timestamp())
			AND company_id <> ALL($6) AND webhook_id <> ALL($7)
			ORDER BY next_attempt_at, id LIMIT $4`,
			now, after, afterID, page, unleased, passedCompanies, passedEntries)
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
			if passedCompany[d.CompanyID] || passedEntry[d.WebhookID] {
				continue
			}
			if note != nil {
				note(&d)
			}
			verdict := store.DueTake
			if skip != nil {
				verdict = skip(d)
			}
			switch verdict {
			case store.DuePass:
				continue
			case store.DuePassEntry:
				passedEntry[d.WebhookID], passedEntries = true, append(passedEntries, wid)
				continue
			case store.DuePassCompany:
				passedCompany[d.CompanyID], passedCompanies = true, append(passedCompanies, cid)
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
