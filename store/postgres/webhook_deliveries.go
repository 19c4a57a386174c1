package postgres

// The outbox's reading side: which deliveries are due, and one delivery
// with its body and entry for an attempt.

import (
	"container/heap"
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

// scanDue reads the deliveries due at now, the longest due first (those
// under a live lease left out when unleased), fills each with note (nil:
// nothing) and passes over those skip names, until it has limit of them
// (full) or none is left.
//
// It reads them as the embedded store does (store.DueScan): in due
// order, pages of dueWalkPage through the index by due time, and, once
// the pass says so, on through the index by company and entry
// (webhook_deliveries_entry_due, migration 0018): the first few due after
// the walk's last of each entry with deliveries pending, the full ones
// left out, merged here oldest due first; an entry whose read ran out is
// read on from where it stopped, twice as many each time.
func scanDue(t *txn, now time.Time, limit int, unleased bool, note func(d *store.WebhookDue), skip store.DueSkip) (due []store.WebhookDue, full bool, err error) {
	p := &store.DueScan{Limit: limit, Note: note, Skip: skip}
	last, err := dueWalk(t, p, now, unleased)
	if err == nil && p.ByEntry() {
		err = dueMerge(t, p, now, unleased, last)
	}
	if err != nil {
		return nil, false, err
	}
	return p.Due, p.Full, nil
}

// dueWalkPage is how many due deliveries a page of the walk in due order
// reads.
const dueWalkPage = 128

// dueWalk reads the due deliveries in due order until nothing more is due
// or the pass stops it (Walked); it returns the last one it read, after
// which a merge by entry goes on.
func dueWalk(t *txn, p *store.DueScan, now time.Time, unleased bool) (last dueRow, err error) {
	for {
		rows, err := t.query(`SELECT id, webhook_id, company_id, next_attempt_at FROM webhook_deliveries
			WHERE next_attempt_at <= $1 AND (next_attempt_at, id) > ($2, $3)
			AND (NOT $5 OR leased_until IS NULL OR leased_until <= clock_timestamp())
			ORDER BY next_attempt_at, id LIMIT $4`,
			now, last.at, last.id, dueWalkPage, unleased)
		if err != nil {
			return last, err
		}
		n, stopped := 0, false
		for !stopped && rows.Next() {
			var did, wid, cid int64
			if err := rows.Scan(&did, &wid, &cid, &last.at); err != nil {
				rows.Close()
				return last, err
			}
			n, last.id = n+1, did
			stopped = !p.Walked(store.WebhookDue{ID: uint64(did), WebhookID: uint64(wid), CompanyID: uint64(cid)})
		}
		rows.Close()
		if err := rows.Err(); err != nil || stopped || n < dueWalkPage {
			return last, err
		}
	}
}

// dueMerge goes on from after the due delivery after through the index by
// company and entry, leaving out the full ones, until the pass is full or
// nothing more is due.
func dueMerge(t *txn, p *store.DueScan, now time.Time, unleased bool, after dueRow) error {
	heads, err := dueEntries(t, now, unleased, after, p)
	if err != nil {
		return err
	}
	heap.Init(&heads)
	for heads.Len() > 0 {
		h := heads[0]
		if p.Passed(uint64(h.company), uint64(h.webhook)) {
			heap.Pop(&heads)
			continue
		}
		if !p.See(store.WebhookDue{ID: uint64(h.rows[0].id), WebhookID: uint64(h.webhook), CompanyID: uint64(h.company)}) {
			return nil
		}
		if err := h.next(t, now, unleased); err != nil {
			return err
		}
		if len(h.rows) == 0 {
			heap.Pop(&heads)
			continue
		}
		heap.Fix(&heads, 0)
	}
	return nil
}

// dueFirstRead is how many of an entry's due deliveries a pass reads at
// first: a pass takes at most an entry's bound of attempts (2 by default)
// and passes over its deliveries already handed out, so most entries need
// no second read; each further read of an entry doubles, up to
// dueMaxRead.
const dueFirstRead, dueMaxRead = 4, 256

// dueRow is a due delivery an entry's head has read and the pass not yet
// seen.
type dueRow struct {
	id int64
	at time.Time
}

// dueHead is an entry's place in the pass: its due deliveries read and
// not yet seen, oldest first.
type dueHead struct {
	company, webhook int64
	rows             []dueRow
	read             int  // how many the last read asked for
	more             bool // the last read had as many as it asked for: there may be more
	last             dueRow
}

// next moves the head past its first row, reading on when that was the
// last one read and there may be more; no rows left is the entry's end.
func (h *dueHead) next(t *txn, now time.Time, unleased bool) error {
	h.last, h.rows = h.rows[0], h.rows[1:]
	if len(h.rows) > 0 || !h.more {
		return nil
	}
	h.read = min(2*h.read, dueMaxRead)
	rows, err := t.query(`SELECT id, next_attempt_at FROM webhook_deliveries
		WHERE company_id = $1 AND webhook_id = $2 AND next_attempt_at <= $3 AND (next_attempt_at, id) > ($4, $5)
		AND (NOT $6 OR leased_until IS NULL OR leased_until <= clock_timestamp())
		ORDER BY next_attempt_at, id LIMIT $7`,
		h.company, h.webhook, now, h.last.at, h.last.id, unleased, h.read)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var r dueRow
		if err := rows.Scan(&r.id, &r.at); err != nil {
			return err
		}
		h.rows = append(h.rows, r)
	}
	h.more = len(h.rows) == h.read
	return rows.Err()
}

