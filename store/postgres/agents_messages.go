package postgres

// An agent number's messages: the send (EnqueueAgent), the jobs a phone's
// agent reads, the history of both directions, and the send times that the
// number's limits count.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simrelay/simrelay/store"
)

// sendTimes lists the number's accepted sends since since, oldest first:
// what the governor rebuilds its windows from.
func sendTimes(t *txn, companyID, numberID uint64, since time.Time) ([]time.Time, error) {
	rows, err := t.query("SELECT sent_at FROM agent_sends WHERE company_id = $1 AND number_id = $2 AND sent_at >= $3 ORDER BY sent_at, message_id",
		id(companyID), id(numberID), since)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []time.Time
	for rows.Next() {
		var at time.Time
		if err := rows.Scan(&at); err != nil {
			return nil, err
		}
		out = append(out, at.UTC())
	}
	return out, rows.Err()
}

// AgentSendsSince counts the number's accepted sends since since.
func (s *Store) AgentSendsSince(companyID, numberID uint64, since time.Time) (int, error) {
	n := 0
	err := s.read("accepted sends", func(t *txn) error {
		return t.row("SELECT count(*) FROM agent_sends WHERE company_id = $1 AND number_id = $2 AND sent_at >= $3",
			id(companyID), id(numberID), since).Scan(&n)
	})
	return n, err
}

// AgentSendTimes lists the number's accepted sends since since (for a
// governor that has not seen the number since it started).
func (s *Store) AgentSendTimes(companyID, numberID uint64, since time.Time) ([]time.Time, error) {
	var out []time.Time
	err := s.read("accepted sends", func(t *txn) error {
		var err error
		out, err = sendTimes(t, companyID, numberID, since)
		return err
	})
	return out, err
}

// PruneAgentSends drops entries of the index of accepted sends older than
// cutoff: the governor's longest window is a day.
func (s *Store) PruneAgentSends(cutoff time.Time) (int, error) {
	return s.pruneBatches("prune accepted sends", func(t *txn, limit int) (int, error) {
		return deleteSome(t, "agent_sends", "sent_at < $2", limit, cutoff)
	})
}

