package boltstore

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// DefaultOpenTimeout bounds the wait for the file lock: a store held by a
// running server makes an admin command fail fast instead of hanging,
// within the 2 s that simrelay admin -h and the contract promise, its own
// start and message included (a 2 s wait made it 2.07 s).
const DefaultOpenTimeout = 1500 * time.Millisecond

// FileName is the store's file inside the data directory.
const FileName = "simrelay.db"

var (
	bucketMeta             = []byte("meta")
	bucketCompanies        = []byte("companies")
	bucketAPIKeys          = []byte("api_keys")           // sha256(key) -> company id
	bucketUsers            = []byte("users")              // user id -> User
	bucketUsersByEmail     = []byte("users_by_email")     // lower-case e-mail -> user id
	bucketCompanyUsers     = []byte("company_users")      // company id + user id -> nil
	bucketCompanyEmails    = []byte("company_emails")     // company id + lower-case e-mail -> user id
	bucketRefreshTokens    = []byte("refresh_tokens")     // sha256(token) -> RefreshToken
	bucketTokenFamilies    = []byte("token_families")     // family id -> TokenFamily
	bucketUserFamilies     = []byte("user_families")      // user id + family id -> nil
	bucketOneTimeTokens    = []byte("onetime_tokens")     // sha256(token) -> OneTimeToken
	bucketMailOutbox       = []byte("mail_outbox")        // mail id -> Mail
	bucketPairings         = []byte("pairings")           // sha256(code) -> Pairing
	bucketDevices          = []byte("devices")            // live fingerprint -> Device
	bucketDeviceTokens     = []byte("device_tokens")      // sha256(token) -> device id + fingerprint
	bucketCompanyDeviceIDs = []byte("company_device_ids") // company id + device id -> fingerprint, live devices
	keySchemaVersion       = []byte("schema_version")
	allBuckets             = [][]byte{bucketMeta, bucketCompanies, bucketAPIKeys, bucketUsers, bucketUsersByEmail, bucketCompanyUsers, bucketCompanyEmails, bucketRefreshTokens, bucketTokenFamilies, bucketUserFamilies, bucketOneTimeTokens, bucketMailOutbox, bucketMailCompanyPending, bucketMailCompany, bucketPairings, bucketDevices, bucketDeviceTokens, bucketCompanyDeviceIDs}
	secretPrefix           = "secret:"
)

// Options tune Open.
type Options struct {
	// Timeout bounds the wait for the file lock; DefaultOpenTimeout when zero.
	Timeout time.Duration
	// ReadOnly opens the file with a shared lock and refuses writes.
	ReadOnly bool
	// BulkLoad skips the fsync of each commit, for loading a new store in
	// one go (an import, the load harness); Close syncs once at the end. A
	// crash during a bulk load leaves a store to throw away.
	BulkLoad bool
	// CompanyDailyStorage is how many bytes one company may add per UTC day
	// (messages and webhook events, see charge); 0 means no limit.
	CompanyDailyStorage int64
	// Logger, when set, hears about a zero-length data file being given a
	// new store, and of a company the prune of abandoned sign-ups keeps
	// for a member entry that names no user record.
	Logger *slog.Logger
	// SyncDelay is for measurement only: each group commit holds the
	// writer this much longer after its fsync, as a slower disk would
	// (simrelay serve --store-sync-delay, simrelay bench --slow-sync). 0 in
	// service.
	SyncDelay time.Duration
}

// Store is the open data file.
type Store struct {
	db     *bolt.DB
	path   string
	commit *committer // nil when read-only
	// guard refuses writes once path no longer names the opened file
	// (fileguard.go); it guards nothing on a read-only store.
	guard fileGuard
	// space turns a commit that found no room into store.ErrDiskFull and
	// fails Ready until a probe finds room again (diskfull.go).
	space *space
	// dailyBudget is Options.CompanyDailyStorage; set once at Open.
	dailyBudget int64
	// log is Options.Logger: it hears of damage the store works around
	// (PruneAbandonedSignups); nil hears nothing.
	log *slog.Logger
	// plans prices a company's subscription into limits (SetPlans); nil: no limits.
	plans Plans
	// statusEvents builds outbound status events (SetStatusEvents); nil: none.
	statusEvents *StatusEvents
	// inboundEvents builds new inbound messages' events (SetInboundEvents); nil: none.
	inboundEvents *InboundEvents
	// deviceEvents builds device events (SetDeviceEvents); nil: none.
	deviceEvents *DeviceEvents
}

