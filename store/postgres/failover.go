package postgres

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/simrelay/simrelay/store"
)

// Failover moves the jobs in names to another member of their pool, chosen
// as the pool chooses for a send (the device's members and the down
// devices passed over, caps counted), recording the member they leave in
// their attempts, and returns them as they now are. A job no other member
// can take stays where it is. The jobs are those of the device's queue
// (queued, not held, priority 0, as the embedded store's) placed above
// in.After, locked as they are read (the caller holds the device's links
// meanwhile, so none is handed out); each job takes the next place in its
// new device's queue under that device's lock, so no link's cursor passes
// it. in.After is a place in the device's queue (messages.queue_place,
// drawn from one sequence under the device's lock; see takePlace), as a
// link's cursor and MessageSequence are: a number of the messages' id
// sequence means nothing to it.
func (s *Store) Failover(in store.FailoverInput, check store.DeviceCheck, now time.Time) ([]store.Message, error) {
	var moved []store.Message
	err := s.write(fmt.Sprintf("failover of device %d", in.DeviceID), func(t *txn) error {
		moved = nil
		pools := make([]int64, 0, len(in.Pools))
		for p, ok := range in.Pools {
			if ok {
				pools = append(pools, id(p))
			}
		}
		if len(pools) == 0 || in.Limit <= 0 {
			return nil
		}
		// The first jobs in queue order, locked in id order, as a
		// deletion of the device or a batch of reports locks them: the
		// places of a device's jobs need not rise with their ids (a
		// released or moved job takes its place late). The conditions are
		// checked again on a row another transaction changed meanwhile.
		//
		// The ids are read first, in one pass of the device's queue, as an
		// array: as the subquery of "id IN (...)" the planner, which took
		// both for one row, ran it again for every job of the device, and
		// the read grew with the square of the queue (5,000 queued jobs,
		// 2.5 million rows compared, 1.6 s of a sweep's 2.2).
		const job = `company_id = $1 AND device_id = $2 AND status = $3 AND queue_place IS NOT NULL AND queue_place > $4
			AND priority = 0 AND (rec->>'pool_id')::bigint = ANY($5) AND ($6 = '' OR rec->>'sim_slot' = $6)`
		jobs, err := getRecs[store.Message](t, `SELECT rec FROM messages WHERE id = ANY(ARRAY(
				SELECT id FROM messages WHERE `+job+` ORDER BY queue_place LIMIT $7)) AND `+job+`
			ORDER BY id FOR UPDATE`,
			id(in.CompanyID), id(in.DeviceID), store.MsgQueued, id(in.After), pools, in.Slot, in.Limit)
		if err != nil {
			return err
		}
		slices.SortFunc(jobs, func(a, b store.Message) int { return cmp.Compare(a.QueueSeq, b.QueueSeq) })
		tally := newSIMTally(t, now)
		pickers, err := failoverPickers(t, in, jobs, check, tally)
		if err != nil {
			return err
		}
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
			if err := moveJob(t, from, &m, d, in.Reason, now); err != nil {
				return err
			}
			moved = append(moved, m)
		}
		for _, pp := range pickers {
			if err := pp.commit(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return moved, nil
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

// moveJob moves the queued job from (as stored) to m's new device d, at
// the end of d's queue, with the member it left in its attempts (the
// newest store.MaxAttempts kept).
func moveJob(t *txn, from store.Message, m *store.Message, d store.Device, reason string, now time.Time) error {
	place, err := takePlace(t, d.ID)
	if err != nil {
		return err
	}
	m.DeviceID, m.QueueSeq, m.UpdatedAt = d.ID, place, now.UTC()
	m.Attempts = append(m.Attempts, store.Attempt{Device: from.Device, SIMSlot: from.SIMSlot, Reason: reason, MovedAt: now.UTC()})
	if n := len(m.Attempts); n > store.MaxAttempts {
		m.Attempts = slices.Delete(m.Attempts, 0, n-store.MaxAttempts)
	}
	raw, err := rec(m)
	if err != nil {
		return err
	}
	_, err = t.exec("UPDATE messages SET device_id = $2, queue_place = $3, updated_at = $4, rec = $5 WHERE id = $1",
		id(m.ID), id(d.ID), id(place), m.UpdatedAt, raw)
	return err
}
