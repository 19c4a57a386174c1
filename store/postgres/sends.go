package postgres

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simrelay/simrelay/store"
)

// The send path: Enqueue (enqueue.go) and EnqueueBulk (bulk.go) keep every
// rule of a send in its one transaction (the idempotency key, the device,
// the opt-outs, the plan's message limit, the daily storage budget); this
// file holds the rules and the writes they share, optouts.go the opt-out
// list. Cancel (cancel.go) takes a waiting message back; the sweeps
// (ReleaseDue, ExpireQueued) are in sweeps.go. doc.go says which key
// columns of messages each status sets.

// idempotencyTTL is how long a company's Idempotency-Key keeps its answer.
const idempotencyTTL = 24 * time.Hour

// failedOptedOut is the error of a scheduled job failed at its release
// because its number opted out since it was stored.
const failedOptedOut = "recipient_opted_out"

// answerKey is one send request's Idempotency-Key inside its transaction,
// claimed (its row written and locked) by priorAnswer; a zero Key is none.
type answerKey struct {
	companyID uint64
	key       store.IdempotencyKey
}

// priorAnswer looks the company's key up on its route. When the key answered
// within the last day, that answer comes back and the caller returns it
// instead of storing anything (the caller compares its Digest with its
// own). Otherwise the key's row is claimed for this transaction: inserted,
// or taken over from an expired answer, and locked until the commit, so a
// retry racing this send waits for it and then replays its answer.
func priorAnswer(t *txn, companyID uint64, key store.IdempotencyKey, now time.Time) (answerKey, *store.Idempotent, error) {
	if key.Key == "" {
		return answerKey{}, nil, nil
	}
	k := answerKey{companyID: companyID, key: key}
	tag, err := t.exec(claimSQL, k.claimArgs(now)...)
	if err != nil {
		return k, nil, err
	}
	if tag.RowsAffected() == 1 {
		return k, nil, nil
	}
	p, err := k.settle(t, now)
	return k, p, err
}

// claimSQL claims a key's row when no answer holds it (claimArgs).
const claimSQL = `INSERT INTO idempotency (company_id, route, key, created_at) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`

func (k answerKey) claimArgs(now time.Time) []any {
	return []any{id(k.companyID), k.key.Route, k.key.Key, now}
}

// settle is priorAnswer once the claim found the key's row there: the row
// is committed (the claim waited for its writer), so its answer is
// replayed, or the row taken over once expired.
func (k answerKey) settle(t *txn, now time.Time) (*store.Idempotent, error) {
	var created time.Time
	var raw []byte
	err := t.row("SELECT created_at, rec FROM idempotency WHERE company_id = $1 AND route = $2 AND key = $3 FOR UPDATE",
		id(k.companyID), k.key.Route, k.key.Key).Scan(&created, &raw)
	if errors.Is(mapErr(err), store.ErrNotFound) {
		return nil, errAgain // pruned since the insert: claim it again
	}
	if err != nil {
		return nil, err
	}
	if raw != nil && now.Sub(created) < idempotencyTTL {
		var prior store.Idempotent
		if err := json.Unmarshal(raw, &prior); err != nil {
			return nil, err
		}
		return &prior, nil
	}
	_, err = t.exec("UPDATE idempotency SET created_at = $4, rec = NULL WHERE company_id = $1 AND route = $2 AND key = $3",
		id(k.companyID), k.key.Route, k.key.Key, now)
	return nil, err
}

// keep records the answer of the request that claimed the key, in the
// transaction that stores what it sent; without a key it does nothing
// (and builds no answer).
func (k answerKey) keep(t *txn, at time.Time, answer func() (int, []byte)) error {
	if k.key.Key == "" {
		return nil
	}
	status, body := answer()
	raw, err := rec(store.Idempotent{Status: status, Body: body, CreatedAt: at, Route: k.key.Route, Digest: k.key.Digest})
	if err != nil {
		return err
	}
	_, err = t.exec("UPDATE idempotency SET created_at = $4, rec = $5 WHERE company_id = $1 AND route = $2 AND key = $3",
		id(k.companyID), k.key.Route, k.key.Key, at, raw)
	return err
}

