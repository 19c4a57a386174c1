package boltstore

import (
	"bytes"
	"container/heap"
	"encoding/json"
	"fmt"
	"math"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/simrelay/simrelay/store"
)

var (
	bucketWebhookSets       = []byte("webhook_sets")        // company id -> WebhookSet; its sequence numbers entries
	bucketWebhookDeliveries = []byte("webhook_deliveries")  // delivery id -> WebhookDelivery, while pending
	bucketWebhookDue        = []byte("webhook_due")         // next_attempt_at delivery id -> webhook id company id (dueValue; empty in older rows)
	bucketWebhookDueEntries = []byte("webhook_due_entries") // company id webhook id next_attempt_at delivery id -> nil (dueEntryKey; schema 11)
	bucketWebhookAttempts   = []byte("webhook_attempts")    // company id + attempt id -> WebhookAttempt
	bucketWebhookLogSizes   = []byte("webhook_log_sizes")   // company id -> number of its attempts
	webhookBuckets          = [][]byte{bucketWebhookSets, bucketWebhookDeliveries, bucketWebhookDue, bucketWebhookDueEntries, bucketWebhookAttempts, bucketWebhookLogSizes,
		bucketWebhookEvents, bucketWebhookEventRefs, bucketWebhookOutbox}
)

func dueKey(d WebhookDelivery) []byte { return append(timeKey(d.NextAttemptAt), itob(d.ID)...) }

// dueEntryKey is a pending delivery's key in the due index by company and
// entry, which a pass over the due deliveries reads: a company or an entry
// with as many attempts under way as it may is passed over with one seek,
// however many of its deliveries are due (DueWebhookDeliveries).
func dueEntryKey(companyID, webhookID uint64, at []byte, id []byte) []byte {
	k := make([]byte, 0, 32)
	return append(append(append(append(k, itob(companyID)...), itob(webhookID)...), at...), id...)
}

// putDue indexes the pending delivery d as due at d.NextAttemptAt.
func putDue(tx *bolt.Tx, d WebhookDelivery) error {
	if err := tx.Bucket(bucketWebhookDue).Put(dueKey(d), dueValue(d)); err != nil {
		return err
	}
	return tx.Bucket(bucketWebhookDueEntries).Put(dueEntryKey(d.CompanyID, d.WebhookID, timeKey(d.NextAttemptAt), itob(d.ID)), nil)
}

// deleteDue removes the delivery d, as stored, from the due indexes.
func deleteDue(tx *bolt.Tx, d WebhookDelivery) error {
	if err := tx.Bucket(bucketWebhookDue).Delete(dueKey(d)); err != nil {
		return err
	}
	return tx.Bucket(bucketWebhookDueEntries).Delete(dueEntryKey(d.CompanyID, d.WebhookID, timeKey(d.NextAttemptAt), itob(d.ID)))
}

// dueValue is what the dispatcher needs of a due delivery besides its id,
// its entry and company, kept in the due index so that a pass over the
// index, which reads every due row while the entries' and companies' bounds
// hold the rest back, decodes none of them.
func dueValue(d WebhookDelivery) []byte { return append(itob(d.WebhookID), itob(d.CompanyID)...) }

// WebhookSet returns the company's webhook set (empty when it has none).
func (s *Store) WebhookSet(companyID uint64) (WebhookSet, error) {
	var set WebhookSet
	err := s.view(func(tx *bolt.Tx) error {
		var err error
		set, err = loadWebhookSet(tx, companyID)
		return err
	})
	if err != nil {
		return set, fmt.Errorf("store: webhook set of company %d: %w", companyID, err)
	}
	return set, nil
}

func loadWebhookSet(tx *bolt.Tx, companyID uint64) (WebhookSet, error) {
	set := WebhookSet{CompanyID: companyID}
	raw := tx.Bucket(bucketWebhookSets).Get(itob(companyID))
	if raw == nil {
		return set, nil
	}
	err := jsonUnmarshal(raw, &set)
	return set, err
}