// Open opens (creating when needed) the store in dir and brings its schema up to date.
func Open(dir string, opt Options) (*Store, error) {
	return OpenContext(context.Background(), dir, opt)
}

// OpenContext is Open whose schema migration stops when ctx ends, between
// two of its steps (each its own transaction, a second or so): the store
// is closed and the error says so, and the next open resumes the migration
// where it stopped. A migration of a large store takes a while (about 40 s
// for 1.5 GB), and a server's stop (Ctrl-C, SIGTERM) during it waited for
// all of it.
func OpenContext(ctx context.Context, dir string, opt Options) (*Store, error) {
	if opt.Timeout <= 0 {
		opt.Timeout = DefaultOpenTimeout
	}
	path := filepath.Join(dir, FileName)
	if opt.ReadOnly {
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("store: no data file at %s: %w", path, err)
		}
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("store: create data dir: %w", err)
	}
	empty, err := checkFile(path, badFileAdvice)
	if err != nil {
		return nil, err
	}
	if empty && opt.ReadOnly {
		return nil, fmt.Errorf("%w: %s is empty (0 bytes), as a first start that failed leaves it: there is nothing to read yet; start the server (or run admin create-company) to write a new store into it", ErrNoStore, path)
	}
	if empty && opt.Logger != nil {
		opt.Logger.Warn("the data file is empty (0 bytes), as a first start that failed leaves it: writing a new store into it", "path", path)
	}
	db, err := openBolt(path, &bolt.Options{Timeout: opt.Timeout, ReadOnly: opt.ReadOnly}, badFileAdvice)
	if errors.Is(err, bolterrors.ErrTimeout) {
		// What to do instead depends on the caller (a backup can be fetched
		// from the running server, a mail read in its log), so the caller says it.
		return nil, fmt.Errorf("%w: %s is locked (is a simrelay server running on it? stop it first)", ErrLocked, path)
	}
	if errors.Is(err, ErrBadFile) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	if !empty {
		if err := checkRoots(db, path, badFileAdvice); err != nil {
			_ = db.Close()
			return nil, err
		}
	}
	db.NoSync = opt.BulkLoad
	s := &Store{db: db, path: path, space: &space{db: db, log: opt.Logger}, log: opt.Logger, dailyBudget: max(opt.CompanyDailyStorage, 0)}
	if !opt.ReadOnly {
		if s.guard, err = newFileGuard(path); err != nil {
			_ = db.Close()
			return nil, err
		}
		if err := s.migrate(ctx, opt.Logger); err != nil {
			_ = db.Close()
			return nil, err
		}
		s.commit = newCommitter(db, max(opt.SyncDelay, 0), s.guard.check, s.space)
	}
	return s, nil
}

// Path is the data file's path.
func (s *Store) Path() string { return s.path }

// Close lets grouped writes in flight finish, then closes the file.
func (s *Store) Close() error {
	if s.commit != nil {
		s.commit.close()
	}
	if s.db.NoSync {
		if err := s.db.Sync(); err != nil {
			_ = s.db.Close()
			return fmt.Errorf("store: sync after bulk load: %w", err)
		}
	}
	return s.db.Close()
}

// view is db.View with a closed file's error as ErrClosed (closedErr).
func (s *Store) view(fn func(*bolt.Tx) error) error { return closedErr(s.db.View(fn)) }

// closedErr is err with ErrClosed in front when it is bbolt's answer for a
// file closed already: a read or an ungrouped write after Close then
// answers what the group commit answers a grouped one, and what the
// PostgreSQL store answers, so a caller that outlives the store (a worker
// draining at shutdown) tells "the store went away" from a fault of the
// data.
func closedErr(err error) error {
	if errors.Is(err, bolterrors.ErrDatabaseNotOpen) {
		return fmt.Errorf("%w: %w", ErrClosed, err)
	}
	return err
}

// grouped runs fn through group commit (see committer.do); on a read-only
// store it is refused.
func (s *Store) grouped(fn func(*bolt.Tx) error) error {
	if s.commit == nil {
		return bolterrors.ErrDatabaseReadOnly
	}
	return s.commit.do(fn)
}

// Ready reports whether the store answers a read and takes writes.
func (s *Store) Ready() error {
	if err := s.guard.check(); err != nil {
		return err
	}
	if err := s.space.ready(); err != nil {
		return err
	}
	return s.view(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketMeta) == nil {
			return errors.New("store: schema missing")
		}
		return nil
	})
}

