package postgres

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simrelay/simrelay/store"
)

// maxPickTries bounds how often a single send through a pool looks again
// for a member after finding every one it may take held by other sends or
// taken since it read the turn; each time, another send has committed or
// rolled back, so a pool's sends always move on.
const maxPickTries = 1000

// pickOne is pick for a single send (pp.one): it locks only the member it
// takes and that member's device. The sticky member (its device locked,
// waiting for it as a send naming the device would) comes first; then the
// strategy's order of the members, among which it locks the first free
// member's row, passing over those other sends hold (SKIP LOCKED) and
// those taken since it read the turn, and then that member's device; a
// member it cannot use (its device disabled or gone, its SIM capped or
// failing, check's refusal) is let go (ROLLBACK TO SAVEPOINT releases both
// locks) before the next is looked at. So at most one member's device is
// held while the send waits for a lock, and the member rows are waited on
// only with none held: no two transactions wait on each other in a circle
// over these rows (doc.go's lock order).
func (pp *poolPicker) pickOne(phone string) (store.PoolMember, *store.Device, error) {
	pp.locked = true
	tried := map[uint64]bool{}
	if pp.pool.Strategy == store.PoolSticky {
		m, found, err := pp.stickyCandidate(phone)
		if err != nil {
			return store.PoolMember{}, nil, err
		}
		if found {
			tried[m.ID] = true
			d, ok, err := pp.lookAt(m, phone, nil)
			if err != nil {
				return store.PoolMember{}, nil, err
			}
			if ok {
				return pp.takeOne(m, d, phone)
			}
		}
	}
	ll := pp.pool.PicksLeastLoaded()
	var passed []int // members passed over as unusable, in the order looked at
	wait := false
	for range maxPickTries {
		if len(tried) == len(pp.pool.Members) {
			return store.PoolMember{}, nil, pp.passed.Refusal(pp.pool)
		}
		if ll && pp.load == nil {
			if err := pp.readLoads(); err != nil {
				return store.PoolMember{}, nil, err
			}
		}
		if wait {
			// Every member left is held by another send: wait for the
			// first one's holder to end, and look again.
			if _, _, _, err := pp.lockFirst(tried, true); err != nil {
				return store.PoolMember{}, nil, err
			}
			wait = false
			continue
		}
		i, d, found, err := pp.lockFirst(tried, false)
		if err != nil {
			return store.PoolMember{}, nil, err
		}
		if !found {
			wait = true
			if ll {
				pp.load = nil
			}
			continue
		}
		m := pp.pool.Members[i]
		tried[m.ID] = true
		_, ok, err := pp.lookAt(m, phone, d)
		if err != nil {
			return store.PoolMember{}, nil, err
		}
		if ok {
			for _, j := range passed {
				pp.stamp(j)
			}
			pp.stamp(i)
			return pp.takeOne(m, d, phone)
		}
		passed = append(passed, i)
	}
	return store.PoolMember{}, nil, fmt.Errorf("store: pool %d: no member free after %d tries", pp.pool.ID, maxPickTries)
}

// takeOne counts the send to phone against member m's SIM, m taken.
func (pp *poolPicker) takeOne(m store.PoolMember, d *store.Device, phone string) (store.PoolMember, *store.Device, error) {
	if pp.load != nil {
		pp.load[m.DeviceID]++
	}
	if pp.pool.Strategy == store.PoolSticky {
		if pp.sticky == nil {
			pp.sticky = map[string]store.PoolMember{}
		}
		pp.sticky[phone] = m
	}
	return m, d, pp.tally.take(m.DeviceID, m.SIMSlot, phone)
}

// savepoint queues, before a member is locked, what lets it go again: the
// savepoint, the first time, and a rollback to it after that (which lets
// go of the member looked at before, if any).
func (pp *poolPicker) savepoint(b *pgx.Batch) {
	if pp.saved {
		b.Queue("ROLLBACK TO SAVEPOINT pool_pick")
		return
	}
	b.Queue("SAVEPOINT pool_pick")
	pp.saved = true
}

