package boltstore

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
)

// migrations bring a store from version i to i+1 (index i). A migration
// runs as a series of steps, each in its own transaction. One that fits in a
// single transaction commits together with the version bump. One too big for
// that keeps its place (a cursor in the meta bucket) in each step's
// transaction, so a crash resumes where the last step committed, and marks
// the store as migrating from its first step on (keyMigrating), with the
// version already the target's, so no older build opens it half way.
// Append only; never edit a migration that has shipped.
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
	// 5 -> 6: the counters' sums by company and by device per day, rolled
	// up from the stored counters (migrate_v6.go).
	migrateStatsSums,
	// 6 -> 7: messages, conversations and activity events are written in a
	// compact encoding (record.go). Records written before stay JSON, which
	// this build reads, until they are next written; the version only keeps
	// older builds, which read JSON alone, from opening the file.
	whole(func(*bolt.Tx) error { return nil }),
	// 7 -> 8: the counters' sums by user, device and day, rolled up from the
	// stored counters (migrate_v8.go).
	migrateStatsUserSums,
	// 8 -> 9: each company's addresses, indexed from the stored users
	// (migrate_v9.go).
	migrateCompanyEmails,
	// 9 -> 10: each agent number's count of messages, counted from the
	// stored ones (migrate_v10.go).
	whole(migrateAgentMessageCounts),
	// 10 -> 11: the pending webhook deliveries indexed by company and
	// entry, from the index by due time (migrate_v11.go).
	whole(migrateWebhookDueEntries),
	// 11 -> 12: a WhatsApp or iMessage send handed to an agent records the
	// agent (record.go, tagMessageHanded). Nothing to rewrite; the version
	// only keeps older builds, which cannot read such a record, from
	// opening the file.
	whole(func(*bolt.Tx) error { return nil }),
	// 12 -> 13: the queued WhatsApp and iMessage sends indexed by the
	// registration they were handed to, from the stored queue
	// (migrate_v13.go).
	whole(migrateAgentHanded),
	// 13 -> 14: every mail of a company indexed by the company, from the
	// stored outbox (migrate_v14.go).
	whole(migrateMailCompany),
}

// whole makes a migration that fits in one transaction a one-step one.
func whole(fn func(*bolt.Tx) error) func(*bolt.Tx) (bool, error) {
	return func(tx *bolt.Tx) (bool, error) { return true, fn(tx) }
}

// SchemaVersion is the version this build writes.
func SchemaVersion() uint64 { return uint64(len(migrations)) }

func (s *Store) migrate(ctx context.Context, log *slog.Logger) error {
	// Whether this build may write to the file at all is read first, in a
	// read transaction: a refused file is left as it was, byte for byte.
	// Creating this build's buckets first wrote them into a newer build's
	// file (one whose schema may have dropped or renamed them) before the
	// version refused it.
	if err := s.view(func(tx *bolt.Tx) error { return s.writable(tx) }); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	if err := s.update(func(tx *bolt.Tx) error {
		lists := [][][]byte{allBuckets, messageBuckets, webhookBuckets, statsBuckets, billingBuckets,
			{bucketCompanyUsage, bucketScheduleDue, bucketDevScheduled, bucketOptOuts, bucketDeviceFailures}, agentBuckets, consoleBuckets, poolBuckets, simCapBuckets, failoverBuckets, mediaBuckets}
		for _, name := range slices.Concat(lists...) {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return fmt.Errorf("create bucket %s: %w", name, err)
			}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	from, midway, err := s.migrationDue()
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	if from == SchemaVersion() && !midway {
		return nil
	}
	// A migration rewrites what it moves, which takes a while on a large
	// store: say so before it starts, and how long it took (a new store,
	// at version 0, has nothing to move).
	start, say := time.Now(), log != nil && from > 0 && from < SchemaVersion()
	if say {
		log.Info("migrating the data file to this build's schema; a stop resumes it at the next start", "path", s.path, "from", from, "to", SchemaVersion(), "resumed", midway)
	}
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("store: the migration of %s to schema %d stopped (%w); the next start resumes it where it stopped", s.path, SchemaVersion(), err)
		}
		var done bool
		err := s.update(func(tx *bolt.Tx) error {
			var err error
			done, err = migrateStep(tx, migrations)
			return err
		})
		if err != nil {
			return fmt.Errorf("store: %w", err)
		}
		if done {
			if say {
				log.Info("the data file is migrated", "path", s.path, "schema", SchemaVersion(), "took", time.Since(start).Round(time.Millisecond))
			}
			return nil
		}
	}
}

