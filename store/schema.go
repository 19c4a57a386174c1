package store

import (
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// migrations bring a store from version i to i+1 (index i). A migration
// runs as a series of steps, each in its own transaction; the step that says
// it is done commits together with the version bump, so the version always
// names a whole schema. A migration too big for one transaction keeps its
// place (a cursor in the meta bucket) in each step's transaction, so a crash
// resumes where the last step committed. Append only; never edit a
// migration that has shipped.
var migrations = []func(tx *bolt.Tx) (done bool, err error){
	// 0 -> 1: the first schema; the buckets themselves are created at open.
	func(*bolt.Tx) (bool, error) { return true, nil },
	// 1 -> 2: devices get ids; per-device records move from the fingerprint
	// to company id + device id (migrate_v2.go).
	migrateDeviceIDs,
	// 2 -> 3: one shared body per webhook event, and each company's outbox counted.
	whole(migrateWebhookEvents),
	// 3 -> 4: pending invitations hold no address server-wide (invites.go).
	whole(migratePendingInvitesOutOfEmailIndex),
	// 4 -> 5: message counters, recent activity and the disabled-device
	// index, backfilled from what is stored (migrate_v5.go).
	migrateStats,
}

// whole makes a migration that fits in one transaction a one-step one.
func whole(fn func(*bolt.Tx) error) func(*bolt.Tx) (bool, error) {
	return func(tx *bolt.Tx) (bool, error) { return true, fn(tx) }
}

// SchemaVersion is the version this build writes.
func SchemaVersion() uint64 { return uint64(len(migrations)) }

func (s *Store) migrate() error {
	if err := s.db.Update(func(tx *bolt.Tx) error {
		for _, name := range append(append(append(append(allBuckets, messageBuckets...), webhookBuckets...), statsBuckets...), bucketCompanyUsage) {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return fmt.Errorf("create bucket %s: %w", name, err)
			}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	for {
		var done bool
		err := s.db.Update(func(tx *bolt.Tx) error {
			meta := tx.Bucket(bucketMeta)
			var v uint64
			if raw := meta.Get(keySchemaVersion); raw != nil {
				v = btoi(raw)
			}
			if v > SchemaVersion() {
				return fmt.Errorf("the data file has schema version %d, newer than this build's %d: run a newer simrelay", v, SchemaVersion())
			}
			if v == SchemaVersion() {
				done = true
				return nil
			}
			stepDone, err := migrations[v](tx)
			if err != nil {
				return fmt.Errorf("migration %d -> %d: %w", v, v+1, err)
			}
			if !stepDone {
				return nil // the step committed its part and its cursor; run the next
			}
			return meta.Put(keySchemaVersion, itob(v+1))
		})
		if err != nil {
			return fmt.Errorf("store: %w", err)
		}
		if done {
			return nil
		}
	}
}

// Version is the schema version of the open file.
func (s *Store) Version() (uint64, error) {
	var v uint64
	err := s.db.View(func(tx *bolt.Tx) error {
		if raw := tx.Bucket(bucketMeta).Get(keySchemaVersion); raw != nil {
			v = btoi(raw)
		}
		return nil
	})
	return v, err
}
