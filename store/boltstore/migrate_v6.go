package boltstore

import (
	"bytes"
	"encoding/binary"

	bolt "go.etcd.io/bbolt"
)

// Schema 6 keeps, beside each day's counters by channel, device and user,
// their sums by company and by device (stats.go), so the dashboard and the
// analytics read a range without walking every device's and user's record.
// Its migration rolls the sums up from the stored counters, in steps of
// MigrateV6Batch counter records, each step committing its sums with its
// place, so a crash resumes without adding a record twice. It first empties
// both buckets: a store migrated from before schema 5 has had its messages
// counted into them already.

// MigrateV6Batch is how many counter records one step of the migration to
// schema 6 rolls up.
const MigrateV6Batch = 50000

// keyV6Cursor is the key of the last counter record rolled up; empty until
// the first record is.
var keyV6Cursor = []byte("migrate_v6_cursor")

func migrateStatsSums(tx *bolt.Tx) (bool, error) { return migrateStatsSumsIn(tx, MigrateV6Batch) }

func migrateStatsSumsIn(tx *bolt.Tx, batch int) (bool, error) {
	meta := tx.Bucket(bucketMeta)
	after := meta.Get(keyV6Cursor)
	if after == nil {
		for _, name := range [][]byte{bucketStatsCompanyDays, bucketStatsDeviceDays} {
			if tx.Bucket(name) != nil {
				if err := tx.DeleteBucket(name); err != nil {
					return false, err
				}
			}
			if _, err := tx.CreateBucket(name); err != nil {
				return false, err
			}
		}
		return false, meta.Put(keyV6Cursor, []byte{})
	}
	companyDays, deviceDays := tx.Bucket(bucketStatsCompanyDays), tx.Bucket(bucketStatsDeviceDays)
	c := tx.Bucket(bucketStatsDays).Cursor()
	k, v := c.Seek(after)
	if len(after) > 0 && bytes.Equal(k, after) {
		k, v = c.Next()
	}
	var last []byte
	for n := 0; k != nil && n < batch; k, v = c.Next() {
		last, n = k, n+1
		if len(k) != 29 {
			continue
		}
		company, day, dev := binary.BigEndian.Uint64(k), binary.BigEndian.Uint32(k[8:]), binary.BigEndian.Uint64(k[13:])
		sum := decodeCounts(v)
		if err := addCounts(companyDays, statsCompanyDayKey(company, day), sum); err != nil {
			return false, err
		}
		if err := addCounts(deviceDays, statsDeviceDayKey(company, day, dev), sum); err != nil {
			return false, err
		}
	}
	if last != nil {
		return false, meta.Put(keyV6Cursor, bytes.Clone(last))
	}
	return true, meta.Delete(keyV6Cursor)
}