// UpdateWebhookSet applies fn to the company's webhook set and stores it.
// Entries that fn leaves with ID 0 get new ids and now as CreatedAt. fn runs
// inside the write transaction; an error from it changes nothing.
func (s *Store) UpdateWebhookSet(companyID uint64, now time.Time, fn func(*WebhookSet) error) (WebhookSet, error) {
	var set WebhookSet
	err := s.update(func(tx *bolt.Tx) error {
		if err := companyOpen(tx, companyID); err != nil {
			return err
		}
		var err error
		if set, err = loadWebhookSet(tx, companyID); err != nil {
			return err
		}
		if err := fn(&set); err != nil {
			return err
		}
		b := tx.Bucket(bucketWebhookSets)
		for i := range set.Entries {
			if set.Entries[i].ID != 0 {
				continue
			}
			if set.Entries[i].ID, err = b.NextSequence(); err != nil {
				return err
			}
			set.Entries[i].CreatedAt = now.UTC()
		}
		set.CompanyID = companyID
		return putJSON(b, itob(companyID), set)
	})
	if err != nil {
		return set, fmt.Errorf("store: update webhook set of company %d: %w", companyID, err)
	}
	return set, nil
}

// ClaimWebhookDeliveries is DueWebhookDeliveries: the embedded store has
// one process, whose dispatcher already hands each delivery out once until
// its attempt is recorded, so a claim needs nothing written. (PostgreSQL's
// leases each claimed row for the node that claims it.)
func (s *Store) ClaimWebhookDeliveries(now time.Time, limit int, skip DueSkip) ([]WebhookDue, time.Time, error) {
	return s.DueWebhookDeliveries(now, limit, skip)
}

// DueWebhookDeliveries returns up to limit deliveries due at now, the
// longest due first, passing over those skip names (nil skips none; it sees
// each candidate in order, so it may also count what it lets through). It
// also returns when to look again: the due time of the first delivery still
// waiting, now when more are due than limit, zero when nothing waits.
//
// It walks the due index in due order, then, once the pass says so
// (store.DueScan.ByEntry: a company whose receivers hang with a backlog),
// goes on through the index by company and entry, one cursor for each
// entry with deliveries due after the walk's last, merged in due order,
// with the full ones left out.
func (s *Store) DueWebhookDeliveries(now time.Time, limit int, skip DueSkip) ([]WebhookDue, time.Time, error) {
	var due []WebhookDue
	var next time.Time
	err := s.view(func(tx *bolt.Tx) error {
		p := duePass{DueScan: store.DueScan{Limit: limit, Skip: skip}, end: timeKey(now), deliveries: tx.Bucket(bucketWebhookDeliveries)}
		last, err := p.walk(tx.Bucket(bucketWebhookDue))
		if err != nil {
			return err
		}
		if p.ByEntry() {
			p.merge(tx.Bucket(bucketWebhookDueEntries), last)
		}
		due = p.Due
		if p.Full {
			next = now
		} else if k, _ := tx.Bucket(bucketWebhookDue).Cursor().Seek(itob(btoi(p.end) + 1)); k != nil {
			next = time.Unix(0, int64(btoi(k[:8]))).UTC() // the first delivery still waiting
		}
		return nil
	})
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("store: due webhook deliveries: %w", err)
	}
	return due, next, nil
}

// duePass is one pass of DueWebhookDeliveries.
type duePass struct {
	store.DueScan
	end        []byte // now, as a due index key's time
	deliveries *bolt.Bucket
}

// walk reads the due index in due order until nothing more is due or the
// pass stops it (Walked), and returns the last key it read, after which
// a merge by entry goes on.
func (p *duePass) walk(idx *bolt.Bucket) (last []byte, err error) {
	c := idx.Cursor()
	for k, v := c.First(); k != nil && bytes.Compare(k[:8], p.end) <= 0; k, v = c.Next() {
		raw := p.deliveries.Get(k[8:])
		if raw == nil {
			continue // a key without its row, which no attempt could end
		}
		var d WebhookDue
		if len(v) == 16 {
			d.WebhookID, d.CompanyID = btoi(v[:8]), btoi(v[8:])
		} else if d, err = dueOf(raw); err != nil { // a row indexed before dueValue
			return nil, err
		}
		d.ID = btoi(k[8:])
		if !p.Walked(d) {
			return k, nil
		}
	}
	return nil, nil
}

