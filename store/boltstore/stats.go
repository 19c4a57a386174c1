package boltstore

import (
	"github.com/simrelay/simrelay/store"

	"bytes"
	"encoding/binary"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Message counters for the dashboard and analytics. They are counted as
// things happen, in the transaction that changes the message, so a crash
// never leaves a counter and its message apart and no query ever walks the
// messages. One record per company, UTC day, channel, device registration
// and user holds fixed-size binary counts; the same write adds them to the
// company's day, to the device's day and to the user's day on that device,
// so a range reads only the records its question needs: the company's days
// for its totals and series (90 records for 90 days, whatever the number of
// devices and users), the devices' days for the sums by device, and the
// users' own days under a users filter (each user's records lie together):
//
//	stats_days         company(8) day(4) channel(1) device id(8) user(8) -> Counts
//	stats_company_days company(8) day(4)                                  -> Counts, summed
//	stats_device_days  company(8) day(4) device id(8)                     -> Counts, summed
//	stats_user_days    company(8) user(8) day(4) device id(8)             -> Counts, summed
//	stats_totals       company(8)                                         -> Counts, all time
//	stats_devices      company(8) device id(8)                            -> fingerprint 0 name
//
// What counts, and on which day (the day it happened, UTC):
//   - sent: an outbound message the first time it reaches sent or delivered
//     (a message that goes from sending straight to delivered counts sent
//     and delivered once each); Segments adds its segments then.
//   - delivered, failed: when it reaches that status (failed includes
//     device_deleted). A repeated report moves nothing and counts nothing.
//   - expired: when its TTL ends before a phone took it. Expired is not
//     failed: the message never reached a network. A late outcome after an
//     expiry counts as that outcome too.
//   - received: each new inbound message (a duplicate counts nothing).
//
// Outbound messages count for the user who queued them (0: the API key);
// inbound ones for nobody (StatsNoUser).

var (
	bucketStatsDays        = []byte("stats_days")
	bucketStatsCompanyDays = []byte("stats_company_days")
	bucketStatsDeviceDays  = []byte("stats_device_days")
	bucketStatsUserDays    = []byte("stats_user_days")
	bucketStatsTotals      = []byte("stats_totals")
	bucketStatsDevices     = []byte("stats_devices")
	statsBuckets           = [][]byte{bucketStatsDays, bucketStatsCompanyDays, bucketStatsDeviceDays, bucketStatsUserDays, bucketStatsTotals, bucketStatsDevices,
		bucketActivity, bucketActivityHead, bucketDisabledDevices}
)

const countsLen = 6 * 8

func encodeCounts(c Counts) []byte {
	b := make([]byte, countsLen)
	for i, v := range []uint64{c.Sent, c.Delivered, c.Failed, c.Received, c.Expired, c.Segments} {
		binary.BigEndian.PutUint64(b[i*8:], v)
	}
	return b
}

func decodeCounts(b []byte) Counts {
	if len(b) < countsLen {
		return Counts{}
	}
	u := func(i int) uint64 { return binary.BigEndian.Uint64(b[i*8:]) }
	return Counts{Sent: u(0), Delivered: u(1), Failed: u(2), Received: u(3), Expired: u(4), Segments: u(5)}
}

func statsDayKey(companyID uint64, day uint32, channel byte, deviceID, userID uint64) []byte {
	k := make([]byte, 29)
	binary.BigEndian.PutUint64(k, companyID)
	binary.BigEndian.PutUint32(k[8:], day)
	k[12] = channel
	binary.BigEndian.PutUint64(k[13:], deviceID)
	binary.BigEndian.PutUint64(k[21:], userID)
	return k
}

func statsCompanyDayKey(companyID uint64, day uint32) []byte {
	k := make([]byte, 12)
	binary.BigEndian.PutUint64(k, companyID)
	binary.BigEndian.PutUint32(k[8:], day)
	return k
}

func statsDeviceDayKey(companyID uint64, day uint32, deviceID uint64) []byte {
	k := make([]byte, 20)
	binary.BigEndian.PutUint64(k, companyID)
	binary.BigEndian.PutUint32(k[8:], day)
	binary.BigEndian.PutUint64(k[12:], deviceID)
	return k
}

func statsUserDayKey(companyID, userID uint64, day uint32, deviceID uint64) []byte {
	k := make([]byte, 28)
	binary.BigEndian.PutUint64(k, companyID)
	binary.BigEndian.PutUint64(k[8:], userID)
	binary.BigEndian.PutUint32(k[16:], day)
	binary.BigEndian.PutUint64(k[20:], deviceID)
	return k
}

// addCounts adds c to the counts at key k of b.
func addCounts(b *bolt.Bucket, k []byte, c Counts) error {
	cur := decodeCounts(b.Get(k))
	cur.Add(c)
	return b.Put(k, encodeCounts(cur))
}

// count adds c to the message's counters of at's day, to its company's, its
// device's and its user's sums of that day, and to its company's all-time
// totals.
func count(tx *bolt.Tx, m Message, at time.Time, c Counts) error {
	if c.IsZero() {
		return nil
	}
	day := StatsDay(at)
	for _, r := range []struct {
		bucket []byte
		key    []byte
	}{
		{bucketStatsDays, statsDayKey(m.CompanyID, day, ChannelByte(m.Channel), m.DeviceID, store.MessageUser(m))},
		{bucketStatsCompanyDays, statsCompanyDayKey(m.CompanyID, day)},
		{bucketStatsDeviceDays, statsDeviceDayKey(m.CompanyID, day, m.DeviceID)},
		{bucketStatsUserDays, statsUserDayKey(m.CompanyID, store.MessageUser(m), day, m.DeviceID)},
		{bucketStatsTotals, itob(m.CompanyID)},
	} {
		if err := addCounts(tx.Bucket(r.bucket), r.key, c); err != nil {
			return err
		}
	}
	devs := tx.Bucket(bucketStatsDevices)
	if dk := pair(m.CompanyID, m.DeviceID); devs.Get(dk) == nil {
		return devs.Put(dk, append([]byte(m.Device), 0))
	}
	return nil
}

// nameStatsDevice records a registration's fingerprint and name, so the
// counters of a device deleted since can still be named.
func nameStatsDevice(tx *bolt.Tx, d Device) error {
	b := tx.Bucket(bucketStatsDevices)
	if b == nil {
		return nil // a migration step older than the counters; the counters' migration names it
	}
	v := append(append([]byte(d.Fingerprint), 0), d.Name...)
	if bytes.Equal(b.Get(pair(d.CompanyID, d.ID)), v) {
		return nil
	}
	return b.Put(pair(d.CompanyID, d.ID), v)
}

// countTransition counts an outbound message that moved from one status to
// m.Status and writes its activity event.
func countTransition(tx *bolt.Tx, m Message, from, device string, at time.Time) error {
	if err := count(tx, m, at, store.StatusCounts(m, from, m.Status)); err != nil {
		return err
	}
	if a, ok := store.MessageActivity(m, m.Status, device, at); ok {
		return addActivity(tx, m.CompanyID, a)
	}
	return nil
}

// countStored counts a message stored whole, as an import or the counters'
// migration finds it: its history is not known, so an outbound message
// counts its current status as reached once, on the day of its last update
// (a failed one that had been sent counts failed only), and an inbound one
// is received on the day it was stored.
func countStored(tx *bolt.Tx, m Message) error {
	if m.Direction == Inbound {
		return count(tx, m, m.CreatedAt, Counts{Received: 1})
	}
	at := m.UpdatedAt
	if at.IsZero() {
		at = m.CreatedAt
	}
	return count(tx, m, at, store.StatusCounts(m, MsgQueued, m.Status))
}
