package boltstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	proto "github.com/simrelay/simrelay/android-protocol"
)

// Per-SIM caps (docs/routing.md): messages per UTC day and month, and
// distinct recipients per UTC day, counted in the send's transaction, so a
// cap refuses at the exact count however many sends race for it.

var (
	bucketSIMCaps  = []byte("sim_caps")  // dev slot -> SIMCaps
	bucketSIMUsage = []byte("sim_usage") // dev slot 'd' yyyymmdd | 'm' yyyymm | 'r' yyyymmdd -> count
	bucketSIMRecip = []byte("sim_recip") // dev slot yyyymmdd phone -> nil, while the SIM has a recipients cap
	simCapBuckets  = [][]byte{bucketSIMCaps, bucketSIMUsage, bucketSIMRecip}
)

// simKey is the company and the device (devKey), the slot, a zero byte and
// rest, built in one allocation: every send reads and writes its SIM's
// counts by such keys.
func simKey(companyID, deviceID uint64, slot string, rest ...[]byte) []byte {
	n := 16 + len(slot) + 1
	for _, r := range rest {
		n += len(r)
	}
	k := make([]byte, 16, n)
	binary.BigEndian.PutUint64(k, companyID)
	binary.BigEndian.PutUint64(k[8:], deviceID)
	k = append(append(k, slot...), 0)
	for _, r := range rest {
		k = append(k, r...)
	}
	return k
}

func dayStamp(t time.Time) []byte   { return t.UTC().AppendFormat(make([]byte, 0, 8), "20060102") }
func monthStamp(t time.Time) []byte { return t.UTC().AppendFormat(make([]byte, 0, 6), "200601") }

// simTally is the caps and counts of the SIMs one transaction sends from,
// read once and written at its end, with this transaction's sends added.
type simTally struct {
	tx  *bolt.Tx
	now time.Time
	// one is the first SIM counted, sims the others: a send names one SIM,
	// which then costs the transaction no map (made only for a second).
	one  *simCount
	sims map[simID]*simCount
}

// simID names a SIM: its company, device and slot.
type simID struct {
	cid, dev uint64
	slot     string
}

type simCount struct {
	simID
	caps               SIMCaps
	day, month, recips int64 // as stored
	added              int64 // this transaction's sends
	newRecips          map[string]bool
}

func newSIMTally(tx *bolt.Tx, now time.Time) *simTally {
	return &simTally{tx: tx, now: now}
}

func readCount(b *bolt.Bucket, k []byte) int64 {
	if v := b.Get(k); len(v) == 8 {
		return int64(btoi(v))
	}
	return 0
}

func (t *simTally) sim(cid, dev uint64, slot string) (*simCount, error) {
	id := simID{cid: cid, dev: dev, slot: slot}
	if c := t.one; c != nil && c.simID == id {
		return c, nil
	}
	if c, ok := t.sims[id]; ok {
		return c, nil
	}
	c := &simCount{simID: id}
	if err := getJSON(t.tx.Bucket(bucketSIMCaps), simKey(cid, dev, slot), &c.caps); err != nil && !errors.Is(err, ErrNotFound) {
		return nil, err
	}
	u := t.tx.Bucket(bucketSIMUsage)
	c.day = readCount(u, simKey(cid, dev, slot, []byte{'d'}, dayStamp(t.now)))
	c.month = readCount(u, simKey(cid, dev, slot, []byte{'m'}, monthStamp(t.now)))
	if c.caps.RecipientsPerDay > 0 {
		// Only a recipients cap counts them (flush writes the count
		// only then): a send from an uncapped SIM skips the read.
		c.recips = c.readRecips(u, t.now)
	}
	switch {
	case t.one == nil:
		t.one = c
	case t.sims == nil:
		t.sims = map[simID]*simCount{id: c}
	default:
		t.sims[id] = c
	}
	return c, nil
}

// each calls f for every SIM counted, until f fails.
func (t *simTally) each(f func(*simCount) error) error {
	if t.one == nil {
		return nil
	}
	if err := f(t.one); err != nil {
		return err
	}
	for _, c := range t.sims {
		if err := f(c); err != nil {
			return err
		}
	}
	return nil
}

