package postgres

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simrelay/simrelay/store"
)

// The send path: Enqueue and EnqueueBulk keep every rule of a send in its
// one transaction (the idempotency key, the device, the opt-outs, the
// plan's message limit, the daily storage budget), and Cancel takes a
// waiting message back; the sweeps (ReleaseDue, ExpireQueued) are in
// sweeps.go. doc.go says which key columns of messages each status sets.

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

// optOutRefusal refuses an SMS (channel sms or unset) to a number on the
// company's list with an *store.OptOutError naming index (-1 for a single
// send); other channels are not SMS and pass.
func optOutRefusal(t *txn, companyID uint64, channel, phone string, index int) error {
	if channel != "" && channel != "sms" {
		return nil
	}
	listed, err := onOptOutList(t, companyID, phone)
	if err != nil {
		return err
	}
	if listed {
		return &store.OptOutError{Phone: phone, Index: index}
	}
	return nil
}

// onOptOutList says whether phone is on the company's list.
func onOptOutList(t *txn, companyID uint64, phone string) (listed bool, err error) {
	err = t.row("SELECT EXISTS (SELECT 1 FROM opt_outs WHERE company_id = $1 AND phone = $2)", id(companyID), phone).Scan(&listed)
	return listed, err
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

// insertSend writes a new message (its ID taken from the table's
// sequence) with its key columns.
func insertSend(t *txn, m store.Message) error {
	raw, err := rec(m)
	if err != nil {
		return err
	}
	var clientID any
	if m.Direction == store.Inbound && m.ClientID != "" {
		clientID = m.ClientID
	}
	place, due, expires := sendColumns(m)
	_, err = t.exec(`INSERT INTO messages (id, company_id, device_id, uuid, direction, channel, phone, status, client_id,
			priority, queue_place, due_at, expires_at, created_at, updated_at, rec)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)`,
		id(m.ID), id(m.CompanyID), id(m.DeviceID), m.UUID, m.Direction, m.Channel, m.Phone, m.Status, clientID,
		int16(m.Priority), place, due, expires, m.CreatedAt, m.UpdatedAt, raw)
	return err
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

// EnqueueBulk stores many outbound messages of one company (ms[0]'s) for
// the device ms[0] names, each with its own phone, text and uuid, in one
// transaction: all of them or, on any refusal, none. The plan's message
// limit counts each message, the budget their sum, and an opted-out
// recipient refuses the whole request with an *store.OptOutError naming
// its index. With an idempotency key, the key's first answer comes back
// instead as prior. answer builds the response from the stored messages,
// in input order.
func (s *Store) EnqueueBulk(ms []store.Message, idemKey store.IdempotencyKey, now func() time.Time, check store.DeviceCheck, answer func([]store.Message) (int, []byte)) ([]store.Message, *store.Idempotent, error) {
	if len(ms) == 0 {
		return nil, nil, errors.New("store: bulk enqueue of no messages")
	}
	var out []store.Message
	var prior *store.Idempotent
	companyID := ms[0].CompanyID
	err := s.write("bulk enqueue", func(t *txn) error {
		out, prior = nil, nil
		at := now().UTC()
		ik, p, err := priorAnswer(t, companyID, idemKey, at)
		if err != nil || p != nil {
			prior = p
			return err
		}
		routed := make([]store.Message, len(ms))
		copy(routed, ms)
		for i := range routed {
			routed[i].CompanyID = companyID
		}
		facts, err := s.readSendFacts(t, companyID, routed, at)
		if err != nil {
			return err
		}
		d, r, err := route(t, &routed[0], check, at)
		if err != nil {
			return err
		}
		devs := make([]uint64, len(ms))
		devs[0] = d.ID
		for i := 1; i < len(routed); i++ {
			di, err := r.next(&routed[i])
			if err != nil {
				return err
			}
			devs[i] = di.ID
		}
		var cost int64
		for i, m := range routed {
			if err := facts.optOut(m, i); err != nil {
				return err
			}
			cost += store.MessageCost(m)
		}
		usage, err := planAllowsUnder(t, companyID, facts.limits, store.LimitMessages)
		if err != nil {
			return err
		}
		if err := usage.room(int64(len(ms))); err != nil {
			return err
		}
		if err := s.addUsed(t, companyID, at, cost, facts.stored, true); err != nil {
			return err
		}
		if err := usage.add(t, int64(len(ms))); err != nil {
			return err
		}
		if err := r.commit(); err != nil {
			return err
		}
		ids, err := nextIDs(t, "messages", len(routed))
		if err != nil {
			return err
		}
		for i := range routed {
			newOutbound(&routed[i], devs[i], at)
			routed[i].ID = ids[i]
		}
		if err := queueAllIn(t, routed); err != nil {
			return err
		}
		if err := insertOutbound(t, routed); err != nil {
			return err
		}
		if err := ik.keep(t, at, func() (int, []byte) { return answer(routed) }); err != nil {
			return err
		}
		out = routed
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return out, prior, nil
}

// ImportMessages stores finished history (delivered, failed or received
// messages, with their UUIDs and times set) in one transaction, counting
// them in the stats as they stand. Device names the fingerprint of a live
// device of the message's company, whose id the message takes; any other
// is store.ErrDeviceGone and nothing is stored. IDs and DeviceIDs are set
// in msgs.
func (s *Store) ImportMessages(msgs []store.Message) error {
	type devName struct {
		companyID   uint64
		fingerprint string
	}
	return s.write("import messages", func(t *txn) error {
		ids := map[devName]uint64{}
		for i := range msgs {
			m := &msgs[i]
			name := devName{m.CompanyID, m.Device}
			if ids[name] == 0 {
				d, err := liveDevice(t, m.CompanyID, m.Device, false)
				if err != nil {
					return fmt.Errorf("message %s: device %s: %w", m.UUID, m.Device, err)
				}
				ids[name] = d.ID
			}
			msgID, err := nextID(t, "messages")
			if err != nil {
				return err
			}
			m.ID, m.DeviceID = msgID, ids[name]
			if err := insertSend(t, *m); err != nil {
				return err
			}
			if m.Direction == store.Inbound {
				err = count(t, *m, m.CreatedAt, store.Counts{Received: 1})
			} else {
				at := m.UpdatedAt
				if at.IsZero() {
					at = m.CreatedAt
				}
				err = count(t, *m, at, store.StatusCounts(*m, store.MsgQueued, m.Status))
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// MessageByUUID returns a message of the company by its uuid (the queue
// id of an outbound one); another company's is store.ErrNotFound.
func (s *Store) MessageByUUID(companyID uint64, uuid string) (store.Message, error) {
	var m store.Message
	err := s.read("message "+uuid, func(t *txn) error {
		return getRec(t, &m, "SELECT rec FROM messages WHERE company_id = $1 AND uuid = $2", id(companyID), uuid)
	})
	return m, err
}

// Cancel takes back a scheduled or queued (held or not) outbound SMS of
// the company by its uuid: it leaves the queue or the schedule in the same
// transaction, so no dispatch reads it afterwards, and becomes canceled.
// Another company's message, an inbound one, a WhatsApp or iMessage one,
// or an unknown uuid is store.ErrNotFound; one past queued is
// store.ErrNotCancelable, with the message as it is.
func (s *Store) Cancel(companyID uint64, uuid string, now time.Time) (store.Message, error) {
	var out store.Message
	err := s.write("cancel message "+uuid, func(t *txn) error {
		out = store.Message{}
		var m store.Message
		if err := getRec(t, &m, "SELECT rec FROM messages WHERE company_id = $1 AND uuid = $2 FOR UPDATE", id(companyID), uuid); err != nil {
			return err
		}
		// The SMS queue's route cancels SMS only, as it reads SMS only.
		if m.Direction != store.Outbound || store.IsAgentChannel(m.Channel) {
			return store.ErrNotFound
		}
		out = m
		if m.Status != store.MsgScheduled && m.Status != store.MsgQueued {
			return store.ErrNotCancelable
		}
		from := m.Status
		m.Status, m.Error, m.UpdatedAt = store.MsgCanceled, "", now.UTC()
		if err := countTransition(t, m, from, "", now); err != nil {
			return err
		}
		if err := updateSend(t, m); err != nil {
			return err
		}
		out = m
		return nil
	})
	return out, err
}

// PruneIdempotency drops idempotency answers kept before cutoff.
func (s *Store) PruneIdempotency(cutoff time.Time) (int, error) {
	var n int
	err := s.write("prune idempotency answers", func(t *txn) error {
		tag, err := t.exec("DELETE FROM idempotency WHERE created_at < $1", cutoff)
		n = int(tag.RowsAffected())
		return err
	})
	return n, err
}

// AddOptOut puts phone (E.164) on the company's list, counting it against
// the daily budget; created is false when it was there already (and the
// stored entry comes back unchanged, costing nothing).
func (s *Store) AddOptOut(companyID uint64, phone string, now time.Time) (o store.OptOut, created bool, err error) {
	err = s.write("add opt-out", func(t *txn) error {
		o, created = store.OptOut{Phone: phone, Source: store.OptOutAPI, CreatedAt: now.UTC()}, true
		raw, err := rec(o)
		if err != nil {
			return err
		}
		tag, err := t.exec("INSERT INTO opt_outs (company_id, phone, rec) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING", id(companyID), phone, raw)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			created = false
			return getRec(t, &o, "SELECT rec FROM opt_outs WHERE company_id = $1 AND phone = $2", id(companyID), phone)
		}
		return s.charge(t, companyID, now, store.OptOutCost)
	})
	if err != nil {
		return store.OptOut{}, false, err
	}
	return o, created, nil
}

// RemoveOptOut takes phone off the company's list; store.ErrNotFound when
// it is not on it.
func (s *Store) RemoveOptOut(companyID uint64, phone string) error {
	return s.write("remove opt-out", func(t *txn) error {
		tag, err := t.exec("DELETE FROM opt_outs WHERE company_id = $1 AND phone = $2", id(companyID), phone)
		if err == nil && tag.RowsAffected() == 0 {
			return store.ErrNotFound
		}
		return err
	})
}

// OptOuts returns one page of the company's list in number order (after
// the number after, "" for the first page), at most limit entries.
func (s *Store) OptOuts(companyID uint64, after string, limit int) ([]store.OptOut, error) {
	var out []store.OptOut
	err := s.read("opt-outs", func(t *txn) error {
		var err error
		out, err = getRecs[store.OptOut](t, "SELECT rec FROM opt_outs WHERE company_id = $1 AND phone > $2 ORDER BY phone LIMIT $3",
			id(companyID), after, max(limit, 0))
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// OptedOut reports whether phone (E.164, or a keyword sender's form) is on
// the company's list. A send reads the list again in its own transaction;
// this read is for a caller that wants to know before it sends.
func (s *Store) OptedOut(companyID uint64, phone string) (bool, error) {
	var listed bool
	err := s.read("opt-out", func(t *txn) (err error) {
		listed, err = onOptOutList(t, companyID, phone)
		return err
	})
	return listed, err
}

// StorageUsed is how many bytes the company has added on t's UTC day.
func (s *Store) StorageUsed(companyID uint64, t time.Time) (int64, error) {
	var used int64
	err := s.read("storage used", func(tx *txn) error {
		return tx.row("SELECT coalesce(sum(used), 0) FROM storage_usage WHERE company_id = $1 AND day = $2", id(companyID), day(t)).Scan(&used)
	})
	return used, err
}

// PruneStorageCounters drops the daily storage counters of UTC days before
// the one of cutoff (only today's is ever consulted) and says how many
// company days it dropped, whatever the shards they were split in.
func (s *Store) PruneStorageCounters(cutoff time.Time) (int, error) {
	var n int
	err := s.write("prune storage counters", func(t *txn) error {
		return t.row(`WITH gone AS (DELETE FROM storage_usage WHERE day < $1 RETURNING company_id, day)
			SELECT count(*) FROM (SELECT DISTINCT company_id, day FROM gone) d`, day(cutoff)).Scan(&n)
	})
	return n, err
}

// Usage is what a company has used of its plan: messages queued in the
// period starting at periodStart, and its live devices.
func (s *Store) Usage(companyID uint64, periodStart time.Time) (messages int64, devices int, err error) {
	err = s.read("usage", func(t *txn) error {
		if err := t.row("SELECT coalesce(sum(used), 0) FROM plan_usage WHERE company_id = $1 AND period_start = $2",
			id(companyID), periodStart).Scan(&messages); err != nil {
			return err
		}
		return t.row("SELECT count(*) FROM devices WHERE company_id = $1 AND deleted_at IS NULL", id(companyID)).Scan(&devices)
	})
	if err != nil {
		return 0, 0, err
	}
	return messages, devices, nil
}

// NextDue returns the send_at of the earliest scheduled message, or the
// opening of the earliest held one's window; ok is false when none waits.
func (s *Store) NextDue() (at time.Time, ok bool, err error) {
	err = s.read("next scheduled message", func(t *txn) error {
		var due *time.Time
		if err := t.row("SELECT min(due_at) FROM messages WHERE due_at IS NOT NULL").Scan(&due); err != nil {
			return err
		}
		if due != nil {
			at, ok = due.UTC(), true
		}
		return nil
	})
	if err != nil {
		return time.Time{}, false, err
	}
	return at, ok, nil
}