// lockFirst locks the row of the first member in turn (the strategy's
// order of the members' turns, read in the same statement) that tried
// does not name and no other send holds, and that member's device, and
// returns the member's index and its device (nil: gone). found is false
// when every member left was held. wait instead waits for the first
// member's holder to end and lets the row go at once, taking nothing.
func (pp *poolPicker) lockFirst(tried map[uint64]bool, wait bool) (i int, d *store.Device, found bool, err error) {
	n := len(pp.pool.Members)
	members, devs, loads := make([]int64, n), make([]int64, n), make([]int64, n)
	skip := []int64{}
	for k, m := range pp.pool.Members {
		members[k], devs[k] = id(m.ID), id(m.DeviceID)
		if pp.load != nil {
			loads[k] = int64(pp.load[m.DeviceID])
		}
		if tried[m.ID] {
			skip = append(skip, id(m.ID))
		}
	}
	b := &pgx.Batch{}
	pp.savepoint(b)
	const first = `WITH mem AS (SELECT x.member_id, x.device_id, x.load, x.ord
			FROM unnest($2::bigint[], $3::bigint[], $4::bigint[]) WITH ORDINALITY AS x (member_id, device_id, load, ord)),
		m AS (SELECT t.member_id, t.taken FROM pool_member_turns t JOIN mem USING (member_id)
			WHERE t.pool_id = $1 AND NOT t.member_id = ANY($5)
			ORDER BY mem.load, t.taken, mem.ord LIMIT 1 FOR UPDATE OF t`
	if wait {
		b.Queue(first+`) SELECT count(*) FROM m`, id(pp.pool.ID), members, devs, loads, skip)
		b.Queue("ROLLBACK TO SAVEPOINT pool_pick")
		return 0, nil, false, pp.t.sendBatch(b)
	}
	var member *int64
	var taken int64
	var raw []byte
	b.Queue(first+` SKIP LOCKED)
		SELECT m.member_id, m.taken, d.rec
		FROM m JOIN mem USING (member_id)
		LEFT JOIN LATERAL (SELECT rec FROM devices WHERE company_id = $6 AND id = mem.device_id AND deleted_at IS NULL FOR UPDATE) d ON true`,
		id(pp.pool.ID), members, devs, loads, skip, id(pp.pool.CompanyID)).QueryRow(func(row pgx.Row) error {
		err := row.Scan(&member, &taken, &raw)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		return err
	})
	if err := pp.t.sendBatch(b); err != nil {
		return 0, nil, false, err
	}
	if member == nil {
		return 0, nil, false, nil
	}
	for k := range pp.pool.Members {
		if members[k] != *member {
			continue
		}
		pp.taken[uint64(*member)] = taken
		if raw == nil {
			return k, nil, true, nil
		}
		var d store.Device
		if err := json.Unmarshal(raw, &d); err != nil {
			return 0, nil, false, err
		}
		return k, &d, true, nil
	}
	return 0, nil, false, fmt.Errorf("store: pool %d locked member %d it did not ask for", pp.pool.ID, *member)
}

// lookAt says whether member m can take the send to phone, its device
// locked: d as lockFree locked it, or, nil, locked here (a sticky member,
// whose device the send waits for). Its SIM's caps and counts, and its
// carrier-error streak, are read after the lock, in statements of their
// own. A member it cannot take is noted, and let go by the next look.
func (pp *poolPicker) lookAt(m store.PoolMember, phone string, d *store.Device) (*store.Device, bool, error) {
	b := &pgx.Batch{}
	if d == nil {
		pp.savepoint(b)
		b.Queue("SELECT rec FROM devices WHERE company_id = $1 AND id = $2 AND deleted_at IS NULL FOR UPDATE",
			id(pp.pool.CompanyID), id(m.DeviceID)).QueryRow(func(row pgx.Row) error {
			var raw []byte
			err := row.Scan(&raw)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			if err != nil {
				return err
			}
			d = &store.Device{}
			return json.Unmarshal(raw, d)
		})
	}
	k := simKey{m.DeviceID, m.SIMSlot}
	if _, ok := pp.failing[k]; !ok {
		b.Queue("SELECT n, last_at FROM sim_streaks WHERE device_id = $1 AND sim_slot = $2", id(m.DeviceID), m.SIMSlot).QueryRow(func(row pgx.Row) error {
			var n int64
			var last time.Time
			err := row.Scan(&n, &last)
			if errors.Is(err, pgx.ErrNoRows) {
				pp.failing[k] = false
				return nil
			}
			pp.failing[k] = err == nil && failing(n, last, pp.tally.now)
			return err
		})
	}
	pp.tally.queueSIMByID(b, m.DeviceID, m.SIMSlot)
	if err := pp.t.sendBatch(b); err != nil {
		return nil, false, err
	}
	pp.devices[m.DeviceID] = d
	return pp.usable(m, phone)
}