// readRecips is the SIM's count of distinct recipients today, as stored.
func (c *simCount) readRecips(u *bolt.Bucket, now time.Time) int64 {
	return readCount(u, simKey(c.cid, c.dev, c.slot, []byte{'r'}, dayStamp(now)))
}

// allows says whether one more send to phone fits the SIM's caps.
func (t *simTally) allows(cid, dev uint64, slot, phone string) (*SIMCappedError, error) {
	c, err := t.sim(cid, dev, slot)
	if err != nil {
		return nil, err
	}
	y, m, dd := t.now.UTC().Date()
	nextDay := time.Date(y, m, dd+1, 0, 0, 0, 0, time.UTC).Sub(t.now)
	nextMonth := time.Date(y, m+1, 1, 0, 0, 0, 0, time.UTC).Sub(t.now)
	switch {
	// The month's cap first: its window ends last (or with the day's, on
	// a month's last day), so a SIM at both answers the wait that ends
	// both; the day's would send a retry back at midnight to be refused.
	case c.caps.PerMonth > 0 && c.month+c.added >= c.caps.PerMonth:
		return &SIMCappedError{Slot: slot, What: CapPerMonth, Limit: c.caps.PerMonth, RetryAfter: nextMonth}, nil
	case c.caps.PerDay > 0 && c.day+c.added >= c.caps.PerDay:
		return &SIMCappedError{Slot: slot, What: CapPerDay, Limit: c.caps.PerDay, RetryAfter: nextDay}, nil
	case c.caps.RecipientsPerDay > 0 && c.recips+int64(len(c.newRecips)) >= c.caps.RecipientsPerDay:
		if !c.known(t.tx, t.now, phone) {
			return &SIMCappedError{Slot: slot, What: CapRecipientsPerDay, Limit: c.caps.RecipientsPerDay, RetryAfter: nextDay}, nil
		}
	}
	return nil, nil
}

// known says whether the SIM sent to phone today already.
func (c *simCount) known(tx *bolt.Tx, now time.Time, phone string) bool {
	return c.newRecips[phone] || tx.Bucket(bucketSIMRecip).Get(simKey(c.cid, c.dev, c.slot, dayStamp(now), []byte(phone))) != nil
}

// take counts one send to phone from the SIM (allows said yes).
func (t *simTally) take(cid, dev uint64, slot, phone string) error {
	c, err := t.sim(cid, dev, slot)
	if err != nil {
		return err
	}
	c.added++
	if c.caps.RecipientsPerDay > 0 && !c.known(t.tx, t.now, phone) {
		if c.newRecips == nil {
			c.newRecips = map[string]bool{}
		}
		c.newRecips[phone] = true
	}
	return nil
}

// flush writes the counts of the transaction's sends.
func (t *simTally) flush() error {
	u, r := t.tx.Bucket(bucketSIMUsage), t.tx.Bucket(bucketSIMRecip)
	return t.each(func(c *simCount) error {
		if c.added == 0 {
			return nil
		}
		put := func(kind byte, stamp []byte, v int64) error {
			return u.Put(simKey(c.cid, c.dev, c.slot, []byte{kind}, stamp), itob(uint64(v)))
		}
		if err := put('d', dayStamp(t.now), c.day+c.added); err != nil {
			return err
		}
		if err := put('m', monthStamp(t.now), c.month+c.added); err != nil {
			return err
		}
		if len(c.newRecips) == 0 {
			return nil
		}
		if err := put('r', dayStamp(t.now), c.recips+int64(len(c.newRecips))); err != nil {
			return err
		}
		for phone := range c.newRecips {
			if err := r.Put(simKey(c.cid, c.dev, c.slot, dayStamp(t.now), []byte(phone)), nil); err != nil {
				return err
			}
		}
		return nil
	})
}

