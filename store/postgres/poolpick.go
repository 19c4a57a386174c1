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

// loadCountCap is how far least_loaded counts a device's queue: a device
// with that many queued jobs or more counts as that many.
const loadCountCap = 100

// poolPicker chooses members of one pool for the sends of one
// transaction, and keeps what its own picks add, so a bulk send spreads as
// single sends would. The pool's round-robin turn is a count per member
// (pool_member_turns.taken: the turns it had, taken or passed over as
// unusable): the turn is the member with the fewest, ties in the pool's
// order. A pick counts a turn to each member it passed over as unusable
// and to the one it took, so the turn moves past both, and with every
// member usable the sends go round the pool in its order.
//
// A single send (one) locks only what it takes: the row of the first
// member in turn that no other send holds (FOR UPDATE SKIP LOCKED), and
// that member's device; a member it cannot use is let go again (a
// savepoint) and the next is tried (pickOne). So sends through one pool
// commit side by side, each on a member of its own, and two never take one
// member at once. A member held by a slow send meanwhile has fewer turns
// once it is free, and so comes first until it has caught up: the spread
// mends itself.
//
// A bulk send and a failover lock every member's row (in member id order)
// and then every member's device (lockMembers) before they look at any,
// and pick one job after another under those locks.
type poolPicker struct {
	t     *txn
	pool  store.Pool
	check store.DeviceCheck
	// taken is each member's turns by member id as read, with this
	// transaction's.
	taken map[uint64]int64
	// stamps are this transaction's turns by member id (members taken or
	// passed over), added at commit (queueCommit).
	stamps map[uint64]int64
	// one: the picker chooses for one send and locks only the member it
	// takes (pickOne); otherwise the member rows are locked (newPicker).
	one bool
	// saved: one's savepoint is set, so a member looked at and not taken
	// is let go by rolling back to it.
	saved bool
	// devices holds each member's device, locked (nil: not live), once
	// locked is set (lockMembers); for one, the device of the member
	// looked at.
	devices map[uint64]*store.Device
	locked  bool
	// read: the SIMs of the members it may take are read (readMembers).
	read bool
	// failing caches whether each member's SIM is in a carrier-error streak.
	failing map[simKey]bool
	// load is each device's queued jobs (counted up to loadCountCap) plus
	// this transaction's picks; nil until least_loaded needs it.
	load map[uint64]int
	// sticky is this transaction's picks by recipient, written at commit.
	sticky map[string]store.PoolMember
	// talked is what the store says of the recipients' last members
	// (stickyCandidate), read once per recipient; ahead is the
	// recipients of a bulk send, all read at its first look (readTalks).
	talked map[string]lastTalk
	ahead  []string
	tally  *simTally
	// skip, when set, passes members over for a reason of the caller's.
	skip func(store.PoolMember) string
	// passed says why members were passed over, for the refusal.
	passed store.PoolNotes
}

// openPool starts choosing from the company's pool named name for a bulk
// send, the members' rows locked (newPicker); a name the company has no
// pool under is store.ErrPoolGone. A single send reads its pool in its
// read batch (queuePool) and opens it there (poolRead.open).
func openPool(t *txn, companyID uint64, name string, check store.DeviceCheck, tally *simTally) (*poolPicker, error) {
	b := &pgx.Batch{}
	pr := queuePool(b, companyID, name, "", tally.now, false)
	if err := t.sendBatch(b); err != nil {
		return nil, err
	}
	return pr.open(t, check, tally, false)
}

// poolRead is what queuePool's statement read of a pool.
type poolRead struct {
	gone  bool // no pool of the company has the name
	raw   []byte
	rows  int // the member turn rows of its members (a single send's read only)
	phone string
	lt    lastTalk // phone's, for a single send through a sticky pool
}