// merge goes on from after the due index key after (due time and id)
// through the index by company and entry, leaving out the full ones (a
// full company in one seek, not one for each of its entries), until the
// pass is full or nothing more is due.
func (p *duePass) merge(idx *bolt.Bucket, after []byte) {
	var heads dueHeads
	find := idx.Cursor()
	for k, _ := find.First(); k != nil; {
		company, entry := btoi(k[:8]), btoi(k[8:16])
		if p.CompanyPassed(company) && company < math.MaxUint64 {
			k, _ = find.Seek(itob(company + 1)) // the next company: none of its entries is read
			continue
		}
		if !p.Passed(company, entry) {
			c := idx.Cursor()
			// The entry's first key after the walk's last: a key one byte
			// longer than the last one's place sorts right after it.
			if h, _ := c.Seek(append(dueEntryKey(company, entry, after[:8], after[8:]), 0)); h != nil &&
				bytes.Equal(h[:16], k[:16]) && bytes.Compare(h[16:24], p.end) <= 0 {
				heads = append(heads, &dueHead{c: c, k: h})
			}
		}
		k, _ = find.Seek(pair(company, entry+1)) // the next entry
	}
	heap.Init(&heads)
	for heads.Len() > 0 {
		h := heads[0]
		company, entry := btoi(h.k[:8]), btoi(h.k[8:16])
		if p.Passed(company, entry) {
			heap.Pop(&heads)
			continue
		}
		if p.deliveries.Get(h.k[24:32]) != nil { // else a key without its row, which no attempt could end
			if !p.See(WebhookDue{ID: btoi(h.k[24:32]), WebhookID: entry, CompanyID: company}) {
				return
			}
		}
		k, _ := h.c.Next()
		if k == nil || !bytes.Equal(k[:16], h.k[:16]) || bytes.Compare(k[16:24], p.end) > 0 {
			heap.Pop(&heads)
			continue
		}
		h.k = k
		heap.Fix(&heads, 0)
	}
}

// dueHead is an entry's cursor in the due index by entry, at its first
// due delivery not yet seen.
type dueHead struct {
	c *bolt.Cursor
	k []byte // company id webhook id next_attempt_at delivery id
}

// dueHeads is a heap of entries' heads, the longest due first.
type dueHeads []*dueHead

func (h dueHeads) Len() int           { return len(h) }
func (h dueHeads) Less(i, j int) bool { return bytes.Compare(h[i].k[16:32], h[j].k[16:32]) < 0 }
func (h dueHeads) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *dueHeads) Push(x any)        { *h = append(*h, x.(*dueHead)) }
func (h *dueHeads) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// dueOf reads a stored delivery's webhook_id and company_id without
// decoding the rest: the dispatcher reads every due row on each pass, and
// the scan stops as soon as it has both (rows written before events were
// shared carry their body after them).
func dueOf(raw []byte) (WebhookDue, error) {
	var d WebhookDue
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil { // {
		return d, err
	}
	var haveWebhook, haveCompany bool
	for dec.More() && !(haveWebhook && haveCompany) {
		key, err := dec.Token()
		if err != nil {
			return d, err
		}
		switch key {
		case "webhook_id":
			err, haveWebhook = dec.Decode(&d.WebhookID), true
		case "company_id":
			err, haveCompany = dec.Decode(&d.CompanyID), true
		default:
			var skip json.RawMessage
			err = dec.Decode(&skip)
		}
		if err != nil {
			return d, err
		}
	}
	if !haveWebhook {
		return d, fmt.Errorf("store: webhook delivery without webhook_id")
	}
	return d, nil
}

// WebhookJob reads a pending delivery with its entry and the company's
// secret, and whether the company is closing (store.WebhookJob.Closing),
// in the same transaction: one look at the company's record, decoded
// only when it carries the mark (markedClosing).
func (s *Store) WebhookJob(id uint64) (WebhookJob, error) {
	var job WebhookJob
	err := s.view(func(tx *bolt.Tx) error {
		if err := getJSON(tx.Bucket(bucketWebhookDeliveries), itob(id), &job.Delivery); err != nil {
			return err
		}
		co := tx.Bucket(bucketCompanies).Get(itob(job.Delivery.CompanyID))
		closing, err := markedClosing(co)
		if err != nil {
			return err
		}
		if co == nil || closing {
			job.Closing = true
			return nil
		}
		if err := deliveryBodyIn(tx, &job.Delivery); err != nil {
			return err
		}
		set, err := loadWebhookSet(tx, job.Delivery.CompanyID)
		if err != nil {
			return err
		}
		job.Secret = set.Secret
		if e := set.Entry(job.Delivery.WebhookID); e != nil {
			entry := *e
			job.Entry = &entry
		}
		return nil
	})
	if err != nil {
		return job, fmt.Errorf("store: webhook delivery %d: %w", id, err)
	}
	return job, nil
}

