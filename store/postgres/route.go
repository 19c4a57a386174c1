package postgres

import (
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simrelay/simrelay/store"
)

// Routing a send on PostgreSQL, against the embedded store's single writer:
//
//   - A SIM's caps are exact because its device's row is locked before its
//     counts are read (route locks the named device; a pool the device of
//     the member it looks at, or of all its members for a bulk send), and
//     held until the commit: sends from one device serialise there, on any
//     node.
//   - A pool's turn is a count per member (pool_member_turns: the turns it
//     had), the turn the member with the fewest, ties in the pool's order.
//     A single send through a pool locks the row of the first member in
//     turn that no other send holds (FOR UPDATE SKIP LOCKED) and then that
//     member's device, so sends through one pool commit side by side, each
//     on a member of its own, and never two on one member at once; one
//     member at a time, and a member it cannot use is let go (a savepoint)
//     before it looks at the next, so it waits for a device holding no
//     other (poolpick_one.go). A bulk send, and a failover, lock every
//     member's row in member id order and then every member's device in
//     one statement in id order (lockMembers) before they look at any,
//     and then read all the members' SIMs in two statements (readMembers).
//   - Lock order: member rows, then devices. A single send holds at most
//     one member's row and one device while it waits for a lock, and waits
//     for a member's row only holding none; the others take the rows of
//     all the members and then their devices in id order. Two sends
//     through pools that share devices never hold one the other waits for
//     (TestPoolSendsLockDevicesInOrder).
//   - least_loaded counts the queue_place rows of each member's device (up
//     to loadCountCap), all members in one statement; sticky's fallback to
//     "the member that last talked to the recipient" is the newest message,
//     either way, between the recipient and a member's device, read of the
//     devices whose conversations have the number (conversations_phone). A
//     single send reads it with the pool, in the round trip of its other
//     reads (queuePool); a bulk send all its recipients' in one statement,
//     once it holds its members (readTalks), and writes their sticky
//     entries in one.

// router places the messages of one send request inside its transaction:
// on the device they name, or on the member the pool they name picks, and
// counts them against their SIMs' caps.
type router struct {
	tally *simTally
	pool  *poolPicker  // nil for a device send
	dev   store.Device // the device of a device send
}

// route vets where a send goes inside its transaction: the company's live
// device m names, locked (its queue place and its SIMs' counts are taken
// under that lock), gone (store.ErrDeviceGone), disabled
// (store.ErrDeviceDisabled), refused by check, or at a cap of its SIM (a
// *store.SIMCappedError); or, when m names a pool, the member the pool
// picks (whose device, SIM and pool id it then sets on m), an unknown pool
// being store.ErrPoolGone and a pool none of whose members can send a
// *store.PoolUnavailableError or *store.PoolCappedError. Every refusal is
// an error, so the transaction writes nothing. It routes a bulk send (a
// single send reads its device or pool in its read batch: Enqueue, with
// onDevice or routePool): its picker locks every member first, and ahead
// is its recipients (routePool). Call r.next for each further message of
// the same request, and r.commit with the writes.
func route(t *txn, m *store.Message, check store.DeviceCheck, now time.Time, ahead []string) (store.Device, *router, error) {
	if m.Pool != "" {
		return routePool(t, m, nil, check, now, ahead)
	}
	r := &router{tally: newSIMTally(t, now)}
	r.tally.expect(ahead)
	d, err := liveDevice(t, m.CompanyID, m.Device, true)
	d, err = r.onDevice(m, check, d, err)
	return d, r, err
}

// routePool is route of a send through m's pool: a single send's, read
// by pr (queuePool), or, pr nil, a bulk send's, read here. ahead is the
// recipients of a bulk send: a sticky pool reads what it needs of each
// one's last member in one statement, once it holds its members
// (readTalks).
func routePool(t *txn, m *store.Message, pr *poolRead, check store.DeviceCheck, now time.Time, ahead []string) (store.Device, *router, error) {
	r := &router{tally: newSIMTally(t, now)}
	r.tally.expect(ahead)
	var pp *poolPicker
	var err error
	if pr != nil {
		pp, err = pr.open(t, check, r.tally, true)
	} else {
		pp, err = openPool(t, m.CompanyID, m.Pool, check, r.tally)
	}
	if err != nil {
		return store.Device{}, nil, err
	}
	pp.ahead = ahead
	r.pool = pp
	d, err := r.next(m)
	return d, r, err
}

// onDevice routes a device send m to d, the device it names as liveDevice
// read and locked it (err its error): route's checks of a device send, for
// a send that read the device itself.
func (r *router) onDevice(m *store.Message, check store.DeviceCheck, d store.Device, err error) (store.Device, error) {
	if err != nil {
		return d, err
	}
	if d.Status == store.DeviceDisabled {
		return d, store.ErrDeviceDisabled
	}
	if check != nil {
		if err := check(d, m.SIMSlot); err != nil {
			return d, err
		}
	}
	r.dev = d
	return r.next(m)
}

// next places one more message of the request.
func (r *router) next(m *store.Message) (store.Device, error) {
	if r.pool != nil {
		return r.pool.pickFor(m)
	}
	capped, err := r.tally.allows(r.dev.ID, m.SIMSlot, m.Phone)
	if err != nil {
		return r.dev, err
	}
	if capped != nil {
		return r.dev, capped
	}
	return r.dev, r.tally.take(r.dev.ID, m.SIMSlot, m.Phone)
}

// commit writes what the placing changed: the SIMs' counts, and a pool's
// turn and sticky entries.
func (r *router) commit() error {
	b := &pgx.Batch{}
	r.queueCommit(b)
	return r.tally.t.sendBatch(b)
}

// queueCommit queues commit's writes.
func (r *router) queueCommit(b *pgx.Batch) {
	if r.pool != nil {
		r.pool.queueCommit(b)
		return
	}
	r.tally.queueFlush(b)
}
