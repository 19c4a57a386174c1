package postgres

import (
	"errors"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simrelay/simrelay/store"
)

// shards is how many rows a split counter spreads over (storage_usage,
// plan_usage, stats_days): concurrent writes of one company pick one at
// random, so they rarely queue on the same row; a read sums them.
const shards = 8

func shard() int16 { return int16(rand.IntN(shards)) }

// day numbers UTC days since 1970-01-01, as the counters key them.
func day(t time.Time) int32 { return int32(t.Unix() / 86400) }

// nextID takes the next id of a table's identity column, so a record can
// carry its id in rec from its first write.
func nextID(t *txn, table string) (uint64, error) {
	var n int64
	err := t.row("SELECT nextval(pg_get_serial_sequence($1, 'id'))", table).Scan(&n)
	return uint64(n), err
}

// errAgain asks run for another try of the transaction: a closure that
// lost a race it can resolve by reading again (two registrations of one
// new handset at once) returns it.
var errAgain = errors.New("store: run the transaction again")

// CreateCompany stores a new company with its first user, an admin, in one
// transaction; c.ID and the admin's ID and CompanyID are set. An API key
// hash or an e-mail address already in use is ErrConflict.
func (s *Store) CreateCompany(c *store.Company, admin *store.User) error {
	return s.write("create company", func(t *txn) error {
		cid, err := nextID(t, "companies")
		if err != nil {
			return err
		}
		c.ID = cid
		raw, err := rec(c)
		if err != nil {
			return err
		}
		if _, err := t.exec("INSERT INTO companies (id, api_key_hash, rec) VALUES ($1, $2, $3)", id(cid), c.APIKeyHash, raw); err != nil {
			return err
		}
		admin.CompanyID, admin.Role = cid, store.RoleAdmin
		return insertUser(t, admin)
	})
}

// emailKey is an address as users.email keys it (store.EmailKey).
func emailKey(email string) string { return store.EmailKey(email) }

// insertUser stores a new user, setting its ID; an address in use is
// ErrConflict (the unique constraint on users.email).
func insertUser(t *txn, u *store.User) error {
	uid, err := nextID(t, "users")
	if err != nil {
		return err
	}
	u.ID = uid
	raw, err := rec(u)
	if err != nil {
		return err
	}
	_, err = t.exec("INSERT INTO users (id, company_id, email, rec) VALUES ($1, $2, $3, $4)", id(uid), id(u.CompanyID), emailKey(u.Email), raw)
	return err
}

// lockCompany takes the company's row lock, which guards the rules that
// count a company's rows (its devices against the plan, its last admin):
// writes that check one of them take it first. A company that does not
// exist is ErrNotFound.
func lockCompany(t *txn, companyID uint64) error {
	var one int
	return mapErr(t.row("SELECT 1 FROM companies WHERE id = $1 FOR UPDATE", id(companyID)).Scan(&one))
}

// addActivity adds an event to the company's feed and drops what falls
// out of its newest store.ActivityKeep. The lines another transaction is
// dropping meanwhile (locked) are left to it: every transaction that adds
// a line drops the oldest, and one that waited for another's to drop the
// same lines waited for that one's commit, so a company's writers that add
// a line (every received message) ran one at a time. Should that
// transaction roll back, its lines go with the next addition.
func addActivity(t *txn, companyID uint64, a store.Activity) error {
	// The line and the trim in one round trip.
	b := &pgx.Batch{}
	if err := queueActivity(b, companyID, a); err != nil {
		return err
	}
	return t.sendBatch(b)
}

// queueActivity queues addActivity's two statements, the line and the
// feed's trim, for a caller that sends them with its other writes.
func queueActivity(b *pgx.Batch, companyID uint64, a store.Activity) error {
	a.At = a.At.UTC()
	raw, err := rec(a)
	if err != nil {
		return err
	}
	b.Queue("INSERT INTO activity (company_id, rec) VALUES ($1, $2)", id(companyID), raw)
	b.Queue(`DELETE FROM activity WHERE ctid = ANY (ARRAY (SELECT ctid FROM activity
		WHERE company_id = $1 AND seq < (
			SELECT min(seq) FROM (SELECT seq FROM activity WHERE company_id = $1 ORDER BY seq DESC LIMIT $2) newest)
		FOR UPDATE SKIP LOCKED))`,
		id(companyID), store.ActivityKeep)
	return nil
}

// count adds c to the message's counters of at's day (its company, channel,
// device registration and user; store/boltstore/stats.go says what counts
// when), in one of the row's shards.
func count(t *txn, m store.Message, at time.Time, c store.Counts) error {
	if c.IsZero() {
		return nil
	}
	_, err := t.exec(countSQL, countArgs(m, at, t.shard(), c)...)
	return err
}

// countSQL is count's statement, also queued in batches (ImportMessages);
// countArgs are its arguments.
const countSQL = `INSERT INTO stats_days AS s (company_id, day, channel, device_id, user_id, shard, sent, delivered, failed, received, expired, segments)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
		ON CONFLICT (company_id, day, channel, device_id, user_id, shard) DO UPDATE SET
			sent = s.sent + EXCLUDED.sent, delivered = s.delivered + EXCLUDED.delivered, failed = s.failed + EXCLUDED.failed,
			received = s.received + EXCLUDED.received, expired = s.expired + EXCLUDED.expired, segments = s.segments + EXCLUDED.segments`

func countArgs(m store.Message, at time.Time, sh int16, c store.Counts) []any {
	return []any{id(m.CompanyID), day(at), int16(store.ChannelByte(m.Channel)), id(m.DeviceID), id(store.MessageUser(m)), sh,
		int64(c.Sent), int64(c.Delivered), int64(c.Failed), int64(c.Received), int64(c.Expired), int64(c.Segments)}
}

// countTransition counts an outbound message that moved from one status to
// m.Status and writes its activity event; device names the phone in it.
func countTransition(t *txn, m store.Message, from, device string, at time.Time) error {
	if err := count(t, m, at, store.StatusCounts(m, from, m.Status)); err != nil {
		return err
	}
	if a, ok := store.MessageActivity(m, m.Status, device, at); ok {
		return addActivity(t, m.CompanyID, a)
	}
	return nil
}

// Snapshot answers store.ErrBackupExternal: a database several nodes share
// is backed up with pg_dump, not through one node (GET /admin/backup
// answers 409 backup_external).
func (s *Store) Snapshot(string) (*store.Snapshot, error) { return nil, store.ErrBackupExternal }

// BackupExternal says that Snapshot never makes a copy here, so HEAD
// /admin/backup can answer as GET does without asking for one.
func (s *Store) BackupExternal() bool { return true }
