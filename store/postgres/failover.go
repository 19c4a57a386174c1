package postgres

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/simrelay/simrelay/store"
)

// Failover moves the jobs in names to another member of their pool, chosen
// as the pool chooses for a send (the device's members and the down
// devices passed over, caps counted), recording the member they leave in
// their attempts, and returns them as they now are, with the place the
// next batch goes on from (store.FailoverInput). A job no other member can
// take stays where it is. The jobs are those of the device's queue
// (queued, not held, priority 0, as the embedded store's) placed above
// in.After, locked as they are read (the caller holds the device's links
// meanwhile, so none is handed out); each job takes the next place in its
// new device's queue under that device's lock, so no link's cursor passes
// it. in.After is a place in the device's queue (messages.queue_place,
// drawn from one sequence under the device's lock; see takePlaces), as a
// link's cursor and MessageSequence are: a number of the messages' id
// sequence means nothing to it.
func (s *Store) Failover(in store.FailoverInput, check store.DeviceCheck, now time.Time) ([]store.Message, uint64, error) {
	var moved []store.Message
	var next uint64
	err := s.write(fmt.Sprintf("failover of device %d", in.DeviceID), func(t *txn) error {
		moved, next = nil, 0
		pools := make([]int64, 0, len(in.Pools))
		for p, ok := range in.Pools {
			if ok {
				pools = append(pools, id(p))
			}
		}
		if len(pools) == 0 || in.Limit <= 0 {
			return nil
		}
		jobs, last, err := failoverJobs(t, in, pools)
		if err != nil {
			return err
		}
		next = last
		tally := newSIMTally(t, now)
		// Whether each target SIM with a recipients cap sent to the jobs'
		// recipients today: one statement for the batch (readKnown), as
		// for a bulk send, not one a job.
		phones := make([]string, len(jobs))
		for i, m := range jobs {
			phones[i] = m.Phone
		}
		tally.expect(phones)
		pickers, err := failoverPickers(t, in, jobs, check, tally)
		if err != nil {
			return err
		}
		var to []store.Device
		for _, m := range jobs {
			pp := pickers[m.PoolID]
			if pp == nil {
				continue // the pool is gone: its jobs stay
			}
			from := m
			d, err := pp.pickFor(&m)
			var pu *store.PoolUnavailableError
			var pc *store.PoolCappedError
			if errors.As(err, &pu) || errors.As(err, &pc) {
				continue // no other member can take it now
			}
			if err != nil {
				return err
			}
			leave(from, &m, in.Reason, now)
			moved, to = append(moved, m), append(to, d)
		}
		if err := moveJobs(t, moved, to); err != nil {
			return err
		}
		// The SIMs' counts once for all the pools' picks (their pickers
		// share the tally; each pool's commit added them again), then
		// each pool's turn and sticky entries, in pool id order.
		b := &pgx.Batch{}
		tally.queueFlush(b)
		for _, pid := range slices.Sorted(maps.Keys(pickers)) {
			pickers[pid].queuePicks(b)
		}
		return t.sendBatch(b)
	})
	if err != nil {
		return nil, 0, err
	}
	return moved, next, nil
}

// failoverJobs reads and locks the device's queued jobs of the pools
// pools (of in.Slot when it names one), in queue order, with the place of
// the last job it looked at when it looked at in.Limit of them, 0 when
// fewer (store.FailoverInput's next).
//
// The jobs are the first in queue order, locked in id order, as a
// deletion of the device or a batch of reports locks them: the places of
// a device's jobs need not rise with their ids (a released or moved job
// takes its place late). The conditions are checked again on a row
// another transaction changed meanwhile: a job it took between the read
// and the lock (acknowledged, canceled, moved) is passed over, and still
// counts as looked at. So the place returned is the last the read found,
// not the last of the jobs that came back: a batch shortened so is no
// sign that the device has no more, and ended its sweep there when it
// was taken for one.
//
// The ids are read first, in one pass of the device's queue, as an array
// (with their count and last place), in the same statement: as the
// subquery of "id IN (...)" the planner, which took both for one row, ran
// it again for every job of the device, and the read grew with the square
// of the queue (5,000 queued jobs, 2.5 million rows compared, 1.6 s of a
// sweep's 2.2). The read's one row comes back with no job when none is
// left by the lock, or none was found.
func failoverJobs(t *txn, in store.FailoverInput, pools []int64) ([]store.Message, uint64, error) {
	const job = `company_id = $1 AND device_id = $2 AND status = $3 AND queue_place IS NOT NULL AND queue_place > $4
		AND priority = 0 AND (rec->>'pool_id')::bigint = ANY($5) AND ($6 = '' OR rec->>'sim_slot' = $6)`
	rows, err := t.query(`SELECT look.n, look.last, m.rec FROM (SELECT count(*) AS n, max(queue_place) AS last, array_agg(id) AS ids
			FROM (SELECT id, queue_place FROM messages WHERE `+job+` ORDER BY queue_place LIMIT $7) p) look
		LEFT JOIN LATERAL (SELECT rec FROM messages WHERE id = ANY(look.ids) AND `+job+` ORDER BY id FOR UPDATE) m ON true`,
		id(in.CompanyID), id(in.DeviceID), store.MsgQueued, id(in.After), pools, in.Slot, in.Limit)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	var jobs []store.Message
	var looked int64
	var last *int64
	for rows.Next() {
		var raw []byte
		if err := rows.Scan(&looked, &last, &raw); err != nil {
			return nil, 0, err
		}
		if raw == nil {
			continue
		}
		var m store.Message
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, 0, err
		}
		jobs = append(jobs, m)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, err
	}
	slices.SortFunc(jobs, func(a, b store.Message) int { return cmp.Compare(a.QueueSeq, b.QueueSeq) })
	var next uint64
	if looked == int64(in.Limit) && last != nil {
		next = uint64(*last)
	}
	return jobs, next, nil
}