// sendFacts are what a send checks of its company that no row lock guards
// (the opt-out list and the storage budget never were; the plan's limits
// are read, the exact count is locked later by planAllowsUnder), read in
// one statement before the send locks its device: the company's plan
// limits, which of the recipients of its SMS opted out, and the bytes the
// company added today (when a budget is set).
type sendFacts struct {
	limits   store.PlanLimits
	optedOut map[string]bool
	stored   int64
}

// optOut refuses the send's SMS (channel sms or unset) to a listed number
// with an *store.OptOutError naming index (-1 for a single send), as
// optOutRefusal does.
func (f sendFacts) optOut(m store.Message, index int) error {
	if (m.Channel == "" || m.Channel == "sms") && f.optedOut[m.Phone] {
		return &store.OptOutError{Phone: m.Phone, Index: index}
	}
	return nil
}

// readSendFacts reads the facts of a send of the company's messages ms.
func (s *Store) readSendFacts(t *txn, companyID uint64, ms []store.Message, now time.Time) (sendFacts, error) {
	sql, args := s.sendFactsQuery(companyID, ms, now)
	return s.scanSendFacts(t.row(sql, args...), now)
}

// sendFactsQuery is the statement that reads the facts of a send of the
// company's messages ms (scanSendFacts reads its row).
func (s *Store) sendFactsQuery(companyID uint64, ms []store.Message, now time.Time) (string, []any) {
	phones := make([]string, 0, len(ms))
	for _, m := range ms {
		if m.Channel == "" || m.Channel == "sms" {
			phones = append(phones, m.Phone)
		}
	}
	return `SELECT CASE WHEN $4 THEN (SELECT rec FROM subscriptions WHERE company_id = $1) END,
			(SELECT coalesce(array_agg(phone), '{}') FROM opt_outs WHERE company_id = $1 AND phone = ANY($2)),
			CASE WHEN $5 THEN (SELECT coalesce(sum(used), 0) FROM storage_usage WHERE company_id = $1 AND day = $3) ELSE 0 END`,
		[]any{id(companyID), phones, day(now), s.plans != nil, s.dailyBudget > 0}
}

func (s *Store) scanSendFacts(row pgx.Row, now time.Time) (sendFacts, error) {
	f := sendFacts{optedOut: map[string]bool{}}
	var sub []byte
	var listed []string
	if err := row.Scan(&sub, &listed, &f.stored); err != nil {
		return f, err
	}
	for _, p := range listed {
		f.optedOut[p] = true
	}
	var err error
	f.limits, err = s.limitsOf(sub, now)
	return f, err
}

// sendColumns are the key columns of an outbound message as its status
// says it waits (doc.go): its queue place while queued in its device's
// queue, its due time while scheduled or held, and its end while queued
// (held or not).
func sendColumns(m store.Message) (queuePlace, dueAt, expiresAt any) {
	switch {
	case m.Status == store.MsgScheduled || m.Held():
		dueAt = m.DueAt()
	case m.Status == store.MsgQueued:
		queuePlace = id(m.QueuePlace())
	}
	if m.Status == store.MsgQueued && !m.ExpiresAt.IsZero() {
		expiresAt = m.ExpiresAt
	}
	return queuePlace, dueAt, expiresAt
}

// sendColumnNames are the columns of a new message's row, in the order
// of sendArgs, its values (ImportMessages copies them).
var sendColumnNames = []string{"id", "company_id", "device_id", "uuid", "direction", "channel", "phone", "status", "client_id",
	"priority", "queue_place", "due_at", "expires_at", "created_at", "updated_at", "rec"}

func sendArgs(m store.Message) ([]any, error) {
	raw, err := rec(m)
	if err != nil {
		return nil, err
	}
	var clientID any
	if m.Direction == store.Inbound && m.ClientID != "" {
		clientID = m.ClientID
	}
	place, due, expires := sendColumns(m)
	return []any{id(m.ID), id(m.CompanyID), id(m.DeviceID), m.UUID, m.Direction, m.Channel, m.Phone, m.Status, clientID,
		int16(m.Priority), place, due, expires, m.CreatedAt, m.UpdatedAt, raw}, nil
}

