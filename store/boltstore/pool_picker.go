package boltstore

// A pool's choice of member for a send: the picker and its cache of decoded
// pools, the three strategies, and the upkeep of the sticky entries.

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/simrelay/simrelay/store"
	bolt "go.etcd.io/bbolt"
)

// loadCountCap is how far least_loaded counts a device's queue: a device
// with that many queued jobs or more counts as that many, so the choice
// reads at most this many keys per member.
const loadCountCap = 100

// poolPicker chooses members of one pool for the sends of one transaction:
// it reads the pool, its turn and its members' state once and keeps what
// its own picks add, so a bulk send spreads as single sends would.
type poolPicker struct {
	tx    *bolt.Tx
	pool  Pool
	check DeviceCheck
	turn  uint64
	// devices caches each member's device (nil: not live).
	devices map[uint64]*Device
	// load is each device's queued jobs (counted up to loadCountCap) plus
	// this transaction's picks; nil until least_loaded needs it.
	load map[uint64]int
	// sticky is this transaction's picks by recipient, written at commit.
	sticky map[string]PoolMember
	// tally counts the sends per SIM against the SIMs' caps.
	tally *simTally
	// skip, when set, passes members over for a reason of the caller's.
	skip func(PoolMember) string
	// passed says why members were passed over, for the refusal.
	passed store.PoolNotes
}

// openPool starts choosing from the company's pool named name; a name the
// company has no pool under is ErrPoolGone.
func openPool(tx *bolt.Tx, companyID uint64, name string, check DeviceCheck, tally *simTally) (*poolPicker, error) {
	id := tx.Bucket(bucketPoolNames).Get(poolNameKey(companyID, name))
	if id == nil {
		return nil, ErrPoolGone
	}
	p, err := decodedPools.get(companyID, btoi(id), tx.Bucket(bucketPools).Get(pair(companyID, btoi(id))))
	if err != nil {
		return nil, err
	}
	return newPicker(tx, p, check, tally), nil
}

// poolCache keeps the last decoded form of each pool record, by its
// bytes: a send through a pool of 200 members would otherwise decode
// their JSON, most of the choice's cost, each time. A record that changed
// has other bytes and is decoded afresh. Pools are read only once
// decoded; the cache holds at most poolCacheSize records (a few MiB with
// the largest pools), and is emptied when full.
type poolCache struct {
	mu   sync.Mutex
	byID map[[2]uint64]cachedPool
}

type cachedPool struct {
	raw  []byte
	pool Pool
}

const poolCacheSize = 256

var decodedPools = &poolCache{byID: map[[2]uint64]cachedPool{}}

func (c *poolCache) get(companyID, poolID uint64, raw []byte) (Pool, error) {
	if raw == nil {
		return Pool{}, ErrNotFound
	}
	k := [2]uint64{companyID, poolID}
	c.mu.Lock()
	v, ok := c.byID[k]
	c.mu.Unlock()
	if ok && bytes.Equal(v.raw, raw) {
		return v.pool, nil
	}
	var p Pool
	if err := jsonUnmarshal(raw, &p); err != nil {
		return p, err
	}
	c.mu.Lock()
	if len(c.byID) >= poolCacheSize {
		clear(c.byID) // rare: hundreds of pools in use; start over
	}
	c.byID[k] = cachedPool{raw: bytes.Clone(raw), pool: p}
	c.mu.Unlock()
	return p, nil
}

// newPicker starts choosing from pool p, at its stored turn.
func newPicker(tx *bolt.Tx, p Pool, check DeviceCheck, tally *simTally) *poolPicker {
	pp := &poolPicker{tx: tx, pool: p, check: check, tally: tally, devices: map[uint64]*Device{}}
	if v := tx.Bucket(bucketPoolTurns).Get(pair(p.CompanyID, p.ID)); len(v) == 8 {
		pp.turn = btoi(v)
	}
	return pp
}