// writable refuses, before anything is written, a file this build must not
// write to: another program's bbolt database (buckets, none of them ours),
// and a file of a newer schema than this build's, or half way through a
// migration this build does not have.
func (s *Store) writable(tx *bolt.Tx) error {
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		// A bbolt file of another program has buckets but not ours: refuse
		// it rather than write simrelay's buckets into its database.
		return tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
			return fmt.Errorf("%w: %s holds a bucket %q and no simrelay schema: it is another program's database; point --data-dir at another directory", ErrBadFile, s.path, name)
		})
	}
	last := SchemaVersion()
	if raw := meta.Get(keyMigrating); raw != nil {
		if from := btoi(raw); from >= last {
			return fmt.Errorf("the data file is half way through migration %d -> %d, which this build does not have: run a newer simrelay", from, from+1)
		}
		return nil
	}
	if raw := meta.Get(keySchemaVersion); raw != nil && btoi(raw) > last {
		return fmt.Errorf("the data file has schema version %d, newer than this build's %d: run a newer simrelay", btoi(raw), last)
	}
	return nil
}

// migrationDue reads the schema version of the file and whether a
// migration of several steps is under way in it (keyMigrating), whose
// version is its target's already.
func (s *Store) migrationDue() (version uint64, midway bool, err error) {
	err = s.view(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if raw := meta.Get(keySchemaVersion); raw != nil {
			version = btoi(raw)
		}
		if raw := meta.Get(keyMigrating); raw != nil {
			version, midway = btoi(raw), true
		}
		return nil
	})
	return version, midway, err
}

// keyMigrating holds, while a migration of several steps is under way, the
// version it migrates from. The schema version names the target from the
// first step on, so that an older build refuses a half-migrated file
// ("newer than this build") instead of writing to indexes the migration
// has already moved past.
var keyMigrating = []byte("migrating_from")

// migrateStep runs one step of the next migration in tx, and reports
// whether the store is at the last version of steps.
func migrateStep(tx *bolt.Tx, steps []func(*bolt.Tx) (bool, error)) (bool, error) {
	meta := tx.Bucket(bucketMeta)
	var v uint64
	if raw := meta.Get(keySchemaVersion); raw != nil {
		v = btoi(raw)
	}
	last := uint64(len(steps))
	if raw := meta.Get(keyMigrating); raw != nil {
		from := btoi(raw)
		if from >= last {
			return false, fmt.Errorf("the data file is half way through migration %d -> %d, which this build does not have: run a newer simrelay", from, from+1)
		}
		stepDone, err := steps[from](tx)
		if err != nil {
			return false, fmt.Errorf("migration %d -> %d: %w", from, from+1, err)
		}
		if stepDone {
			return false, meta.Delete(keyMigrating)
		}
		return false, nil
	}
	if v > last {
		return false, fmt.Errorf("the data file has schema version %d, newer than this build's %d: run a newer simrelay", v, last)
	}
	if v == last {
		return true, nil
	}
	stepDone, err := steps[v](tx)
	if err != nil {
		return false, fmt.Errorf("migration %d -> %d: %w", v, v+1, err)
	}
	if !stepDone {
		// More steps follow, each in its own transaction, keeping their place
		// in the meta bucket.
		if err := meta.Put(keyMigrating, itob(v)); err != nil {
			return false, err
		}
	}
	return false, meta.Put(keySchemaVersion, itob(v+1))
}

// Version is the schema version of the open file.
func (s *Store) Version() (uint64, error) {
	var v uint64
	err := s.view(func(tx *bolt.Tx) error {
		if raw := tx.Bucket(bucketMeta).Get(keySchemaVersion); raw != nil {
			v = btoi(raw)
		}
		return nil
	})
	return v, err
}

// Current refuses a file whose schema is not this build's, or that is half
// way through a migration, saying what to do. A read-only open (admin mail)
// migrates nothing: without this check it read an older file's records as
// this build's, or a newer build's that it does not know.
func (s *Store) Current() error {
	return s.view(func(tx *bolt.Tx) error {
		if err := s.writable(tx); err != nil { // another program's file, or a newer one
			return err
		}
		meta := tx.Bucket(bucketMeta)
		var v uint64
		if raw := meta.Get(keySchemaVersion); raw != nil {
			v = btoi(raw)
		}
		if v != SchemaVersion() || meta.Get(keyMigrating) != nil {
			return fmt.Errorf("the data file has schema version %d (migrating: %t) where this build reads %d: run this build's simrelay serve on it once, so it migrates the file, then stop it and run the command again",
				v, meta.Get(keyMigrating) != nil, SchemaVersion())
		}
		return nil
	})
}