// dueEntries reads each entry with deliveries due at now after the due
// delivery after, and the first dueFirstRead of them, one statement: it
// steps from entry to entry of the pending deliveries through the index by
// company and entry (a probe each; a company the pass found full one probe,
// its first entry, and the next step goes past all its entries), leaving
// out the companies and entries the pass found full, and reads each one's
// oldest due.
func dueEntries(t *txn, now time.Time, unleased bool, after dueRow, p *store.DueScan) (dueHeads, error) {
	skipCompanies, skipEntries := []int64{}, []int64{} // never nil: <> ALL(NULL) is never true
	companies, entries := p.PassedIDs()
	for _, c := range companies {
		skipCompanies = append(skipCompanies, int64(c))
	}
	for _, e := range entries {
		skipEntries = append(skipEntries, int64(e))
	}
	rows, err := t.query(`WITH RECURSIVE entries (company_id, webhook_id) AS (
			(SELECT company_id, webhook_id FROM webhook_deliveries ORDER BY company_id, webhook_id LIMIT 1)
			UNION ALL
			SELECT n.company_id, n.webhook_id FROM entries e CROSS JOIN LATERAL (
				SELECT company_id, webhook_id FROM webhook_deliveries d
				WHERE (d.company_id, d.webhook_id) > (e.company_id,
					CASE WHEN e.company_id = ANY($6) THEN 9223372036854775807 ELSE e.webhook_id END)
				ORDER BY company_id, webhook_id LIMIT 1) n
		)
		SELECT e.company_id, e.webhook_id, d.id, d.next_attempt_at FROM entries e CROSS JOIN LATERAL (
			SELECT id, next_attempt_at FROM webhook_deliveries d
			WHERE d.company_id = e.company_id AND d.webhook_id = e.webhook_id AND d.next_attempt_at <= $1
			AND (d.next_attempt_at, d.id) > ($4, $5) AND e.company_id <> ALL($6) AND e.webhook_id <> ALL($7)
			AND (NOT $2 OR leased_until IS NULL OR leased_until <= clock_timestamp())
			ORDER BY next_attempt_at, id LIMIT $3) d
		ORDER BY e.company_id, e.webhook_id, d.next_attempt_at, d.id`, now, unleased, dueFirstRead, after.at, after.id, skipCompanies, skipEntries)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var heads dueHeads
	for rows.Next() {
		var company, webhook int64
		var r dueRow
		if err := rows.Scan(&company, &webhook, &r.id, &r.at); err != nil {
			return nil, err
		}
		if n := len(heads); n == 0 || heads[n-1].company != company || heads[n-1].webhook != webhook {
			heads = append(heads, &dueHead{company: company, webhook: webhook, read: dueFirstRead})
		}
		h := heads[len(heads)-1]
		h.rows = append(h.rows, r)
	}
	for _, h := range heads {
		h.more = len(h.rows) == h.read
	}
	return heads, rows.Err()
}

// dueHeads is a heap of entries' heads, the longest due first (then the
// lowest id, the order of the index by due time).
type dueHeads []*dueHead

func (h dueHeads) Len() int { return len(h) }
func (h dueHeads) Less(i, j int) bool {
	a, b := h[i].rows[0], h[j].rows[0]
	if !a.at.Equal(b.at) {
		return a.at.Before(b.at)
	}
	return a.id < b.id
}
func (h dueHeads) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *dueHeads) Push(x any)   { *h = append(*h, x.(*dueHead)) }
func (h *dueHeads) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
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
// company's secret, and whether the company is closing
// (store.WebhookJob.Closing), in one statement.
func (s *Store) WebhookJob(deliveryID uint64) (store.WebhookJob, error) {
	var job store.WebhookJob
	err := s.read(fmt.Sprintf("webhook delivery %d", deliveryID), func(t *txn) error {
		job = store.WebhookJob{}
		var raw, body, setRaw []byte
		var open *bool // NULL: the company is not stored
		err := t.row(`SELECT d.rec, e.body, w.rec, NOT c.rec ? 'closing_at' FROM webhook_deliveries d
			LEFT JOIN webhook_events e ON e.id = d.event_id
			LEFT JOIN webhook_sets w ON w.company_id = d.company_id
			LEFT JOIN companies c ON c.id = d.company_id
			WHERE d.id = $1`, id(deliveryID)).Scan(&raw, &body, &setRaw, &open)
		if err != nil {
			return mapErr(err)
		}
		if err := json.Unmarshal(raw, &job.Delivery); err != nil {
			return err
		}
		if open == nil || !*open {
			job.Closing = true
			return nil
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