// RecordWebhookAttempt writes the outcome of one attempt at a pending
// delivery. decide runs inside the write transaction with the delivery and its
// entry (nil when removed; changes to it are stored) and returns the log line:
// its State, StatusCode, Error, DurationMS, CreatedAt and, when pending,
// NextAttemptAt. The store fills in the rest. A pending line moves the
// delivery to its next attempt; delivered or failed ends it, and only the log
// keeps it. The company's log then keeps its newest keep lines (all when keep
// is 0). decide may run more than once (group commit), so it must only
// compute. It returns once the line is durable.
func (s *Store) RecordWebhookAttempt(id uint64, keep int, decide func(d WebhookDelivery, e *WebhookEntry) WebhookAttempt) (WebhookAttempt, error) {
	return s.RecordWebhookAttemptLater(id, keep, decide).Wait()
}

// attemptRecord is an attempt's line on its way through the group commit
// (RecordWebhookAttemptLater).
type attemptRecord struct {
	req *commitReq
	id  uint64
	out WebhookAttempt // set inside the transaction
}

// RecordWebhookAttemptLater queues the write of RecordWebhookAttempt for the
// store's next shared commit and returns at once, so that the attempts of
// many deliveries share one fsync; Wait gives the line once it is durable.
func (s *Store) RecordWebhookAttemptLater(id uint64, keep int, decide func(d WebhookDelivery, e *WebhookEntry) WebhookAttempt) AttemptRecord {
	r := &attemptRecord{id: id}
	if s.commit == nil {
		r.req = newCommitReq(nil, nil)
		r.req.answer(bolterrors.ErrDatabaseReadOnly)
		return r
	}
	r.req = s.commit.submit(func(tx *bolt.Tx) error {
		r.out = WebhookAttempt{}
		a, err := recordAttemptTx(tx, id, keep, decide)
		if err == nil {
			r.out = a
		}
		return err
	})
	return r
}

// Wait returns the attempt's line once it is durable, or the write's error;
// call it once.
func (r *attemptRecord) Wait() (WebhookAttempt, error) {
	if err := r.req.wait(); err != nil {
		return r.out, fmt.Errorf("store: record webhook attempt of delivery %d: %w", r.id, err)
	}
	return r.out, nil
}

// recordAttemptTx is the write of RecordWebhookAttempt, inside the transaction.
func recordAttemptTx(tx *bolt.Tx, id uint64, keep int, decide func(d WebhookDelivery, e *WebhookEntry) WebhookAttempt) (WebhookAttempt, error) {
	deliveries := tx.Bucket(bucketWebhookDeliveries)
	var d WebhookDelivery
	if err := getJSON(deliveries, itob(id), &d); err != nil {
		return WebhookAttempt{}, err
	}
	set, err := loadWebhookSet(tx, d.CompanyID)
	if err != nil {
		return WebhookAttempt{}, err
	}
	entry := set.Entry(d.WebhookID)
	var before WebhookEntry
	if entry != nil {
		before = *entry
	}
	a := decide(d, entry)
	if entry != nil && entryHealthChanged(before, *entry) {
		if err := putJSON(tx.Bucket(bucketWebhookSets), itob(d.CompanyID), set); err != nil {
			return WebhookAttempt{}, err
		}
		if before.DisabledAt.IsZero() && !entry.DisabledAt.IsZero() {
			if err := addActivity(tx, d.CompanyID, Activity{Type: ActWebhookDisabled, At: entry.DisabledAt, Description: fmt.Sprintf("Webhook %d disabled after failed deliveries", entry.ID)}); err != nil {
				return WebhookAttempt{}, err
			}
		}
	}
	if err := deleteDue(tx, d); err != nil {
		return WebhookAttempt{}, err
	}
	d.Attempts++
	if a.State == WebhookPending {
		d.NextAttemptAt = a.NextAttemptAt
		if err := putJSON(deliveries, itob(d.ID), d); err != nil {
			return WebhookAttempt{}, err
		}
		if err := putDue(tx, d); err != nil {
			return WebhookAttempt{}, err
		}
	} else {
		a.NextAttemptAt = time.Time{}
		if err := deliveries.Delete(itob(d.ID)); err != nil {
			return WebhookAttempt{}, err
		}
		if err := endDelivery(tx, d); err != nil {
			return WebhookAttempt{}, err
		}
	}
	a.CompanyID, a.WebhookID, a.EventID, a.DeliveryID, a.EventType, a.Attempt = d.CompanyID, d.WebhookID, d.EventID, d.UUID, d.EventType, d.Attempts
	if err := appendAttempt(tx, &a, keep); err != nil {
		return WebhookAttempt{}, err
	}
	return a, nil
}

