package store

import (
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// migrations bring a store from version i to i+1 (index i). Each runs in its
// own transaction together with the version bump, so a crash leaves the store
// at a whole version. Append only; never edit a step that has shipped.
var migrations = []func(tx *bolt.Tx) error{
	// 0 -> 1: the first schema; the buckets themselves are created at open.
	func(*bolt.Tx) error { return nil },
	// 1 -> 2: one shared body per webhook event, and each company's outbox counted.
	migrateWebhookEvents,
	// 2 -> 3: pending invitations hold no address server-wide (invites.go).
	migratePendingInvitesOutOfEmailIndex,
}

// SchemaVersion is the version this build writes.
func SchemaVersion() uint64 { return uint64(len(migrations)) }

func (s *Store) migrate() error {
	if err := s.db.Update(func(tx *bolt.Tx) error {
		for _, name := range append(append(append(allBuckets, messageBuckets...), webhookBuckets...), bucketCompanyUsage) {
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
			if err := migrations[v](tx); err != nil {
				return fmt.Errorf("migration %d -> %d: %w", v, v+1, err)
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