// AgentPending returns up to limit queued messages of the company's number
// (store id) with ids above after, oldest first, when the device
// registration holds the number; for any other device, nothing. A paused
// number's queue is held: nothing, until it is active again.
func (s *Store) AgentPending(companyID, deviceID, numberID, after uint64, limit int) ([]store.Message, error) {
	var out []store.Message
	err := s.read(fmt.Sprintf("pending of number %d of company %d", numberID, companyID), func(t *txn) error {
		out = nil
		if limit <= 0 {
			return nil
		}
		if _, err := liveDeviceByID(t, companyID, deviceID, false); err != nil {
			if errors.Is(err, store.ErrDeviceGone) {
				return nil
			}
			return err
		}
		n, err := numberByRef(t, companyID, numberID)
		if errors.Is(err, store.ErrNotFound) || err == nil && n.DeviceID != deviceID {
			return nil // the number moved to another agent: its jobs go there
		}
		if err != nil {
			return err
		}
		if n.Status == store.NumberPaused {
			return nil // held until the number is active again; the TTL still runs
		}
		// A send handed to a registration since deleted reads as handed to
		// none (the embedded store's deviceLive).
		out, err = getRecs[store.Message](t, `SELECT CASE WHEN m.rec ? 'handed_to' AND (m.rec->>'handed_to')::bigint <> $5 AND NOT EXISTS (
				SELECT 1 FROM devices d WHERE d.company_id = m.company_id AND d.id = (m.rec->>'handed_to')::bigint AND d.deleted_at IS NULL)
			THEN m.rec - 'handed_to' ELSE m.rec END
			FROM messages m WHERE m.company_id = $1 AND m.number_id = $2 AND m.status = 'queued' AND m.id > $3
			ORDER BY m.id LIMIT $4`, id(companyID), id(numberID), id(after), limit, id(deviceID))
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// AgentHandOut records, before a link writes it, that the queued WhatsApp
// or iMessage send messageID of the company goes to the device: it answers
// true when the device may have it now (a live registration holding the
// send's number, which is not paused, the send still queued, and handed to
// no other registration that still exists), and then the send is the
// device's until it is settled (store.Message.HandedTo); false, writing
// nothing, otherwise. One statement, committed on its own: one round trip
// on the dispatch of each job. The message's row lock orders two agents'
// hand-outs of one send, and the second sees the first's record (READ
// COMMITTED evaluates its conditions again on the row it waited for). A
// number's new holder, announced after this statement read the number, is
// seen by the new holder's own hand-out, which waits on the same row.
func (s *Store) AgentHandOut(companyID, deviceID, messageID uint64) (bool, error) {
	ctx, cancel := context.WithTimeout(s.ctx, s.txTimeout)
	defer cancel()
	tag, err := s.pool.Exec(ctx, handOut, id(companyID), id(messageID), id(deviceID))
	if err != nil {
		return false, fmt.Errorf("store: hand out message %d to device %d: %w", messageID, deviceID, s.closed(err))
	}
	return tag.RowsAffected() == 1, nil
}

// handOut is AgentHandOut's statement: $1 the company, $2 the message, $3
// the device.
const handOut = `UPDATE messages m SET rec = jsonb_set(m.rec, '{handed_to}', to_jsonb($3::bigint))
	FROM agent_numbers n
	WHERE m.id = $2 AND m.company_id = $1 AND m.status = 'queued' AND m.number_id IS NOT NULL
		AND n.id = m.number_id AND n.company_id = m.company_id AND n.device_id = $3
		AND coalesce(n.rec->>'status', '') <> 'paused'
		AND EXISTS (SELECT 1 FROM devices WHERE company_id = $1 AND id = $3 AND deleted_at IS NULL)
		AND (NOT m.rec ? 'handed_to' OR (m.rec->>'handed_to')::bigint = $3 OR NOT EXISTS (
			SELECT 1 FROM devices d WHERE d.company_id = m.company_id AND d.id = (m.rec->>'handed_to')::bigint AND d.deleted_at IS NULL))`

// AgentRelease releases the company's queued WhatsApp and iMessage sends
// last handed to the device registration (store.Message.HandedTo) whose
// uuids held does not name: the registration's own word (its hello's jobs,
// PROTOCOL.md section 16.1) that it never journaled them. Each then reads
// as handed to none and goes to its number's holder (AgentHandOut). It
// returns the numbers of the sends released, each once, as stored now
// (their holders' links are to be kicked). One statement: a hand-out of
// one of these sends to the number's holder waits on its row and then
// sees it released (READ COMMITTED evaluates its conditions again).
func (s *Store) AgentRelease(companyID, deviceID uint64, held []string) ([]store.AgentNumber, error) {
	if held == nil {
		held = []string{} // <> ALL of an empty array is true; of NULL, NULL
	}
	var out []store.AgentNumber
	err := s.write(fmt.Sprintf("release the sends handed to device %d", deviceID), func(t *txn) error {
		var err error
		out, err = getRecs[store.AgentNumber](t, releaseHandOuts, id(companyID), id(deviceID), held)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// releaseHandOuts is AgentRelease's statement: $1 the company, $2 the
// device, $3 the uuids it holds. It reads the sends handed to the device
// through messages_handed (migration 0020), whose expression and
// predicate its conditions repeat, not the company's queue of agent sends.
const releaseHandOuts = `WITH released AS (
	UPDATE messages m SET rec = m.rec - 'handed_to'
	WHERE m.company_id = $1 AND m.number_id IS NOT NULL AND m.status = 'queued'
		AND m.rec ? 'handed_to' AND (m.rec->>'handed_to')::bigint = $2
		AND m.uuid <> ALL($3::text[])
	RETURNING m.number_id)
SELECT n.rec FROM agent_numbers n WHERE n.company_id = $1 AND n.id IN (SELECT number_id FROM released) ORDER BY n.id`

// AgentMessages returns one page (1-based) of the number's messages, both
// directions, newest first, and how many there are.
func (s *Store) AgentMessages(companyID, numberID uint64, page, limit int) ([]store.Message, int, error) {
	var out []store.Message
	total := 0
	err := s.read(fmt.Sprintf("messages of number %d", numberID), func(t *txn) error {
		out = nil
		if err := t.row("SELECT count(*) FROM messages WHERE company_id = $1 AND number_id = $2", id(companyID), id(numberID)).Scan(&total); err != nil {
			return err
		}
		if limit <= 0 || page < 1 || page-1 > (math.MaxInt64-1)/limit {
			return nil // a page past any possible count: empty, never an early page by overflow
		}
		var err error
		out, err = getRecs[store.Message](t, `SELECT rec FROM messages WHERE company_id = $1 AND number_id = $2
			ORDER BY id DESC OFFSET $3 LIMIT $4`, id(companyID), id(numberID), int64(page-1)*int64(limit), limit)
		return err
	})
	if err != nil {
		return nil, 0, err
	}
	return out, total, nil
}

// insertAgentMessage writes a new WhatsApp or iMessage message (its id set).
func insertAgentMessage(t *txn, m store.Message) error {
	b := &pgx.Batch{}
	if err := queueAgentMessage(b, m); err != nil {
		return err
	}
	return t.sendBatch(b)
}

// queueAgentMessage queues insertAgentMessage's statement, for a caller
// that sends it with its other writes.
func queueAgentMessage(b *pgx.Batch, m store.Message) error {
	raw, err := rec(m)
	if err != nil {
		return err
	}
	var expires *time.Time
	if !m.ExpiresAt.IsZero() {
		expires = &m.ExpiresAt
	}
	var client *string
	if m.Direction == store.Inbound {
		client = &m.ClientID
	}
	b.Queue(`INSERT INTO messages (id, company_id, device_id, uuid, direction, channel, phone, status, expires_at, created_at, updated_at, rec, number_id, agent_client)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`,
		id(m.ID), id(m.CompanyID), id(m.DeviceID), m.UUID, m.Direction, m.Channel, m.Phone, m.Status, expires, m.CreatedAt, m.UpdatedAt, raw, id(m.NumberID), client)
	return nil
}

// EnqueueAgent stores a WhatsApp or iMessage send (queued): m names its
// number by NumberRef (the public id) within m.CompanyID and m.Channel; an
// unknown one is ErrNotFound, a paused one ErrNumberPaused. vet runs after
// those checks, under the number's row lock, and before the plan limit and
// storage budget; any later refusal, or a failed commit, calls its undo. A
// key used before by the company on the route (within 24 h) returns the
// first answer as prior and stores nothing.
func (s *Store) EnqueueAgent(m *store.Message, idemKey store.IdempotencyKey, now func() time.Time, vet store.SendVet, answer func(store.Message) (int, []byte)) (store.Message, *store.Idempotent, error) {
	var out store.Message
	var prior *store.Idempotent
	var undo func()
	giveBack := func() {
		if undo != nil {
			undo()
			undo = nil
		}
	}
	err := s.write("enqueue "+m.Channel, func(t *txn) error {
		giveBack() // a transaction that runs again takes its slot again
		out, prior = store.Message{}, nil
		at := now().UTC()
		ik, p, err := priorAnswer(t, m.CompanyID, idemKey, at)
		if err != nil || p != nil {
			prior = p
			return err
		}
		n, err := numberByPublicID(t, m.CompanyID, m.Channel, m.NumberRef, true)
		if err != nil {
			return err
		}
		if n.Status == store.NumberPaused {
			return store.ErrNumberPaused
		}
		msg := *m
		msg.CreatedAt, msg.UpdatedAt = at, at
		if vet != nil {
			var failed error
			u, err := vet(n, func(since time.Time) []time.Time {
				ts, err := sendTimes(t, n.CompanyID, n.ID, since)
				if err != nil && failed == nil {
					failed = err
				}
				return ts
			})
			if err != nil {
				return err
			}
			undo = u
			if failed != nil {
				return failed
			}
		}
		msg.NumberID, msg.Account, msg.Direction, msg.Status = n.ID, n.Address, store.Outbound, store.MsgQueued
		msg.DeviceID, msg.Device = n.DeviceID, n.Device
		usage, err := s.planAllows(t, msg.CompanyID, msg.CreatedAt, store.LimitMessages)
		if err != nil {
			return err
		}
		if err := s.charge(t, msg.CompanyID, msg.CreatedAt, store.MessageCost(msg)+int64(len(msg.MediaURL))); err != nil {
			return err
		}
		// The id is taken under the number's row lock: one number's ids
		// rise in commit order (the queue's places). It is taken once the
		// plan and the budget let the send in: a refusal takes none (a
		// sequence's value is not given back when the transaction rolls
		// back).
		if msg.ID, err = nextID(t, "messages"); err != nil {
			return err
		}
		if err := usage.add(t, 1); err != nil {
			return err
		}
		if err := insertAgentMessage(t, msg); err != nil {
			return err
		}
		if _, err := t.exec("INSERT INTO agent_sends (company_id, number_id, sent_at, message_id) VALUES ($1, $2, $3, $4)",
			id(msg.CompanyID), id(msg.NumberID), msg.CreatedAt, id(msg.ID)); err != nil {
			return err
		}
		if err := ik.keep(t, msg.CreatedAt, func() (int, []byte) { return answer(msg) }); err != nil {
			return err
		}
		out = msg
		return nil
	})
	if err != nil {
		giveBack()
		return store.Message{}, nil, err
	}
	return out, prior, nil
}