// appendAttempt adds a line to the company's log and drops its oldest lines
// beyond keep, so the log's size is bounded on every write, whatever the rate.
func appendAttempt(tx *bolt.Tx, a *WebhookAttempt, keep int) error {
	log := tx.Bucket(bucketWebhookAttempts)
	var err error
	if a.ID, err = log.NextSequence(); err != nil {
		return err
	}
	if err := putJSON(log, pair(a.CompanyID, a.ID), a); err != nil {
		return err
	}
	sizes := tx.Bucket(bucketWebhookLogSizes)
	company := itob(a.CompanyID)
	var n uint64 = 1
	if v := sizes.Get(company); v != nil {
		n += btoi(v)
	}
	c := log.Cursor()
	for keep > 0 && n > uint64(keep) {
		k, _ := c.Seek(company)
		if k == nil || !bytes.HasPrefix(k, company) {
			break
		}
		if err := c.Delete(); err != nil {
			return err
		}
		n--
	}
	return sizes.Put(company, itob(n))
}

// entryHealthChanged reports whether delivery changed what it may change of
// an entry, so an attempt rewrites the set only when it must.
func entryHealthChanged(a, b WebhookEntry) bool {
	return a.Active != b.Active || !a.FailingSince.Equal(b.FailingSince) || !a.DisabledAt.Equal(b.DisabledAt) || a.DisabledReason != b.DisabledReason
}

