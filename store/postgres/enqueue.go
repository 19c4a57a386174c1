package postgres

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/simrelay/simrelay/store"
)

// A single send (Enqueue, what POST /chat/send and each durable send make)
// is the path a cluster's throughput rests on: every node's sends share one
// database, and a send's round trips, not its work there, are most of its
// time. So it reads in one round trip, the transaction's BEGIN going with
// it (txn.go), and writes in one, then COMMIT (TestSendCost):
//
//   - readSend's batch claims the idempotency key, reads the send's facts
//     (readSendFacts), and for a send to a device locks the device and then
//     reads its SIM's caps and counts, under that lock (for a send through
//     a pool, reads the pool: queuePool). The results are
//     checked afterwards in the order the checks ran one by one (the key's
//     earlier answer, the device, the SIM's caps, the opt-outs, the plan,
//     the budget), so the same refusal wins when several apply;
//   - the write batch adds to the plan's usage, locking its row and reading
//     the period's use back when the plan caps messages (queueAllowAdd: its
//     refusal is then the batch's error, and the rollback undoes the rest of
//     the batch), writes the route's counts, inserts the message with its
//     id and its queue place taken inside the INSERT (queueNewSend), and
//     adds to the storage use, the last row every write locks
//     (txn.chargeStorage).
//
// The locks are taken in the order they always were (the key's row, the
// device's row, the plan's row, the day's storage use last), so sends
// still meet in one order. A send
// that replays its key's earlier answer writes nothing, as before, but has
// read and locked its device in the same batch until it commits.
// Rare paths keep their own round trips: a key that was used before
// (settle), a send through a pool (its record and, for a sticky pool, the
// recipient's last member are read in the read batch; its members are
// looked at one by one),
// a SIM with a recipients cap (known), a send the budget refuses (the plan
// is checked first, as it was), and an idempotency key's answer, built from
// the stored message once its id and place are known.

// sendReads are the results of readSend's batch.
type sendReads struct {
	claimed bool // the key's row was inserted: this send holds the key
	facts   sendFacts
	dev     store.Device
	devErr  error // store.ErrDeviceGone: the device send names no live device
	tally   *simTally
	pool    *poolRead // a send through a pool: the pool, read unlocked
}

// readSend reads what a single send m checks, in one round trip.
func (s *Store) readSend(t *txn, m store.Message, k answerKey, now time.Time) (*sendReads, error) {
	r := &sendReads{tally: newSIMTally(t, now)}
	b := &pgx.Batch{}
	if k.key.Key != "" {
		b.Queue(claimSQL, k.claimArgs(now)...).Exec(func(tag pgconn.CommandTag) error {
			r.claimed = tag.RowsAffected() == 1
			return nil
		})
	}
	sql, args := s.sendFactsQuery(m.CompanyID, []store.Message{m}, now)
	b.Queue(sql, args...).QueryRow(func(row pgx.Row) error {
		var err error
		r.facts, err = s.scanSendFacts(row, now)
		return err
	})
	if m.Pool != "" {
		r.pool = queuePool(b, m.CompanyID, m.Pool, m.Phone, now, true)
	} else {
		// As liveDevice(..., true) reads it.
		b.Queue("SELECT rec FROM devices WHERE company_id = $1 AND fingerprint = $2 AND deleted_at IS NULL FOR UPDATE",
			id(m.CompanyID), m.Device).QueryRow(func(row pgx.Row) error {
			var raw []byte
			err := row.Scan(&raw)
			if errors.Is(err, pgx.ErrNoRows) {
				r.devErr = store.ErrDeviceGone
				return nil
			}
			if err != nil {
				return err
			}
			return json.Unmarshal(raw, &r.dev)
		})
		r.tally.queueSIM(b, m.CompanyID, m.Device, m.SIMSlot)
	}
	if err := t.sendBatch(b); err != nil {
		return nil, err
	}
	return r, nil
}