// queuePool queues the read of the company's pool named name that
// openPool opens, unlocked: its record and, for a single send (one), how
// many of its members have their turn row and, through a sticky pool,
// what stickyCandidate reads of its recipient phone at now (lastTalkSQL),
// so a single send reads its pool in the round trip of its other reads
// (readSend). A bulk send reads the turns after locking them (newPicker),
// so its read counts none (it read every member's row for nothing).
func queuePool(b *pgx.Batch, companyID uint64, name, phone string, now time.Time, one bool) *poolRead {
	pr := &poolRead{phone: phone}
	lt := &pr.lt
	b.Queue(`SELECT rec, (SELECT count(*) FROM pool_member_turns t WHERE $5 AND t.pool_id = p.id
			AND t.member_id IN (SELECT (e->>'id')::bigint FROM jsonb_array_elements(p.rec->'members') e)),
			lt.entry_dev, lt.entry_slot, lt.written_at, lt.conv_dev, lt.conv_slot
		FROM pools p LEFT JOIN LATERAL (`+lastTalkSQL("p.id", "$1", memberDevicesSQL("p.rec"), "$3", "$4",
		"$5 AND p.rec->>'strategy' = '"+store.PoolSticky+"'")+`) lt ON true
		WHERE company_id = $1 AND name_key = $2`, id(companyID), poolNameKey(name), phone, freshSince(now), one).
		QueryRow(func(row pgx.Row) error {
			err := row.Scan(&pr.raw, &pr.rows, &lt.entryDev, &lt.entrySlot, &lt.written, &lt.convDev, &lt.convSlot)
			if errors.Is(err, pgx.ErrNoRows) {
				pr.gone = true
				return nil
			}
			return err
		})
	return pr
}

// open starts the picker of the pool pr read (openPool).
func (pr *poolRead) open(t *txn, check store.DeviceCheck, tally *simTally, one bool) (*poolPicker, error) {
	if pr.gone {
		return nil, store.ErrPoolGone
	}
	var p store.Pool
	if err := json.Unmarshal(pr.raw, &p); err != nil {
		return nil, err
	}
	if !one {
		return newPicker(t, p, check, tally)
	}
	if pr.rows < len(p.Members) {
		// Every member has its row (PutPool, the migration, a load); one
		// without would never be chosen.
		if err := memberTurnRows(t, p); err != nil {
			return nil, err
		}
	}
	pp := &poolPicker{t: t, pool: p, check: check, tally: tally, one: true, taken: map[uint64]int64{},
		devices: map[uint64]*store.Device{}, failing: map[simKey]bool{}}
	if p.Strategy == store.PoolSticky {
		pp.talked = map[string]lastTalk{pr.phone: pr.lt}
	}
	return pp, nil
}