// failoverPickers opens a picker for each pool of the jobs that still
// exists, passing over the member the jobs leave and the devices down: the
// pools' turns (their members' rows) in pool id order, then the devices of all their members in
// one statement in id order (lockMembers), before any pick looks at one.
// Opened as each pool's first job came, a failover would hold one pool's
// members while it waits for the next pool's turn, which a send through
// that pool may hold while it waits for those very devices.
func failoverPickers(t *txn, in store.FailoverInput, jobs []store.Message, check store.DeviceCheck, tally *simTally) (map[uint64]*poolPicker, error) {
	if len(jobs) == 0 {
		return nil, nil
	}
	var ids []int64
	for _, m := range jobs {
		ids = append(ids, id(m.PoolID))
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	pools, err := getRecs[store.Pool](t, "SELECT rec FROM pools WHERE company_id = $1 AND id = ANY($2) ORDER BY id", id(in.CompanyID), ids)
	if err != nil {
		return nil, err
	}
	pickers := map[uint64]*poolPicker{}
	var open []*poolPicker
	for _, p := range pools {
		pp, err := newPicker(t, p, check, tally)
		if errors.Is(err, store.ErrPoolGone) {
			continue
		}
		if err != nil {
			return nil, err
		}
		pp.skip = in.PassOver
		pickers[p.ID] = pp
		open = append(open, pp)
	}
	return pickers, lockMembers(t, open...)
}

// leave records on m, the queued job from (as stored) that moves to the
// member its picker set on it, the member it leaves, with why (the newest
// store.MaxAttempts kept).
func leave(from store.Message, m *store.Message, reason string, now time.Time) {
	m.UpdatedAt = now.UTC()
	m.Attempts = append(m.Attempts, store.Attempt{Device: from.Device, SIMSlot: from.SIMSlot, Reason: reason, MovedAt: now.UTC()})
	if n := len(m.Attempts); n > store.MaxAttempts {
		m.Attempts = slices.Delete(m.Attempts, 0, n-store.MaxAttempts)
	}
}

// moveJobs moves the jobs ms (as leave left them, still naming the device
// they leave) to their new devices to (to[i] is ms[i]'s), each at the end
// of its device's queue, in the order of ms: one statement for their
// places (takePlaces, under the devices' locks, which the pickers hold),
// then one round trip that writes their rows and moves their conversations
// (conversationMoves). One job a time, it was two round trips a job while
// the failover held every member of the pool.
func moveJobs(t *txn, ms []store.Message, to []store.Device) error {
	if len(ms) == 0 {
		return nil
	}
	devs := make([]int64, len(ms))
	for i := range ms {
		devs[i] = id(to[i].ID)
	}
	places, err := takePlaces(t, devs)
	if err != nil {
		return err
	}
	ids, recs := make([]int64, len(ms)), make([]string, len(ms))
	var mv conversationMoves
	for i := range ms {
		mv.add(ms[i], to[i].ID)
		ms[i].DeviceID, ms[i].QueueSeq = to[i].ID, places[i]
		raw, err := rec(ms[i])
		if err != nil {
			return err
		}
		ids[i], recs[i] = id(ms[i].ID), string(raw)
	}
	placed := make([]int64, len(places))
	for i, p := range places {
		placed[i] = id(p)
	}
	b := &pgx.Batch{}
	mv.queueSay(b)
	var written int64
	b.Queue(`UPDATE messages m SET device_id = u.device_id, queue_place = u.place, updated_at = $4, rec = u.rec
		FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $5::jsonb[]) AS u (id, device_id, place, rec) WHERE m.id = u.id`,
		ids, devs, placed, ms[0].UpdatedAt, recs).Exec(func(tag pgconn.CommandTag) error {
		written = tag.RowsAffected()
		return nil
	})
	mv.queue(b)
	if err := t.sendBatch(b); err != nil {
		return err
	}
	if written != int64(len(ms)) {
		return fmt.Errorf("store: %d of %d moved jobs written", written, len(ms))
	}
	return nil
}

// conversationMoves is what a statement that moves messages to other
// devices changes of their conversations (0006: each SMS message counted in
// its device's conversation with its number, whose newest is the highest
// id), which the statement's caller writes (queue) in the same transaction,
// after it: no trigger does it (migration 0024).
type conversationMoves struct {
	ids, companies, from, to []int64
	phones                   []string
}

// add counts the move of m, as stored (its device the one it leaves), to
// the device to; a WhatsApp or iMessage message, or one that stays, has no
// conversation to move.
func (mv *conversationMoves) add(m store.Message, to uint64) {
	if store.IsAgentChannel(m.Channel) || m.DeviceID == to {
		return
	}
	mv.ids, mv.companies = append(mv.ids, id(m.ID)), append(mv.companies, id(m.CompanyID))
	mv.from, mv.to = append(mv.from, id(m.DeviceID)), append(mv.to, id(to))
	mv.phones = append(mv.phones, m.Phone)
}

// queueSay queues what the statement that moves the messages must follow:
// the transaction's word that it moves their conversations itself, without
// which the guard of migration 0024 (the trigger messages_conversation_move)
// refuses the move of an SMS message.
func (mv *conversationMoves) queueSay(b *pgx.Batch) {
	if len(mv.ids) > 0 {
		b.Queue("SELECT set_config('simrelay.conversations_moved', 'on', true)")
	}
}

// queue queues the conversations' writes, to run after the statement that
// moved the messages: one statement takes the moved messages off the
// conversations they leave (the newest looked for again where it was one
// of them, among the messages that stayed), one removes the conversations
// left empty, one adds them to the conversations they join, each
// conversation's row written once however many of its messages moved, the
// rows locked in key order (the primary key's, phone COLLATE "C") in each
// statement, as the insert's trigger locks them (0021).
func (mv *conversationMoves) queue(b *pgx.Batch) {
	if len(mv.ids) == 0 {
		return
	}
	// The messages' phone, not the conversation's (COLLATE "C"), is
	// compared with the messages' own: so it is a probe of their index
	// messages_conversation, not a scan of the table.
	b.Queue(`WITH g AS (SELECT u.company_id, u.from_dev, u.phone, count(*) AS n, array_agg(u.id) AS ids
			FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::text[]) AS u (id, company_id, from_dev, phone)
			GROUP BY u.company_id, u.from_dev, u.phone),
		l AS (SELECT c.company_id, c.device_id, c.phone, g.n, g.ids, g.phone AS num FROM conversations c
			JOIN g ON c.company_id = g.company_id AND c.device_id = g.from_dev AND c.phone = g.phone
			ORDER BY c.company_id, c.device_id, c.phone FOR UPDATE OF c)
		UPDATE conversations c SET messages = c.messages - l.n, last_id = CASE WHEN c.last_id <> ALL(l.ids) THEN c.last_id
			ELSE coalesce((SELECT max(m.id) FROM messages m WHERE m.company_id = l.company_id AND m.device_id = l.device_id
				AND m.phone = l.num AND m.channel NOT IN `+agentChannels+`), 0) END
		FROM l WHERE c.company_id = l.company_id AND c.device_id = l.device_id AND c.phone = l.phone`,
		mv.ids, mv.companies, mv.from, mv.phones)
	b.Queue(`DELETE FROM conversations c USING unnest($1::bigint[], $2::bigint[], $3::text[]) AS u (company_id, device_id, phone)
		WHERE c.company_id = u.company_id AND c.device_id = u.device_id AND c.phone = u.phone AND c.messages <= 0`,
		mv.companies, mv.from, mv.phones)
	b.Queue(`INSERT INTO conversations AS c (company_id, device_id, phone, messages, last_id)
		SELECT u.company_id, u.to_dev, u.phone, count(*), max(u.id)
		FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::text[]) AS u (id, company_id, to_dev, phone)
		GROUP BY u.company_id, u.to_dev, u.phone
		ORDER BY u.company_id, u.to_dev, u.phone COLLATE "C"
		ON CONFLICT (company_id, device_id, phone) DO UPDATE SET
			messages = c.messages + EXCLUDED.messages, last_id = greatest(c.last_id, EXCLUDED.last_id)`,
		mv.ids, mv.companies, mv.to, mv.phones)
}
