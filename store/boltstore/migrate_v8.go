package boltstore

import (
	"bytes"
	"encoding/binary"

	bolt "go.etcd.io/bbolt"
)

// Schema 8 keeps each user's day sums on each device (stats_user_days,
// stats.go), so a users filter of the analytics reads those users' records
// and not the full records of every user of the range. Its migration rolls
// them up from the stored counters as the one to schema 6 does: in steps of
// MigrateV8Batch counter records, each committing its sums with its place,
// after emptying the bucket (a store migrated from before schema 5 has had
// its messages counted into it already).

// MigrateV8Batch is how many counter records one step of the migration to
// schema 8 rolls up.
const MigrateV8Batch = 50000

// keyV8Cursor is the key of the last counter record rolled up; empty until
// the first record is.
var keyV8Cursor = []byte("migrate_v8_cursor")

func migrateStatsUserSums(tx *bolt.Tx) (bool, error) {
	return migrateStatsUserSumsIn(tx, MigrateV8Batch)
}

func migrateStatsUserSumsIn(tx *bolt.Tx, batch int) (bool, error) {
	meta := tx.Bucket(bucketMeta)
	after := meta.Get(keyV8Cursor)
	if after == nil {
		if tx.Bucket(bucketStatsUserDays) != nil {
			if err := tx.DeleteBucket(bucketStatsUserDays); err != nil {
				return false, err
			}
		}
		if _, err := tx.CreateBucket(bucketStatsUserDays); err != nil {
			return false, err
		}
		return false, meta.Put(keyV8Cursor, []byte{})
	}
	userDays := tx.Bucket(bucketStatsUserDays)
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
		company, day := binary.BigEndian.Uint64(k), binary.BigEndian.Uint32(k[8:])
		dev, user := binary.BigEndian.Uint64(k[13:]), binary.BigEndian.Uint64(k[21:])
		if err := addCounts(userDays, statsUserDayKey(company, user, day, dev), decodeCounts(v)); err != nil {
			return false, err
		}
	}
	if last != nil {
		return false, meta.Put(keyV8Cursor, bytes.Clone(last))
	}
	return true, meta.Delete(keyV8Cursor)
}