// Backup writes a consistent copy of the whole file to w.
func (s *Store) Backup(w io.Writer) (int64, error) {
	var n int64
	err := s.view(func(tx *bolt.Tx) error {
		var err error
		n, err = tx.WriteTo(w)
		return err
	})
	return n, err
}

// Secret returns the named server secret, creating size random bytes on first use.
// Secrets never leave the store except through Backup.
func (s *Store) Secret(name string, size int) ([]byte, error) {
	key := []byte(secretPrefix + name)
	var out []byte
	err := s.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketMeta)
		if v := b.Get(key); v != nil {
			out = append([]byte(nil), v...)
			return nil
		}
		out = make([]byte, size)
		if _, err := rand.Read(out); err != nil {
			return err
		}
		return b.Put(key, out)
	})
	if err != nil {
		return nil, fmt.Errorf("store: secret %s: %w", name, err)
	}
	return out, nil
}

func itob(v uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, v)
	return b
}

func btoi(b []byte) uint64 { return binary.BigEndian.Uint64(b) }

// pair is the key of a two-level index entry: a then b, both big-endian.
func pair(a, b uint64) []byte {
	// One slice of its own size: append to itob(a) made two (and the
	// compiler keeps this one on the stack where the key stays there).
	k := make([]byte, 16)
	binary.BigEndian.PutUint64(k, a)
	binary.BigEndian.PutUint64(k[8:], b)
	return k
}

// expiryKey is a queue_expiry key: the expiry time, then the message's id.
func expiryKey(expires time.Time, id uint64) []byte { return pair(uint64(expires.UnixNano()), id) }

// jsonUnmarshal, getJSON and putJSON read and write a stored record: JSON,
// or for messages and conversations the compact encoding (record.go).
func jsonUnmarshal(raw []byte, v any) error { return decodeRecord(raw, v) }

// deleteWhere deletes the bucket's records for which drop (given the key and
// the value) says so, and returns how many. The cursor is re-seated after each delete, as bbolt
// wants when deleting while iterating.
func deleteWhere(b *bolt.Bucket, drop func(k, v []byte) (bool, error)) (int, error) {
	n := 0
	c := b.Cursor()
	for k, v := c.First(); k != nil; {
		gone, err := drop(k, v)
		if err != nil {
			return n, err
		}
		if !gone {
			k, v = c.Next()
			continue
		}
		if err := c.Delete(); err != nil {
			return n, err
		}
		n++
		k, v = c.Seek(k)
	}
	return n, nil
}

func getJSON(b *bolt.Bucket, key []byte, v any) error {
	raw := b.Get(key)
	if raw == nil {
		return ErrNotFound
	}
	return decodeRecord(raw, v)
}

func putJSON(b *bolt.Bucket, key []byte, v any) error {
	raw, err := encodeRecord(v)
	if err != nil {
		return err
	}
	return b.Put(key, raw)
}

// getMessage is getJSON for a message record. The message does not pass
// through an interface, which would put the caller's Message (about 550
// bytes) on the heap for every read: only a record still in JSON is read
// through one, into a copy.
func getMessage(b *bolt.Bucket, key []byte, m *Message) error {
	raw := b.Get(key)
	if raw == nil {
		return ErrNotFound
	}
	if len(raw) > 0 && (raw[0] == tagMessage || raw[0] == tagMessageHanded) {
		return readMessageRecord(m, raw)
	}
	j := *m
	err := decodeRecord(raw, &j)
	*m = j
	return err
}

// putMessage is putJSON for a message record, without boxing a copy of it.
func putMessage(b *bolt.Bucket, key []byte, m *Message) error {
	return b.Put(key, appendMessageRecord(m))
}

// getConversation is getMessage for a conversation record.
func getConversation(b *bolt.Bucket, key []byte, c *Conversation) error {
	raw := b.Get(key)
	if raw == nil {
		return ErrNotFound
	}
	if len(raw) > 0 && raw[0] == tagConversation {
		return readConversationRecord(c, raw)
	}
	j := *c
	err := decodeRecord(raw, &j)
	*c = j
	return err
}

// putConversation is putMessage for a conversation record.
func putConversation(b *bolt.Bucket, key []byte, c *Conversation) error {
	return b.Put(key, appendConversationRecord(c))
}
