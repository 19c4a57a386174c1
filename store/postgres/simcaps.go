package postgres

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/store"
)

// Per-SIM caps (docs/routing.md): messages per UTC day and month, and
// distinct recipients per UTC day. A send reads its SIM's caps and counts
// and adds to them with its device's row locked (route locks it), so a cap
// refuses at the exact count however many sends race, on one node or many.
// The counts are rows of sim_usage, the day's recipients rows of
// sim_recipients (only while the SIM has a recipients cap). Whether a
// SIM sent to a recipient today already is one statement for a single
// send, and one for all the recipients of a bulk send (expect,
// readKnown), read under the same lock: a bulk's statements do not grow
// with its messages (TestBulkRecipientsCapStatements).

// Kinds of sim_usage rows.
const (
	usageDay        = "d" // sends of a UTC day, period yyyymmdd
	usageMonth      = "m" // sends of a UTC month, period yyyymm
	usageRecipients = "r" // distinct recipients of a UTC day, period yyyymmdd
)

func dayStamp(t time.Time) int32 {
	y, m, d := t.UTC().Date()
	return int32(y*10000 + int(m)*100 + d)
}

func monthStamp(t time.Time) int32 {
	y, m, _ := t.UTC().Date()
	return int32(y*100 + int(m))
}

// simTally is the caps and counts of the SIMs one transaction sends from,
// read once (under their device's row lock) and written at its end, with
// this transaction's sends added.
type simTally struct {
	t    *txn
	now  time.Time
	sims map[simKey]*simCount
	// ahead is the recipients of a bulk send (expect): whether a SIM with
	// a recipients cap sent to them today is read for all of them at once
	// (readKnown), not one statement a message.
	ahead map[string]bool
}

type simKey struct {
	dev  uint64
	slot string
}

type simCount struct {
	caps               store.SIMCaps
	day, month, recips int64 // as stored
	added              int64 // this transaction's sends
	newRecips          map[string]bool
	// sentTo is which of the tally's ahead the SIM sent to today, as
	// stored, once aheadRead (readKnown).
	sentTo    map[string]bool
	aheadRead bool
	// asked is what known read of the SIM one recipient at a time: a send
	// at the cap asks allows, then take, of its one recipient, and the
	// second answer is the first.
	asked map[string]bool
}

func newSIMTally(t *txn, now time.Time) *simTally {
	return &simTally{t: t, now: now, sims: map[simKey]*simCount{}}
}

// expect tells the tally the recipients of a bulk send, which known then
// looks up for all of them at once, a SIM's at its first question.
func (st *simTally) expect(phones []string) {
	if len(phones) == 0 {
		return
	}
	st.ahead = make(map[string]bool, len(phones))
	for _, p := range phones {
		st.ahead[p] = true
	}
}

// readKnown reads, in one statement, which of the tally's ahead each of
// the SIMs with a recipients cap among keys (read into the tally) sent to
// today: what known answers for them from then on. The caller holds their
// devices' row locks, as for their counts, so what it reads stays true
// until the commit.
func (st *simTally) readKnown(keys ...simKey) error {
	if len(st.ahead) == 0 {
		return nil
	}
	var devs []int64
	var slots []string
	for _, k := range keys {
		if c := st.sims[k]; c != nil && c.caps.RecipientsPerDay > 0 && !c.aheadRead {
			c.aheadRead, c.sentTo = true, map[string]bool{}
			devs, slots = append(devs, id(k.dev)), append(slots, k.slot)
		}
	}
	if len(devs) == 0 {
		return nil
	}
	phones := make([]string, 0, len(st.ahead))
	for p := range st.ahead {
		phones = append(phones, p)
	}
	rows, err := st.t.query(`SELECT r.device_id, r.sim_slot, r.phone FROM unnest($1::bigint[], $2::text[]) AS x (d, s)
		JOIN sim_recipients r ON r.device_id = x.d AND r.sim_slot = x.s AND r.day = $3 AND r.phone = ANY($4)`,
		devs, slots, dayStamp(st.now), phones)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var dev int64
		var slot, phone string
		if err := rows.Scan(&dev, &slot, &phone); err != nil {
			return err
		}
		st.sims[simKey{uint64(dev), slot}].sentTo[phone] = true
	}
	return rows.Err()
}