// usable says whether member m can take a send to phone now, noting why not.
func (pp *poolPicker) usable(m PoolMember, phone string) (*Device, bool, error) {
	d, ok := pp.devices[m.DeviceID]
	if !ok {
		dev, err := liveDeviceByID(pp.tx, pp.pool.CompanyID, m.DeviceID)
		switch {
		case err == nil:
			d = &dev
		case !errors.Is(err, ErrDeviceGone):
			return nil, false, err
		}
		pp.devices[m.DeviceID] = d
	}
	why := ""
	if pp.skip != nil {
		why = pp.skip(m)
	}
	if why == "" {
		var err error
		if why, err = store.PoolMemberUnusable(d, m.SIMSlot, func() (bool, error) {
			return carrierFailing(pp.tx, pp.pool.CompanyID, m.DeviceID, m.SIMSlot, pp.tally.now), nil
		}, pp.check); err != nil {
			return nil, false, err
		}
	}
	if why != "" {
		pp.passed.Note(m, why)
		return nil, false, nil
	}
	capped, err := pp.tally.allows(pp.pool.CompanyID, m.DeviceID, m.SIMSlot, phone)
	if err != nil {
		return nil, false, err
	}
	if capped != nil {
		pp.passed.NoteCapped(m, capped)
		return nil, false, nil
	}
	return d, true, nil
}

// pick chooses the member for a send to phone and counts the send
// against its SIM's caps.
func (pp *poolPicker) pick(phone string) (PoolMember, *Device, error) {
	if err := pp.passed.Begin(pp.pool); err != nil {
		return PoolMember{}, nil, err
	}
	m, d, ok, err := pp.pool.PickByStrategy(phone, pp.stickyMember, pp.leastLoaded, pp.roundRobin)
	if err != nil {
		return PoolMember{}, nil, err
	}
	if !ok {
		return PoolMember{}, nil, pp.passed.Refusal(pp.pool)
	}
	if pp.load != nil {
		pp.load[m.DeviceID]++
	}
	pp.remember(phone, m)
	return m, d, pp.tally.take(pp.pool.CompanyID, m.DeviceID, m.SIMSlot, phone)
}

func (pp *poolPicker) remember(phone string, m PoolMember) {
	if pp.pool.Strategy != PoolSticky {
		return
	}
	if pp.sticky == nil {
		pp.sticky = map[string]PoolMember{}
	}
	pp.sticky[phone] = m
}

// roundRobin takes the next usable member after the last one taken.
func (pp *poolPicker) roundRobin(phone string) (PoolMember, *Device, bool, error) {
	return pp.first(store.MemberOrder(len(pp.pool.Members), pp.turn, nil), phone)
}

// leastLoaded takes the usable member whose device has the fewest queued
// jobs; ties go in turn, so equal members share the sends evenly.
func (pp *poolPicker) leastLoaded(phone string) (PoolMember, *Device, bool, error) {
	if pp.load == nil {
		pp.load = make(map[uint64]int, len(pp.pool.Members))
		for _, m := range pp.pool.Members {
			if _, ok := pp.load[m.DeviceID]; !ok {
				pp.load[m.DeviceID] = queuedJobs(pp.tx, pp.pool.CompanyID, m.DeviceID, loadCountCap)
			}
		}
	}
	return pp.first(store.MemberOrder(len(pp.pool.Members), pp.turn, func(i int) int { return pp.load[pp.pool.Members[i].DeviceID] }), phone)
}

// first takes the first usable member of order (indexes of the pool's
// members) and makes the one after it the pool's next turn.
func (pp *poolPicker) first(order []int, phone string) (PoolMember, *Device, bool, error) {
	for _, i := range order {
		m := pp.pool.Members[i]
		d, ok, err := pp.usable(m, phone)
		if err != nil || ok {
			pp.turn = uint64(i) + 1
			return m, d, ok, err
		}
	}
	return PoolMember{}, nil, false, nil
}

