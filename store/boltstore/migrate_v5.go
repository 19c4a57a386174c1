package boltstore

import (
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// Schema 5 counts messages as they change (stats.go) and keeps each
// company's recent activity and disabled devices (activity.go). Its
// migration builds the device indexes, then counts the stored messages in
// steps of MigrateV2Batch, each step committing its counts with its cursor,
// so a crash resumes without counting a message twice. The activity ring
// starts empty: a stored message says too little of its history to tell it.

// keyV5Cursor is the id of the last message counted; absent until the
// device indexes are built.
var keyV5Cursor = []byte("migrate_v5_cursor")

func migrateStats(tx *bolt.Tx) (bool, error) { return migrateStatsIn(tx, MigrateV2Batch) }

func migrateStatsIn(tx *bolt.Tx, batch int) (bool, error) {
	meta := tx.Bucket(bucketMeta)
	cur := meta.Get(keyV5Cursor)
	if cur == nil {
		for _, name := range statsBuckets {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return false, err
			}
		}
		if err := tx.Bucket(bucketDevices).ForEach(func(_, v []byte) error {
			var d Device
			if err := jsonUnmarshal(v, &d); err != nil {
				return err
			}
			if err := syncDisabled(tx, d); err != nil {
				return err
			}
			return nameStatsDevice(tx, d)
		}); err != nil {
			return false, fmt.Errorf("devices: %w", err)
		}
		return false, meta.Put(keyV5Cursor, itob(0))
	}
	after := btoi(cur)
	c := tx.Bucket(bucketMessages).Cursor()
	n := 0
	last := after
	for k, v := c.Seek(itob(after + 1)); k != nil && n < batch; k, v = c.Next() {
		var m Message
		if err := jsonUnmarshal(v, &m); err != nil {
			return false, fmt.Errorf("message %d: %w", btoi(k), err)
		}
		if err := countStored(tx, m); err != nil {
			return false, fmt.Errorf("message %d: %w", m.ID, err)
		}
		last, n = btoi(k), n+1
	}
	if n > 0 {
		return false, meta.Put(keyV5Cursor, itob(last))
	}
	return true, meta.Delete(keyV5Cursor)
}