// sim reads the SIM's caps and counts; the caller holds its device's row
// lock when it will count a send.
func (st *simTally) sim(dev uint64, slot string) (*simCount, error) {
	k := simKey{dev, slot}
	if c, ok := st.sims[k]; ok {
		return c, nil
	}
	c := &simCount{}
	row := st.t.row(`SELECT `+simCountsOf("$1", "$2", "$3", "$4"), id(dev), slot, dayStamp(st.now), monthStamp(st.now))
	if err := c.scan(row); err != nil {
		return nil, err
	}
	st.sims[k] = c
	return c, nil
}

// simCountsOf are the columns of a SIM's caps and counts (simCount.scan):
// dev, slot, day and month are the SQL of its device id, its slot and the
// day's and month's stamps.
func simCountsOf(dev, slot, day, month string) string {
	return fmt.Sprintf(`(SELECT rec FROM sim_caps WHERE device_id = %[1]s AND sim_slot = %[2]s),
		coalesce((SELECT n FROM sim_usage WHERE device_id = %[1]s AND sim_slot = %[2]s AND kind = 'd' AND period = %[3]s), 0),
		coalesce((SELECT n FROM sim_usage WHERE device_id = %[1]s AND sim_slot = %[2]s AND kind = 'm' AND period = %[4]s), 0),
		coalesce((SELECT n FROM sim_usage WHERE device_id = %[1]s AND sim_slot = %[2]s AND kind = 'r' AND period = %[3]s), 0)`,
		dev, slot, day, month)
}

// scan reads the columns of simCountsOf, the scanned values first (dest).
func (c *simCount) scan(row pgx.Row, dest ...any) error {
	var caps []byte
	if err := row.Scan(append(dest, &caps, &c.day, &c.month, &c.recips)...); err != nil {
		return err
	}
	if caps != nil {
		return json.Unmarshal(caps, &c.caps)
	}
	return nil
}

// queueSIM queues the read of the caps and counts of the slot of the
// company's live device with this fingerprint, for a send whose batch
// locks the device in the statement before (so the counts are read under
// its lock, as sim reads them). The tally keeps what it read for the
// device it found; none (the device is gone) leaves the tally to read.
func (st *simTally) queueSIM(b *pgx.Batch, companyID uint64, fingerprint, slot string) {
	b.Queue(`SELECT d.id, `+simCountsOf("d.id", "$3", "$4", "$5")+`
		FROM devices d WHERE d.company_id = $1 AND d.fingerprint = $2 AND d.deleted_at IS NULL`,
		id(companyID), fingerprint, slot, dayStamp(st.now), monthStamp(st.now)).QueryRow(func(row pgx.Row) error {
		c := &simCount{}
		var dev int64
		err := c.scan(row, &dev)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err == nil {
			st.sims[simKey{uint64(dev), slot}] = c
		}
		return err
	})
}

// queueSIMByID queues sim's read of the SIM's caps and counts, for a
// batch whose transaction holds the device's lock already, unless the
// tally has them.
func (st *simTally) queueSIMByID(b *pgx.Batch, dev uint64, slot string) {
	k := simKey{dev, slot}
	if _, ok := st.sims[k]; ok {
		return
	}
	b.Queue(`SELECT `+simCountsOf("$1", "$2", "$3", "$4"), id(dev), slot, dayStamp(st.now), monthStamp(st.now)).QueryRow(func(row pgx.Row) error {
		c := &simCount{}
		if err := c.scan(row); err != nil {
			return err
		}
		st.sims[k] = c
		return nil
	})
}