// newPicker starts choosing from pool p, its members' rows locked in
// member id order: a bulk send's or a failover's picks, one after another
// under those locks. The turns are read after the lock, in a statement of
// their own, so they are the ones the last send that held a row left.
func newPicker(t *txn, p store.Pool, check store.DeviceCheck, tally *simTally) (*poolPicker, error) {
	pp := &poolPicker{t: t, pool: p, check: check, tally: tally, taken: map[uint64]int64{},
		devices: map[uint64]*store.Device{}, failing: map[simKey]bool{}}
	ids := make([]int64, len(p.Members))
	for i, m := range p.Members {
		ids[i] = id(m.ID)
	}
	var live bool
	var members, stamps []int64
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO pool_member_turns (pool_id, member_id) SELECT $1, unnest($2::bigint[]) ON CONFLICT DO NOTHING`, id(p.ID), ids)
	b.Queue("SELECT count(*) FROM (SELECT 1 FROM pool_member_turns WHERE pool_id = $1 ORDER BY member_id FOR UPDATE) l", id(p.ID))
	b.Queue(`SELECT EXISTS (SELECT 1 FROM pools WHERE id = $1),
			ARRAY(SELECT member_id FROM pool_member_turns WHERE pool_id = $1 AND member_id = ANY($2) ORDER BY member_id),
			ARRAY(SELECT taken FROM pool_member_turns WHERE pool_id = $1 AND member_id = ANY($2) ORDER BY member_id)`,
		id(p.ID), ids).QueryRow(func(row pgx.Row) error {
		return row.Scan(&live, &members, &stamps)
	})
	err := t.sendBatch(b)
	if isForeignKey(err) || err == nil && !live {
		return nil, store.ErrPoolGone // deleted since it was read
	}
	if err != nil {
		return nil, err
	}
	for k, m := range members {
		pp.taken[uint64(m)] = stamps[k]
	}
	return pp, nil
}

// order is the pool's members (their indexes) in turn: the fewest turns
// first, ties in the pool's order; with load, the least loaded first and
// the turn among equals.
func (pp *poolPicker) order(load func(i int) int) []int {
	order := make([]int, len(pp.pool.Members))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		if load != nil {
			if c := load(a) - load(b); c != 0 {
				return c
			}
		}
		return cmp.Compare(pp.taken[pp.pool.Members[a].ID], pp.taken[pp.pool.Members[b].ID])
	})
	return order
}

// usable says whether member m can take a send to phone now, noting why
// not. It locks the member's device (once) unless skip passes it over.
func (pp *poolPicker) usable(m store.PoolMember, phone string) (*store.Device, bool, error) {
	why := ""
	if pp.skip != nil {
		why = pp.skip(m)
	}
	var d *store.Device
	if why == "" {
		var err error
		if d, err = pp.device(m.DeviceID); err != nil {
			return nil, false, err
		}
		if why, err = store.PoolMemberUnusable(d, m.SIMSlot, func() (bool, error) { return pp.simFailing(m) }, pp.check); err != nil {
			return nil, false, err
		}
	}
	if why != "" {
		pp.passed.Note(m, why)
		return nil, false, nil
	}
	capped, err := pp.tally.allows(m.DeviceID, m.SIMSlot, phone)
	if err != nil {
		return nil, false, err
	}
	if capped != nil {
		pp.passed.NoteCapped(m, capped)
		return nil, false, nil
	}
	return d, true, nil
}

// simFailing says whether member m's SIM is in a carrier-error streak,
// read once per picker (for a single send, lookAt reads it ahead).
func (pp *poolPicker) simFailing(m store.PoolMember) (bool, error) {
	k := simKey{m.DeviceID, m.SIMSlot}
	if f, ok := pp.failing[k]; ok {
		return f, nil
	}
	f, err := carrierFailing(pp.t, m.DeviceID, m.SIMSlot, pp.tally.now)
	if err != nil {
		return false, err
	}
	pp.failing[k] = f
	return f, nil
}

// device is the member's live device, locked by lockMembers: its SIMs'
// counts are read and written under the lock. nil is a device that is
// gone.
func (pp *poolPicker) device(deviceID uint64) (*store.Device, error) {
	if !pp.locked {
		return nil, fmt.Errorf("store: pool %d looked at device %d before locking its members", pp.pool.ID, deviceID)
	}
	return pp.devices[deviceID], nil
}

// lockMembers locks the live devices of every member the pickers pps (of
// one company) may look at, all but those their skip passes over, in one
// statement in id order, and keeps them for device. A pick does it for its
// picker before it looks at any member (a failover for all its pickers at
// once). The strategies look at members in orders of their own (a turn,
// the loads, a recipient's last member), so a device locked as it is
// looked at would let two sends through pools that share devices each
// hold one the other waits for; in id order, as the sweeps lock theirs,
// every writer takes the devices it shares with another in one order.
func lockMembers(t *txn, pps ...*poolPicker) error {
	if len(pps) == 0 {
		return nil
	}
	var ids []int64
	for _, pp := range pps {
		for _, m := range pp.pool.Members {
			if pp.skip != nil && pp.skip(m) != "" {
				continue
			}
			ids = append(ids, id(m.DeviceID))
			pp.devices[m.DeviceID] = nil // gone unless read below
		}
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if len(ids) > 0 {
		devs, err := getRecs[store.Device](t, `SELECT rec FROM devices
			WHERE company_id = $1 AND id = ANY($2) AND deleted_at IS NULL ORDER BY id FOR UPDATE`, id(pps[0].pool.CompanyID), ids)
		if err != nil {
			return fmt.Errorf("lock %d devices of pool %d: %w", len(ids), pps[0].pool.ID, err)
		}
		for _, pp := range pps {
			for i := range devs {
				if _, ok := pp.devices[devs[i].ID]; ok {
					pp.devices[devs[i].ID] = &devs[i]
				}
			}
		}
	}
	for _, pp := range pps {
		pp.locked = true
	}
	return nil
}

// pick chooses the member for a send to phone and counts the send
// against its SIM's caps.
func (pp *poolPicker) pick(phone string) (store.PoolMember, *store.Device, error) {
	if err := pp.passed.Begin(pp.pool); err != nil {
		return store.PoolMember{}, nil, err
	}
	if pp.one {
		return pp.pickOne(phone)
	}
	if !pp.locked {
		if err := lockMembers(pp.t, pp); err != nil {
			return store.PoolMember{}, nil, err
		}
	}
	if !pp.read {
		if err := pp.readMembers(); err != nil {
			return store.PoolMember{}, nil, err
		}
	}
	m, d, ok, err := pp.pool.PickByStrategy(phone, pp.stickyMember, pp.leastLoaded, pp.roundRobin)
	if err != nil {
		return store.PoolMember{}, nil, err
	}
	if !ok {
		return store.PoolMember{}, nil, pp.passed.Refusal(pp.pool)
	}
	return pp.takeOne(m, d, phone)
}

// readMembers reads, once its members' devices are locked (lockMembers),
// what usable reads of each member it may take, in one statement for all
// the members' SIMs' caps and counts (into the tally, unless it has them:
// a failover's pickers share one) and one for their carrier-error streaks,
// and for a bulk send from SIMs with a recipients cap, one for which of
// its recipients each of those SIMs sent to today (readKnown).
// Read as each member was looked at, they were two statements a member, a
// round trip each, while a bulk send or a failover held every member of
// the pool. The members passed over by skip, and those whose device is
// gone or disabled, which usable reads nothing of, are left out.
func (pp *poolPicker) readMembers() error {
	pp.read = true
	var devs, streakDevs []int64
	var slots, streakSlots []string
	seen := map[simKey]bool{}
	var keys []simKey
	for _, m := range pp.pool.Members {
		k := simKey{m.DeviceID, m.SIMSlot}
		if d := pp.devices[m.DeviceID]; d == nil || d.Status == store.DeviceDisabled || seen[k] || pp.skip != nil && pp.skip(m) != "" {
			continue
		}
		seen[k] = true
		keys = append(keys, k)
		if _, ok := pp.tally.sims[k]; !ok {
			devs, slots = append(devs, id(m.DeviceID)), append(slots, m.SIMSlot)
		}
		if _, ok := pp.failing[k]; !ok {
			streakDevs, streakSlots = append(streakDevs, id(m.DeviceID)), append(streakSlots, m.SIMSlot)
		}
	}
	if len(devs) > 0 {
		rows, err := pp.t.query(`SELECT x.d, x.s, `+simCountsOf("x.d", "x.s", "$3", "$4")+`
			FROM unnest($1::bigint[], $2::text[]) AS x (d, s)`, devs, slots, dayStamp(pp.tally.now), monthStamp(pp.tally.now))
		if err != nil {
			return err
		}
		for rows.Next() {
			var dev int64
			var slot string
			c := &simCount{}
			if err := c.scan(rows, &dev, &slot); err != nil {
				rows.Close()
				return err
			}
			pp.tally.sims[simKey{uint64(dev), slot}] = c
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
	}
	// A bulk send's recipients, for the members' SIMs with a recipients
	// cap: one statement for all of them.
	if err := pp.tally.readKnown(keys...); err != nil {
		return err
	}
	if len(streakDevs) == 0 {
		return nil
	}
	for i := range streakDevs {
		pp.failing[simKey{uint64(streakDevs[i]), streakSlots[i]}] = false
	}
	return scanStreaks(pp.t, pp.tally.now, func(dev uint64, slot string, failing bool) {
		pp.failing[simKey{dev, slot}] = failing
	}, `SELECT k.device_id, k.sim_slot, k.n, k.last_at FROM sim_streaks k
		JOIN unnest($1::bigint[], $2::text[]) AS x (dev, slot) ON k.device_id = x.dev AND k.sim_slot = x.slot`, streakDevs, streakSlots)
}

// roundRobin takes the next usable member after the last one taken.
func (pp *poolPicker) roundRobin(phone string) (store.PoolMember, *store.Device, bool, error) {
	return pp.first(pp.order(nil), phone)
}

// leastLoaded takes the usable member whose device has the fewest queued
// jobs; ties go in turn, so equal members share the sends evenly.
func (pp *poolPicker) leastLoaded(phone string) (store.PoolMember, *store.Device, bool, error) {
	if pp.load == nil {
		if err := pp.readLoads(); err != nil {
			return store.PoolMember{}, nil, false, err
		}
	}
	return pp.first(pp.order(func(i int) int { return pp.load[pp.pool.Members[i].DeviceID] }), phone)
}

// readLoads counts each member's device's queued jobs, up to
// loadCountCap, in one statement.
func (pp *poolPicker) readLoads() error {
	devs := make([]int64, 0, len(pp.pool.Members))
	for _, m := range pp.pool.Members {
		devs = append(devs, id(m.DeviceID))
	}
	load := make(map[uint64]int, len(devs))
	// A device's queue as QueueDepth counts it (waitingQueued).
	rows, err := pp.t.query(`SELECT d, (SELECT count(*) FROM (SELECT 1 FROM messages m
			WHERE m.company_id = $1 AND m.device_id = d AND `+waitingQueued+` LIMIT $3) q)
		FROM unnest($2::bigint[]) AS d`, id(pp.pool.CompanyID), devs, loadCountCap)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var dev, n int64
		if err := rows.Scan(&dev, &n); err != nil {
			return err
		}
		load[uint64(dev)] = int(n)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	pp.load = load
	return nil
}

// first takes the first usable member of order (indexes of the pool's
// members) and counts a turn to it and to the members it passed over.
func (pp *poolPicker) first(order []int, phone string) (store.PoolMember, *store.Device, bool, error) {
	for k, i := range order {
		m := pp.pool.Members[i]
		d, ok, err := pp.usable(m, phone)
		if err != nil {
			return m, d, ok, err
		}
		if ok {
			for _, j := range order[:k] {
				pp.stamp(j)
			}
			pp.stamp(i)
			return m, d, ok, nil
		}
	}
	return store.PoolMember{}, nil, false, nil
}

// stamp counts a turn to members[i]: the turn moves past it.
func (pp *poolPicker) stamp(i int) {
	mid := pp.pool.Members[i].ID
	if pp.stamps == nil {
		pp.stamps = map[uint64]int64{}
	}
	pp.stamps[mid]++
	pp.taken[mid]++
}

// stickyMember is the usable member that last talked to phone: this
// transaction's pick, the pool's sticky entry (written within
// store.StickyAge), or else the member whose device's conversation with
// phone is the newest (an inbound text counts).
func (pp *poolPicker) stickyMember(phone string) (store.PoolMember, *store.Device, bool, error) {
	m, found, err := pp.stickyCandidate(phone)
	if err != nil || !found {
		return store.PoolMember{}, nil, false, err
	}
	d, ok, err := pp.usable(m, phone)
	return m, d, ok, err
}

// stickyCandidate is the member that last talked to phone, as stickyMember
// finds it, usable or not; found is false when there is none. What the
// store says of phone (lastTalk) is read ahead when the picker knows its
// recipients (openPool, readTalks), else here.
func (pp *poolPicker) stickyCandidate(phone string) (store.PoolMember, bool, error) {
	if m, ok := pp.sticky[phone]; ok {
		return m, true, nil
	}
	if pp.talked == nil && len(pp.ahead) > 0 {
		if err := pp.readTalks(pp.ahead); err != nil {
			return store.PoolMember{}, false, err
		}
	}
	lt, ok := pp.talked[phone]
	if !ok {
		if err := pp.readTalks([]string{phone}); err != nil {
			return store.PoolMember{}, false, err
		}
		lt = pp.talked[phone]
	}
	find := func(dev *int64, slot *string) (store.PoolMember, bool) {
		for _, m := range pp.pool.Members {
			if int64(m.DeviceID) == *dev && (*slot == "" || m.SIMSlot == *slot) {
				return m, true
			}
		}
		return store.PoolMember{}, false
	}
	switch {
	case lt.written != nil && pp.tally.now.Sub(*lt.written) <= store.StickyAge:
		m, ok := find(lt.entryDev, lt.entrySlot)
		return m, ok, nil
	case lt.convDev != nil:
		m, ok := find(lt.convDev, lt.convSlot)
		return m, ok, nil
	}
	return store.PoolMember{}, false, nil
}

// lastTalk is what the store says of the member that last talked to a
// recipient (stickyCandidate): the pool's sticky entry for it (written_at
// nil: none) and, unless that entry was written within store.StickyAge,
// the device and SIM of the newest SMS message between the recipient and
// a member's device (an inbound text counts; convDev nil: none).
type lastTalk struct {
	entryDev, convDev   *int64
	entrySlot, convSlot *string
	written             *time.Time
}

// lastTalkSQL is the query of a recipient's lastTalk, one row when the
// SQL when holds and none otherwise (nothing is read then): pool,
// company, devices, phone and fresh are the SQL of the pool's id, its
// company's, its members' device ids (an array), the recipient and the
// oldest written_at of an entry within store.StickyAge (freshSince). The
// messages are read only where the entry is missing or may be older, and
// only of the members' devices that have a conversation with the
// recipient, found in one probe of conversations_phone (migration 0023;
// every SMS message has its conversation's row, which goes only with the
// last message it counts): read by device, a new recipient cost a probe of
// every member's messages. SMS conversations only, as the embedded
// store's: an agent's WhatsApp or iMessage messages share the table (and
// the device, on a phone that is both) but are no conversation of the SMS
// lists.
func lastTalkSQL(pool, company, devices, phone, fresh, when string) string {
	return fmt.Sprintf(`SELECT s.device_id AS entry_dev, s.sim_slot AS entry_slot, s.written_at,
			c.device_id AS conv_dev, c.sim_slot AS conv_slot
		FROM (SELECT 1 WHERE %[6]s) one
		LEFT JOIN pool_sticky s ON s.pool_id = %[1]s AND s.phone = %[4]s
		LEFT JOIN LATERAL (SELECT device_id, coalesce(rec->>'sim_slot', '') AS sim_slot FROM messages
			WHERE (s.written_at IS NULL OR s.written_at < %[5]s)
			AND company_id = %[2]s AND phone = %[4]s AND channel NOT IN `+agentChannels+`
			AND device_id IN (SELECT v.device_id FROM conversations v
				WHERE v.company_id = %[2]s AND v.phone = %[4]s AND v.device_id = ANY(%[3]s))
			ORDER BY created_at DESC, id DESC LIMIT 1) c ON true`, pool, company, devices, phone, fresh, when)
}

// memberDevicesSQL is the SQL of the device ids (an array) of the members
// of the pool whose record is the SQL rec.
func memberDevicesSQL(rec string) string {
	return "ARRAY(SELECT (e->>'device_id')::bigint FROM jsonb_array_elements(" + rec + "->'members') e)"
}

// freshSince is the oldest written_at of a sticky entry within
// store.StickyAge at now, rounded up to the database's microsecond: every
// entry older than stickyCandidate keeps (now.Sub(written) > StickyAge)
// is before it.
func freshSince(now time.Time) time.Time {
	at := now.Add(-store.StickyAge)
	if t := at.Truncate(time.Microsecond); t.Before(at) {
		return t.Add(time.Microsecond)
	}
	return at
}

// readTalks reads the lastTalk of each of phones in one statement.
func (pp *poolPicker) readTalks(phones []string) error {
	devs := make([]int64, 0, len(pp.pool.Members))
	for _, m := range pp.pool.Members {
		devs = append(devs, id(m.DeviceID))
	}
	rows, err := pp.t.query(`SELECT ph.phone, lt.entry_dev, lt.entry_slot, lt.written_at, lt.conv_dev, lt.conv_slot
		FROM unnest($3::text[]) AS ph (phone) CROSS JOIN LATERAL (`+lastTalkSQL("$1", "$2", "$4", "ph.phone", "$5", "true")+`) lt`,
		id(pp.pool.ID), id(pp.pool.CompanyID), phones, devs, freshSince(pp.tally.now))
	if err != nil {
		return err
	}
	defer rows.Close()
	if pp.talked == nil {
		pp.talked = make(map[string]lastTalk, len(phones))
	}
	for rows.Next() {
		var phone string
		var lt lastTalk
		if err := rows.Scan(&phone, &lt.entryDev, &lt.entrySlot, &lt.written, &lt.convDev, &lt.convSlot); err != nil {
			return err
		}
		pp.talked[phone] = lt
	}
	return rows.Err()
}

// queueCommit queues the writes of the transaction's picks: the SIMs'
// counts, the turn and the sticky entries.
func (pp *poolPicker) queueCommit(b *pgx.Batch) {
	pp.tally.queueFlush(b)
	pp.queuePicks(b)
}

// queuePicks queues the writes of the picker's own picks, the turn and
// the sticky entries, without the SIMs' counts: pickers that share a
// tally (a failover's, one a pool) flush it once, since each flush adds
// its counts again.
func (pp *poolPicker) queuePicks(b *pgx.Batch) {
	if len(pp.stamps) > 0 {
		members, stamps := make([]int64, 0, len(pp.stamps)), make([]int64, 0, len(pp.stamps))
		for m, st := range pp.stamps {
			members, stamps = append(members, id(m)), append(stamps, st)
		}
		// The member taken is held already (the pick locked it, as a bulk
		// send's or a failover's picker locked them all); a single send's
		// members passed over are counted unless another send holds them:
		// that one takes its turn.
		b.Queue(`UPDATE pool_member_turns t SET taken = t.taken + s.n
			FROM unnest($2::bigint[], $3::bigint[]) AS s (member_id, n)
			WHERE t.pool_id = $1 AND t.member_id = s.member_id AND t.ctid = ANY (ARRAY (
				SELECT ctid FROM pool_member_turns WHERE pool_id = $1 AND member_id = ANY($2) FOR UPDATE SKIP LOCKED))`,
			id(pp.pool.ID), members, stamps)
	}
	if len(pp.sticky) > 0 {
		// One statement for all the picks' recipients (a bulk send's
		// thousands), in phone order.
		phones := slices.Sorted(maps.Keys(pp.sticky))
		devs, slots := make([]int64, len(phones)), make([]string, len(phones))
		for i, phone := range phones {
			devs[i], slots[i] = id(pp.sticky[phone].DeviceID), pp.sticky[phone].SIMSlot
		}
		b.Queue(`INSERT INTO pool_sticky (pool_id, phone, device_id, sim_slot, written_at)
			SELECT $1, s.phone, s.device_id, s.sim_slot, $5 FROM unnest($2::text[], $3::bigint[], $4::text[]) AS s (phone, device_id, sim_slot)
			ON CONFLICT (pool_id, phone) DO UPDATE SET device_id = EXCLUDED.device_id, sim_slot = EXCLUDED.sim_slot, written_at = EXCLUDED.written_at`,
			id(pp.pool.ID), phones, devs, slots, pp.tally.now)
	}
}

// pickFor picks the member for m and sets it on m; a pool none of whose
// members can take it is its error.
func (pp *poolPicker) pickFor(m *store.Message) (store.Device, error) {
	mem, d, err := pp.pick(m.Phone)
	if err != nil {
		return store.Device{}, err
	}
	if err := m.SetPoolMember(pp.pool, d.Fingerprint, mem.SIMSlot, pp.tally.now); err != nil {
		return store.Device{}, err
	}
	return *d, nil
}

// isForeignKey says whether err is a broken foreign key: a row that names
// one deleted since it was read.
func isForeignKey(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23503"
}