// nextIDs takes n ids of a table's identity column, rising.
func nextIDs(t *txn, table string, n int) ([]uint64, error) {
	rows, err := t.query("SELECT nextval(pg_get_serial_sequence($1, 'id')) AS n FROM generate_series(1, $2) ORDER BY n", table, n)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	ids := make([]uint64, 0, n)
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		ids = append(ids, uint64(v))
	}
	return ids, rows.Err()
}

// insertOutbound writes new outbound messages of one company, their ids
// set, with their key columns, in one statement.
func insertOutbound(t *txn, ms []store.Message) error {
	n := len(ms)
	var (
		ids, devs               = make([]int64, n), make([]int64, n)
		uuids, channels, phones = make([]string, n), make([]string, n), make([]string, n)
		statuses, recs          = make([]string, n), make([]string, n)
		priorities              = make([]int16, n)
		places                  = make([]*int64, n)
		dues, expires           = make([]*time.Time, n), make([]*time.Time, n)
		created, updated        = make([]time.Time, n), make([]time.Time, n)
	)
	for i, m := range ms {
		raw, err := rec(m)
		if err != nil {
			return err
		}
		ids[i], devs[i], uuids[i], channels[i], phones[i], statuses[i], recs[i] = id(m.ID), id(m.DeviceID), m.UUID, m.Channel, m.Phone, m.Status, string(raw)
		priorities[i], created[i], updated[i] = int16(m.Priority), m.CreatedAt, m.UpdatedAt
		place, due, expiresAt := sendColumns(m)
		if v, ok := place.(int64); ok {
			places[i] = &v
		}
		if v, ok := due.(time.Time); ok {
			dues[i] = &v
		}
		if v, ok := expiresAt.(time.Time); ok {
			expires[i] = &v
		}
	}
	_, err := t.exec(`INSERT INTO messages (id, company_id, device_id, uuid, direction, channel, phone, status,
			priority, queue_place, due_at, expires_at, created_at, updated_at, rec)
		SELECT m.id, $1, m.device_id, m.uuid, $2, m.channel, m.phone, m.status, m.priority, m.queue_place, m.due_at, m.expires_at,
			m.created_at, m.updated_at, m.rec::jsonb
		FROM unnest($3::bigint[], $4::bigint[], $5::text[], $6::text[], $7::text[], $8::text[], $9::smallint[], $10::bigint[],
			$11::timestamptz[], $12::timestamptz[], $13::timestamptz[], $14::timestamptz[], $15::text[])
			AS m (id, device_id, uuid, channel, phone, status, priority, queue_place, due_at, expires_at, created_at, updated_at, rec)`,
		id(ms[0].CompanyID), store.Outbound, ids, devs, uuids, channels, phones, statuses, priorities, places, dues, expires, created, updated, recs)
	return err
}

// updateSend writes a stored outbound message's record and key columns,
// its device's too (a WhatsApp or iMessage job taken by its number's new
// agent becomes that registration's).
func updateSend(t *txn, m store.Message) error {
	raw, err := rec(m)
	if err != nil {
		return err
	}
	place, due, expires := sendColumns(m)
	_, err = t.exec(`UPDATE messages SET status = $2, queue_place = $3, due_at = $4, expires_at = $5, updated_at = $6, rec = $7,
			device_id = $8
		WHERE id = $1`, id(m.ID), m.Status, place, due, expires, m.UpdatedAt, raw, id(m.DeviceID))
	return err
}

// newOutbound makes m a new outbound message of the device at at: its
// status (scheduled with a send_at ahead, else queued) and times. Its id
// comes when it is stored (queueNewSend).
func newOutbound(m *store.Message, deviceID uint64, at time.Time) {
	m.ID, m.DeviceID, m.Direction, m.Status = 0, deviceID, store.Outbound, store.MsgQueued
	if !m.SendAt.IsZero() {
		m.Status = store.MsgScheduled
	}
	m.CreatedAt, m.UpdatedAt = at, at
}

// PruneIdempotency drops idempotency answers kept before cutoff.
func (s *Store) PruneIdempotency(cutoff time.Time) (int, error) {
	return s.pruneBatches("prune idempotency answers", func(t *txn, limit int) (int, error) {
		return deleteSome(t, "idempotency", "created_at < $2", limit, cutoff)
	})
}