// allows says whether one more send to phone fits the SIM's caps.
func (st *simTally) allows(dev uint64, slot, phone string) (*store.SIMCappedError, error) {
	c, err := st.sim(dev, slot)
	if err != nil {
		return nil, err
	}
	y, m, dd := st.now.UTC().Date()
	nextDay := time.Date(y, m, dd+1, 0, 0, 0, 0, time.UTC).Sub(st.now)
	nextMonth := time.Date(y, m+1, 1, 0, 0, 0, 0, time.UTC).Sub(st.now)
	switch {
	// The month's cap first: its window ends last (or with the day's, on
	// a month's last day), so a SIM at both answers the wait that ends
	// both; the day's would send a retry back at midnight to be refused.
	case c.caps.PerMonth > 0 && c.month+c.added >= c.caps.PerMonth:
		return &store.SIMCappedError{Slot: slot, What: store.CapPerMonth, Limit: c.caps.PerMonth, RetryAfter: nextMonth}, nil
	case c.caps.PerDay > 0 && c.day+c.added >= c.caps.PerDay:
		return &store.SIMCappedError{Slot: slot, What: store.CapPerDay, Limit: c.caps.PerDay, RetryAfter: nextDay}, nil
	case c.caps.RecipientsPerDay > 0 && c.recips+int64(len(c.newRecips)) >= c.caps.RecipientsPerDay:
		known, err := st.known(dev, slot, c, phone)
		if err != nil {
			return nil, err
		}
		if !known {
			return &store.SIMCappedError{Slot: slot, What: store.CapRecipientsPerDay, Limit: c.caps.RecipientsPerDay, RetryAfter: nextDay}, nil
		}
	}
	return nil, nil
}

// known says whether the SIM sent to phone today already. A recipient of
// a bulk send (expect) is looked up with the others (readKnown); another
// is one statement, once per transaction (asked).
func (st *simTally) known(dev uint64, slot string, c *simCount, phone string) (bool, error) {
	if c.newRecips[phone] {
		return true, nil
	}
	if st.ahead[phone] {
		if err := st.readKnown(simKey{dev, slot}); err != nil {
			return false, err
		}
		if c.aheadRead {
			return c.sentTo[phone], nil
		}
	}
	if ok, asked := c.asked[phone]; asked {
		return ok, nil
	}
	var ok bool
	err := st.t.row("SELECT EXISTS (SELECT 1 FROM sim_recipients WHERE device_id = $1 AND sim_slot = $2 AND day = $3 AND phone = $4)",
		id(dev), slot, dayStamp(st.now), phone).Scan(&ok)
	if err != nil {
		return false, err
	}
	if c.asked == nil {
		c.asked = map[string]bool{}
	}
	c.asked[phone] = ok
	return ok, nil
}

// take counts one send to phone from the SIM (allows said yes).
func (st *simTally) take(dev uint64, slot, phone string) error {
	c, err := st.sim(dev, slot)
	if err != nil {
		return err
	}
	c.added++
	if c.caps.RecipientsPerDay > 0 {
		known, err := st.known(dev, slot, c, phone)
		if err != nil {
			return err
		}
		if !known {
			if c.newRecips == nil {
				c.newRecips = map[string]bool{}
			}
			c.newRecips[phone] = true
		}
	}
	return nil
}

// queueFlush queues the writes that add the transaction's sends to the
// SIMs' counts.
func (st *simTally) queueFlush(b *pgx.Batch) {
	for k, c := range st.sims {
		if c.added == 0 {
			continue
		}
		b.Queue(`INSERT INTO sim_usage (device_id, sim_slot, kind, period, n) VALUES ($1, $2, $3, $4, $7), ($1, $2, $5, $6, $7)
			ON CONFLICT (device_id, sim_slot, kind, period) DO UPDATE SET n = sim_usage.n + EXCLUDED.n`,
			id(k.dev), k.slot, usageDay, dayStamp(st.now), usageMonth, monthStamp(st.now), c.added)
		if len(c.newRecips) == 0 {
			continue
		}
		b.Queue(`INSERT INTO sim_usage (device_id, sim_slot, kind, period, n) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (device_id, sim_slot, kind, period) DO UPDATE SET n = sim_usage.n + EXCLUDED.n`,
			id(k.dev), k.slot, usageRecipients, dayStamp(st.now), int64(len(c.newRecips)))
		phones := make([]string, 0, len(c.newRecips))
		for p := range c.newRecips {
			phones = append(phones, p)
		}
		b.Queue(`INSERT INTO sim_recipients (device_id, sim_slot, day, phone)
			SELECT $1, $2, $3, unnest($4::text[]) ON CONFLICT DO NOTHING`, id(k.dev), k.slot, dayStamp(st.now), phones)
	}
}