// SIMUsages returns the caps and today's and this month's use of both SIM
// slots of the company's device.
func (s *Store) SIMUsages(companyID uint64, fingerprint string, now time.Time) ([]SIMUsage, error) {
	var out []SIMUsage
	err := s.view(func(tx *bolt.Tx) error {
		d, err := liveDevice(tx, companyID, fingerprint)
		if err != nil {
			return err
		}
		out = simUsages(tx, d, now)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: sim caps of %s: %w", fingerprint, err)
	}
	return out, nil
}

func simUsages(tx *bolt.Tx, d Device, now time.Time) []SIMUsage {
	t := newSIMTally(tx, now)
	var out []SIMUsage
	for _, slot := range proto.SIMSlots() {
		c, err := t.sim(d.CompanyID, d.ID, slot)
		if err != nil {
			c = &simCount{}
		} else if c.caps.RecipientsPerDay == 0 {
			// A cap removed today leaves its count, shown until the day ends.
			c.recips = c.readRecips(tx.Bucket(bucketSIMUsage), now)
		}
		out = append(out, SIMUsage{Slot: slot, Caps: c.caps, Day: c.day, Month: c.month, Recipients: c.recips})
	}
	return out
}

// CompanySIMCaps returns the caps set on the SIMs of the company's live
// devices, by device id and slot, in one read: a SIM without caps is
// absent, and so is a device none of whose SIMs has any.
func (s *Store) CompanySIMCaps(companyID uint64) (map[uint64]map[string]SIMCaps, error) {
	out := map[uint64]map[string]SIMCaps{}
	err := s.view(func(tx *bolt.Tx) error {
		clear(out)
		live := tx.Bucket(bucketCompanyDeviceIDs)
		var err error
		walkPrefix(tx.Bucket(bucketSIMCaps), itob(companyID), func(k, v []byte) bool {
			var dev uint64
			var slot string
			if _, dev, slot, _, err = simKeyParts(bucketSIMCaps, k); err != nil {
				return false
			}
			var caps SIMCaps
			if err = decodeRecord(v, &caps); err != nil {
				return false
			}
			if caps == (SIMCaps{}) || live.Get(pair(companyID, dev)) == nil {
				return true
			}
			if out[dev] == nil {
				out[dev] = map[string]SIMCaps{}
			}
			out[dev][slot] = caps
			return true
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: sim caps of company %d: %w", companyID, err)
	}
	return out, nil
}

// SetSIMCaps replaces the caps of the slots given (the others keep
// theirs) for the company's device, and returns both slots' usage. A
// recipients cap counts distinct recipients from when it is set.
func (s *Store) SetSIMCaps(companyID uint64, fingerprint string, caps map[string]SIMCaps, now time.Time) ([]SIMUsage, error) {
	var out []SIMUsage
	err := s.update(func(tx *bolt.Tx) error {
		d, err := liveDevice(tx, companyID, fingerprint)
		if err != nil {
			return err
		}
		b := tx.Bucket(bucketSIMCaps)
		for slot, c := range caps {
			k := simKey(companyID, d.ID, slot)
			if c == (SIMCaps{}) {
				if err := b.Delete(k); err != nil {
					return err
				}
				continue
			}
			if err := putJSON(b, k, c); err != nil {
				return err
			}
		}
		out = simUsages(tx, d, now)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: set sim caps of %s: %w", fingerprint, err)
	}
	return out, nil
}

// PruneSIMCounts drops the per-SIM counts of days and months before now's,
// and the recipients of days before today: what the caps no longer read.
func (s *Store) PruneSIMCounts(now time.Time) (int, error) {
	today, month := dayStamp(now), monthStamp(now)
	n := 0
	err := s.update(func(tx *bolt.Tx) error {
		var err error
		n, err = deleteWhere(tx.Bucket(bucketSIMUsage), func(k, _ []byte) (bool, error) {
			_, rest, ok := bytes.Cut(k[16:], []byte{0})
			if !ok || len(rest) < 1 {
				return false, nil
			}
			if rest[0] == 'm' {
				return bytes.Compare(rest[1:], month) < 0, nil
			}
			return bytes.Compare(rest[1:], today) < 0, nil
		})
		if err != nil {
			return err
		}
		m, err := deleteWhere(tx.Bucket(bucketSIMRecip), func(k, _ []byte) (bool, error) {
			_, rest, ok := bytes.Cut(k[16:], []byte{0})
			return ok && len(rest) >= 8 && bytes.Compare(rest[:8], today) < 0, nil
		})
		n += m
		return err
	})
	return n, err
}