// stickyMember is the usable member that last talked to phone: this
// transaction's pick, the pool's sticky entry, or else the member whose
// device's conversation with phone is the newest (an inbound text counts).
func (pp *poolPicker) stickyMember(phone string) (PoolMember, *Device, bool, error) {
	if m, ok := pp.sticky[phone]; ok {
		d, ok, err := pp.usable(m, phone)
		return m, d, ok, err
	}
	find := func(dev uint64, slot string) (PoolMember, bool) {
		for _, m := range pp.pool.Members {
			if m.DeviceID == dev && (slot == "" || m.SIMSlot == slot) {
				return m, true
			}
		}
		return PoolMember{}, false
	}
	cid := pp.pool.CompanyID
	if v := pp.tx.Bucket(bucketPoolSticky).Get(devKey(cid, pp.pool.ID, []byte(phone))); len(v) > 16 && !stickyExpired(v, pp.tally.now) {
		if m, ok := find(btoi(v[:8]), string(v[16:])); ok {
			return pp.usableOr(m, phone)
		}
		return PoolMember{}, nil, false, nil
	}
	var best Conversation
	var bestDev uint64
	seen := map[uint64]bool{}
	for _, m := range pp.pool.Members {
		if seen[m.DeviceID] {
			continue
		}
		seen[m.DeviceID] = true
		var c Conversation
		if getJSON(pp.tx.Bucket(bucketConversations), convKey(cid, m.DeviceID, phone), &c) == nil && c.LastMessageAt.After(best.LastMessageAt) {
			best, bestDev = c, m.DeviceID
		}
	}
	if bestDev == 0 {
		return PoolMember{}, nil, false, nil
	}
	var last Message
	if err := getJSON(pp.tx.Bucket(bucketMessages), itob(best.LastID), &last); err != nil {
		return PoolMember{}, nil, false, err
	}
	m, ok := find(bestDev, last.SIMSlot)
	if !ok {
		return PoolMember{}, nil, false, nil
	}
	return pp.usableOr(m, phone)
}

// stickyExpired says whether the sticky entry v was written more than
// StickyAge before now.
func stickyExpired(v []byte, now time.Time) bool {
	return now.Sub(time.Unix(0, int64(btoi(v[8:16])))) > StickyAge
}

// PruneSticky removes the sticky entries of every pool written before
// cutoff (now less StickyAge in service), so they hold at most the
// recipients a pool sent to within StickyAge.
func (s *Store) PruneSticky(cutoff time.Time) (int, error) {
	var n int
	err := s.update(func(tx *bolt.Tx) error {
		var err error
		n, err = deleteWhere(tx.Bucket(bucketPoolSticky), func(_, v []byte) (bool, error) {
			return len(v) < 16 || time.Unix(0, int64(btoi(v[8:16]))).Before(cutoff), nil
		})
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("store: prune sticky entries: %w", err)
	}
	return n, nil
}

// usableOr is usable for sticky's member: one that cannot send is no error.
func (pp *poolPicker) usableOr(m PoolMember, phone string) (PoolMember, *Device, bool, error) {
	d, ok, err := pp.usable(m, phone)
	return m, d, ok, err
}

// commit writes the turn and the sticky entries of the transaction's picks.
func (pp *poolPicker) commit() error {
	if err := pp.tally.flush(); err != nil {
		return err
	}
	cid := pp.pool.CompanyID
	if err := pp.tx.Bucket(bucketPoolTurns).Put(pair(cid, pp.pool.ID), itob(pp.turn)); err != nil {
		return err
	}
	b := pp.tx.Bucket(bucketPoolSticky)
	for phone, m := range pp.sticky {
		v := append(append(itob(m.DeviceID), itob(uint64(pp.tally.now.UnixNano()))...), m.SIMSlot...)
		if err := b.Put(devKey(cid, pp.pool.ID, []byte(phone)), v); err != nil {
			return err
		}
	}
	return nil
}