// simUsages are both slots' caps and use of the device now.
func simUsages(t *txn, d store.Device, now time.Time) ([]store.SIMUsage, error) {
	st := newSIMTally(t, now)
	var out []store.SIMUsage
	for _, slot := range proto.SIMSlots() {
		c, err := st.sim(d.ID, slot)
		if err != nil {
			return nil, err
		}
		out = append(out, store.SIMUsage{Slot: slot, Caps: c.caps, Day: c.day, Month: c.month, Recipients: c.recips})
	}
	return out, nil
}

// SIMUsages returns the caps and today's and this month's use of both SIM
// slots of the company's device; another company's is store.ErrDeviceGone.
func (s *Store) SIMUsages(companyID uint64, fingerprint string, now time.Time) ([]store.SIMUsage, error) {
	var out []store.SIMUsage
	err := s.read("sim caps of "+fingerprint, func(t *txn) error {
		d, err := liveDevice(t, companyID, fingerprint, false)
		if err != nil {
			return err
		}
		out, err = simUsages(t, d, now)
		return err
	})
	return out, err
}

// CompanySIMCaps returns the caps set on the SIMs of the company's live
// devices, by device id and slot, in one statement: a SIM without caps is
// absent, and so is a device none of whose SIMs has any.
func (s *Store) CompanySIMCaps(companyID uint64) (map[uint64]map[string]store.SIMCaps, error) {
	out := map[uint64]map[string]store.SIMCaps{}
	err := s.read("sim caps of company "+strconv.FormatUint(companyID, 10), func(t *txn) error {
		clear(out)
		// Through the company's devices (devices_company), each one's caps
		// by sim_caps' key.
		rows, err := t.query(`SELECT c.device_id, c.sim_slot, c.rec FROM devices d JOIN sim_caps c ON c.device_id = d.id
			WHERE d.company_id = $1 AND d.deleted_at IS NULL`, id(companyID))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var dev int64
			var slot string
			var raw []byte
			if err := rows.Scan(&dev, &slot, &raw); err != nil {
				return err
			}
			var caps store.SIMCaps
			if err := json.Unmarshal(raw, &caps); err != nil {
				return err
			}
			if caps == (store.SIMCaps{}) {
				continue
			}
			if out[uint64(dev)] == nil {
				out[uint64(dev)] = map[string]store.SIMCaps{}
			}
			out[uint64(dev)][slot] = caps
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// SetSIMCaps replaces the caps of the slots given (the others keep
// theirs) for the company's device, and returns both slots' usage. A
// recipients cap counts distinct recipients from when it is set.
func (s *Store) SetSIMCaps(companyID uint64, fingerprint string, caps map[string]store.SIMCaps, now time.Time) ([]store.SIMUsage, error) {
	var out []store.SIMUsage
	err := s.write("set sim caps of "+fingerprint, func(t *txn) error {
		d, err := liveDevice(t, companyID, fingerprint, true)
		if err != nil {
			return err
		}
		for slot, c := range caps {
			if c == (store.SIMCaps{}) {
				if _, err := t.exec("DELETE FROM sim_caps WHERE device_id = $1 AND sim_slot = $2", id(d.ID), slot); err != nil {
					return err
				}
				continue
			}
			raw, err := rec(c)
			if err != nil {
				return err
			}
			if _, err := t.exec(`INSERT INTO sim_caps (device_id, sim_slot, company_id, rec) VALUES ($1, $2, $3, $4)
				ON CONFLICT (device_id, sim_slot) DO UPDATE SET rec = EXCLUDED.rec`, id(d.ID), slot, id(companyID), raw); err != nil {
				return err
			}
		}
		out, err = simUsages(t, d, now)
		return err
	})
	return out, err
}

// PruneSIMCounts drops the per-SIM counts of days and months before now's,
// and the recipients of days before today: what the caps no longer read.
func (s *Store) PruneSIMCounts(now time.Time) (int, error) {
	// Each table is pruned apart, batch by batch: no row of one goes
	// with a row of the other.
	n, err := s.pruneBatches("prune sim counts", func(t *txn, limit int) (int, error) {
		return deleteSome(t, "sim_usage", "(kind = 'm' AND period < $2) OR (kind <> 'm' AND period < $3)", limit,
			monthStamp(now), dayStamp(now))
	})
	if err != nil {
		return n, err
	}
	m, err := s.pruneBatches("prune sim recipients", func(t *txn, limit int) (int, error) {
		return deleteSome(t, "sim_recipients", "day < $2", limit, dayStamp(now))
	})
	return n + m, err
}

// Carrier-error streaks (failover): a report of a send's outcome keeps its
// SIM's streak in sim_streaks, in the report's transaction (reportPlan's
// noteOutcome: a carrier error adds one, a send that went out ends it).

// carrierErrors are the phone's failure reasons that speak of the SIM's
// network rather than of the message (PROTOCOL.md, section 9.6).
var carrierErrors = map[string]bool{"generic_failure": true, "no_service": true, "radio_off": true, "null_pdu": true, "ril_network_err": true}

// failing says whether a streak of n carrier errors, the last at last, is
// one the SIM's pools pass over at now.
func failing(n int64, last, now time.Time) bool {
	return n >= store.CarrierErrorStreak && now.Sub(last) < store.CarrierErrorCooldown
}

// carrierFailing says whether the SIM is in a carrier-error streak now.
func carrierFailing(t *txn, deviceID uint64, slot string, now time.Time) (bool, error) {
	var n int64
	var last time.Time
	err := t.row("SELECT n, last_at FROM sim_streaks WHERE device_id = $1 AND sim_slot = $2", id(deviceID), slot).Scan(&n, &last)
	if errors.Is(mapErr(err), store.ErrNotFound) {
		return false, nil
	}
	return err == nil && failing(n, last, now), err
}

// scanStreaks runs query, which reads sim_streaks rows as (device_id,
// sim_slot, n, last_at), and calls fn with each row's SIM and whether it
// is in a carrier-error streak at now (failing).
func scanStreaks(t *txn, now time.Time, fn func(dev uint64, slot string, failing bool), query string, args ...any) error {
	rows, err := t.query(query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var dev, n int64
		var slot string
		var last time.Time
		if err := rows.Scan(&dev, &slot, &n, &last); err != nil {
			return err
		}
		fn(uint64(dev), slot, failing(n, last, now))
	}
	return rows.Err()
}

// CarrierFailing lists the (device id, slot) SIMs of the company that are
// in a carrier-error streak now.
func (s *Store) CarrierFailing(companyID uint64, now time.Time) (map[uint64][]string, error) {
	out := map[uint64][]string{}
	err := s.read("carrier errors of company "+strconv.FormatUint(companyID, 10), func(t *txn) error {
		clear(out)
		return scanStreaks(t, now, func(dev uint64, slot string, failing bool) {
			if failing {
				out[dev] = append(out[dev], slot)
			}
		}, `SELECT device_id, sim_slot, n, last_at FROM sim_streaks WHERE company_id = $1 AND n >= $2`,
			id(companyID), store.CarrierErrorStreak)
	})
	if err != nil {
		return nil, err
	}
	for _, slots := range out {
		slices.Sort(slots)
	}
	return out, nil
}