// queueNewSend queues the insert of a new message m (its id taken from the
// table's sequence in the statement, and, when it waits in its device's
// queue, its place as takePlaces takes it: the device is locked already),
// setting m's ID and QueueSeq once the batch has run.
func queueNewSend(b *pgx.Batch, m *store.Message) error {
	m.ID = 0
	raw, err := rec(m)
	if err != nil {
		return err
	}
	var clientID any
	if m.Direction == store.Inbound && m.ClientID != "" {
		clientID = m.ClientID
	}
	queued := m.Status == store.MsgQueued && !m.Held()
	_, due, expires := sendColumns(*m)
	b.Queue(`WITH n AS (SELECT nextval(pg_get_serial_sequence('messages', 'id')) AS id),
			p AS (UPDATE devices SET next_place = nextval('queue_places') WHERE id = $2 AND deleted_at IS NULL AND $15
				RETURNING next_place)
		INSERT INTO messages (id, company_id, device_id, uuid, direction, channel, phone, status, client_id,
			priority, queue_place, due_at, expires_at, created_at, updated_at, rec)
		SELECT n.id, $1, $2, $3, $4, $5, $6, $7, $8, $9, p.next_place, $10, $11, $12, $13,
			CASE WHEN p.next_place IS NULL THEN jsonb_set($14::jsonb, '{id}', to_jsonb(n.id))
			ELSE jsonb_set(jsonb_set($14::jsonb, '{id}', to_jsonb(n.id)), '{queue_seq}', to_jsonb(p.next_place)) END
		FROM n LEFT JOIN p ON true
		RETURNING id, queue_place`,
		id(m.CompanyID), id(m.DeviceID), m.UUID, m.Direction, m.Channel, m.Phone, m.Status, clientID,
		int16(m.Priority), due, expires, m.CreatedAt, m.UpdatedAt, raw, queued).QueryRow(func(row pgx.Row) error {
		var msgID int64
		var place *int64
		if err := row.Scan(&msgID, &place); err != nil {
			return err
		}
		if queued && place == nil {
			return store.ErrDeviceGone // as takePlaces says it
		}
		m.ID = uint64(msgID)
		if place != nil {
			m.QueueSeq = uint64(*place)
		}
		return nil
	})
	return nil
}

// Enqueue stores an outbound message (queued, or scheduled with a send_at)
// and, with an idempotency key, the answer to give for it; the key's
// earlier answer comes back instead when the company used the key on the
// route within a day (and nothing is queued). answer builds the response
// from the stored message. check vets the device inside the transaction;
// its error, like every refusal (a device gone or disabled, an opted-out
// recipient, the plan's limit, the budget), is the send's error and
// nothing is written.
func (s *Store) Enqueue(m *store.Message, idemKey store.IdempotencyKey, now func() time.Time, check store.DeviceCheck, answer func(store.Message) (int, []byte)) (store.Message, *store.Idempotent, error) {
	var out store.Message
	var prior *store.Idempotent
	err := s.write("enqueue", func(t *txn) error {
		out, prior = store.Message{}, nil
		at := now().UTC()
		msg := *m
		ik := answerKey{companyID: msg.CompanyID, key: idemKey}
		rd, err := s.readSend(t, msg, ik, at)
		if err != nil {
			return err
		}
		if idemKey.Key != "" && !rd.claimed {
			p, err := ik.settle(t, at)
			if err != nil || p != nil {
				prior = p
				return err
			}
		}
		var d store.Device
		var r *router
		if msg.Pool != "" {
			d, r, err = routePool(t, &msg, rd.pool, check, at, nil)
		} else {
			r = &router{tally: rd.tally}
			d, err = r.onDevice(&msg, check, rd.dev, rd.devErr)
		}
		if err != nil {
			return err
		}
		if err := rd.facts.optOut(msg, -1); err != nil {
			return err
		}
		newOutbound(&msg, d.ID, at)
		cost := store.MessageCost(msg)
		if err := s.overBudget(msg.CompanyID, at, cost, rd.facts.stored); err != nil {
			// The plan was checked before the budget: its refusal wins.
			if _, perr := planAllowsUnder(t, msg.CompanyID, rd.facts.limits, store.LimitMessages); perr != nil {
				return perr
			}
			return err
		}
		b := &pgx.Batch{}
		usageSlot{companyID: msg.CompanyID, limits: rd.facts.limits}.queueAllowAdd(t, b, 1)
		r.queueCommit(b)
		if err := queueNewSend(b, &msg); err != nil {
			return err
		}
		t.chargeStorage(msg.CompanyID, day(at), cost)
		t.queueCharges(b) // last, as every write's (txn.chargeStorage)
		if err := t.sendBatch(b); err != nil {
			return err
		}
		if err := ik.keep(t, at, func() (int, []byte) { return answer(msg) }); err != nil {
			return err
		}
		out = msg
		return nil
	})
	if err != nil {
		return out, nil, err
	}
	return out, prior, nil
}