// WebhookAttempts returns up to limit lines of the company's deliveries log,
// newest first; a webhookID other than 0 keeps only that entry's lines. A
// limit below 1 returns none.
func (s *Store) WebhookAttempts(companyID, webhookID uint64, limit int) ([]WebhookAttempt, error) {
	var out []WebhookAttempt
	if limit < 1 {
		return nil, nil
	}
	err := s.view(func(tx *bolt.Tx) error {
		var err error
		reverse(tx.Bucket(bucketWebhookAttempts), itob(companyID), func(k []byte) bool {
			var a WebhookAttempt
			if err = getJSON(tx.Bucket(bucketWebhookAttempts), k, &a); err != nil {
				return false
			}
			if webhookID == 0 || a.WebhookID == webhookID {
				out = append(out, a)
			}
			return len(out) < limit
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: webhook attempts of company %d: %w", companyID, err)
	}
	return out, nil
}

// PruneWebhookAttempts drops log lines created before cutoff and, per
// company, all but the newest keep (as writes do), and recounts each
// company's log. It returns how many lines it dropped.
func (s *Store) PruneWebhookAttempts(cutoff time.Time, keep int) (int, error) {
	return s.pruneWebhookAttempts(cutoff, keep, pruneWebhookAttemptsBatch)
}

// pruneWebhookAttemptsBatch bounds the log lines one transaction of
// PruneWebhookAttempts reads. The log holds up to LogKeep lines a company
// (1,000 by default), and the prune read and decoded every line of every
// company in one write transaction, each hour: with many companies, every
// send, report and inbound write waited on it. In transactions of this many,
// the group commit's writes go between them.
const pruneWebhookAttemptsBatch = 10000

// pruneWebhookAttempts is PruneWebhookAttempts in transactions that each
// read at most batch lines, walking the log from its newest line backward
// (company by company, each company's newest first), each from where the
// last one stopped. It decodes a line's time only, and only for the newest
// keep of its company: older ones go unread. Each transaction takes the
// lines it drops off its company's count, so that the count stays right for
// the writes between them; the one that finishes a company counts what is
// left of its log, which heals a count that drifted, and the last one drops
// the counts of companies without a line. A line written meanwhile is newer
// than the walk's place and kept; it may leave a company more than keep
// lines until its next write, which drops the oldest beyond keep.
func (s *Store) pruneWebhookAttempts(cutoff time.Time, keep, batch int) (int, error) {
	n, batch := 0, max(batch, 1)
	var (
		last    []byte // the last line read, walking backward; nil: none yet
		company []byte // last's company
		seen    int    // the lines of company read, newest first
		done    bool
	)
	for !done {
		dropped := 0
		var nextLast, nextCompany []byte
		nextSeen := 0
		err := s.update(func(tx *bolt.Tx) error {
			// It may run more than once (commit.go): from the state before it.
			dropped, done = 0, false
			company, seen := company, seen
			b := tx.Bucket(bucketWebhookAttempts)
			c := b.Cursor()
			var k, v []byte
			if last == nil {
				k, v = c.Last()
			} else {
				// The line it stopped at may be gone (a write drops a
				// company's oldest): the next one read is the first before it.
				if k, v = c.Seek(last); k == nil {
					k, v = c.Last()
				}
				for k != nil && bytes.Compare(k, last) >= 0 {
					k, v = c.Prev()
				}
			}
			var drop, finished [][]byte
			var read []byte
			for r := 0; ; r++ {
				if k == nil || !bytes.Equal(k[:8], company) {
					if company != nil {
						finished = append(finished, company)
					}
					if k == nil {
						done = true
						break
					}
					company, seen = bytes.Clone(k[:8]), 0
				}
				if r == batch {
					break
				}
				seen++
				kept := false
				if keep <= 0 || seen <= keep {
					// Only the time is read: the request and answer are most of a line.
					var a struct {
						CreatedAt time.Time `json:"created_at"`
					}
					if err := jsonUnmarshal(v, &a); err != nil {
						return fmt.Errorf("webhook attempt %x: %w", k, err)
					}
					kept = !a.CreatedAt.Before(cutoff)
				}
				read = k
				if !kept {
					drop = append(drop, bytes.Clone(k))
				}
				k, v = c.Prev()
			}
			read = bytes.Clone(read) // before the deletes, which may move it
			less := map[string]uint64{}
			for _, k := range drop {
				if err := b.Delete(k); err != nil {
					return err
				}
				less[string(k[:8])]++
			}
			sizes := tx.Bucket(bucketWebhookLogSizes)
			for id, d := range less {
				var size uint64
				if v := sizes.Get([]byte(id)); len(v) == 8 {
					size = btoi(v)
				}
				if err := putLogSize(sizes, []byte(id), size-min(size, d)); err != nil {
					return err
				}
			}
			// Recount from what is left: a count that ever drifted heals here.
			for _, id := range finished {
				var size uint64
				walkPrefix(b, id, func(_, _ []byte) bool { size++; return true })
				if err := putLogSize(sizes, id, size); err != nil {
					return err
				}
			}
			if done {
				var stale [][]byte
				if err := sizes.ForEach(func(id, _ []byte) error {
					if k, _ := b.Cursor().Seek(id); k == nil || !bytes.HasPrefix(k, id) {
						stale = append(stale, bytes.Clone(id))
					}
					return nil
				}); err != nil {
					return err
				}
				for _, id := range stale {
					if err := sizes.Delete(id); err != nil {
						return err
					}
				}
			}
			dropped = len(drop)
			if read != nil {
				nextLast = read
			} else {
				nextLast = last
			}
			nextCompany, nextSeen = company, seen
			return nil
		})
		if err != nil {
			return n, fmt.Errorf("store: prune webhook attempts: %w", err)
		}
		n += dropped
		last, company, seen = nextLast, nextCompany, nextSeen
	}
	return n, nil
}

// putLogSize stores a company's count of log lines; none: no entry.
func putLogSize(sizes *bolt.Bucket, company []byte, n uint64) error {
	if n == 0 {
		return sizes.Delete(company)
	}
	return sizes.Put(company, itob(n))
}
