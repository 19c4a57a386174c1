package postgres

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/simrelay/simrelay/store"
)

const (
	// MinServerVersion is the oldest PostgreSQL supported, as
	// server_version_num counts (15.0): contract section 12.
	MinServerVersion = 150000
	// DefaultConnectTimeout bounds each connection attempt when the URL
	// sets no connect_timeout, so a database that does not answer fails the
	// start instead of hanging it.
	DefaultConnectTimeout = 10 * time.Second
	// DefaultTxTimeout is Options.TxTimeout: how long one transaction of
	// the store may take, from the wait for a pooled connection to its
	// COMMIT, before it fails with store.ErrUnavailable (the API's 503).
	// The slowest transactions of a request are a bulk send of 1,000
	// messages and a page of a list or an export: 30 s leaves them a
	// loaded database's room, and answers a request within the half minute that HTTP
	// clients commonly wait, where a database that stops answering without
	// refusing (its host powered off, a partition) held it for the TCP
	// timeout, many minutes. A transaction past it on a live database (an
	// overload, a lock held that long) fails the same way, nothing written
	// unless the deadline passed while its COMMIT was on the way: the
	// database may have committed it, as when a connection breaks then.
	DefaultTxTimeout = 30 * time.Second
)

// Options are the store's settings beyond the database's URL.
type Options struct {
	// CompanyDailyStorage is how many bytes one company may add per UTC day
	// (messages, webhook events, media; see charge); 0 means no limit.
	CompanyDailyStorage int64
	// Lease is how long a claimed webhook delivery or e-mail stays this
	// store's (ClaimWebhookDeliveries, ClaimMail) before another node may
	// claim it again;
	// DefaultLease when 0. It must outlast an attempt and its record.
	Lease time.Duration
	// Tracer, when set, hears of every statement the store sends, BEGIN and
	// COMMIT included: the tests above the store count them with it (a
	// list's cost must not grow with its rows).
	Tracer pgx.QueryTracer
	// TxTimeout bounds each transaction of the store and each of its
	// statements made outside one, the wait for a pooled connection
	// included: past it the call fails with store.ErrUnavailable.
	// DefaultTxTimeout when 0. The import of a copy (Load) and the counts
	// that check it are bounded only by the TCP keepalive (dial.go): they
	// grow with the whole database.
	TxTimeout time.Duration
	// Existing refuses a database that holds no simrelay schema
	// (ErrNoSchema) instead of creating the schema there: for the admin
	// commands that work on a server's store, so a database named by
	// mistake (another application's, or a new one) is left as it was.
	Existing bool
	// Empty refuses, before anything is written, a database that holds a
	// company (store.ErrNotEmpty) or tables that are not simrelay's (ErrNoSchema):
	// for the bench and admin copy-store, which fill the database they are
	// given, so that one named by mistake is neither filled nor migrated.
	Empty bool
}

// DefaultLease is Options.Lease: six times the webhook attempt's 10 s
// timeout and twice an SMTP attempt's 30 s, so a live node's claim never
// runs out under its attempt, and short enough that a dead node's claims
// are taken over within a minute or so.
const DefaultLease = time.Minute

// Store is the PostgreSQL store: a pool of connections to one database.
type Store struct {
	pool *pgxpool.Pool
	// ctx is every statement's context, cancelled by Close.
	ctx    context.Context
	cancel context.CancelFunc
	// dailyBudget is Options.CompanyDailyStorage.
	dailyBudget int64
	// txTimeout is Options.TxTimeout.
	txTimeout time.Duration
	// pruneBatch is how many rows one transaction of a prune deletes
	// (pruneBatches): defaultPruneBatch; tests set fewer.
	pruneBatch int
	// deviceBatch is how many of a device's unfinished messages one
	// transaction of its deletion fails (DeleteDevice):
	// defaultDeviceBatch; tests set fewer.
	deviceBatch int
	// lease is Options.Lease; holder names this store's leases (leases.go).
	lease  time.Duration
	holder string
	// plans prices a company's subscription into limits (SetPlans); nil: no limits.
	plans store.Plans
	// statusEvents builds outbound status events (SetStatusEvents); nil: none.
	statusEvents *store.StatusEvents
	// inboundEvents builds new inbound messages' events (SetInboundEvents); nil: none.
	inboundEvents *store.InboundEvents
	// deviceEvents builds device events (SetDeviceEvents); nil: none.
	deviceEvents *store.DeviceEvents
	// reports are the workers that make TransitionLater's changes (reports.go).
	reports reporters
	// schema is the schema version this binary migrated to or found at
	// Open, the highest it knows (RegisterNode checks it again).
	schema int
	// pickShard chooses each transaction's shard of the sharded counters
	// (txn.shard); nil: one at random. Tests fix it, so that transactions
	// meet on their counters' rows every time rather than one time in
	// shards.
	pickShard func() int16
}

// Open connects to the database at url (postgres://... or postgresql://...,
// libpq's keywords and pgx's pool_* settings included), checks that it is
// PostgreSQL 15 or later, and migrates its schema to this binary's version.
// Several nodes may open one database at once: each migration is applied
// once. A database whose schema is newer than this binary is refused with
// ErrSchemaTooNew; one whose table schema_version is another
// application's, and with Options.Existing one without simrelay's schema,
// are refused with ErrNoSchema, nothing created in them.
func Open(ctx context.Context, url string, opt Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgconn's error shows the URL with its password masked.
		return nil, fmt.Errorf("store/postgres: %w", err)
	}
	connDefaults(cfg.ConnConfig)
	return openConfig(ctx, cfg, opt)
}

// openConfig is Open with the pool's settings parsed.
func openConfig(ctx context.Context, cfg *pgxpool.Config, opt Options) (*Store, error) {
	if opt.Tracer != nil {
		cfg.ConnConfig.Tracer = opt.Tracer
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("store/postgres: %w", err)
	}
	if opt.Lease < 0 {
		pool.Close()
		return nil, fmt.Errorf("store/postgres: lease %s: must be positive", opt.Lease)
	}
	if opt.Lease == 0 {
		opt.Lease = DefaultLease
	}
	if opt.TxTimeout < 0 {
		pool.Close()
		return nil, fmt.Errorf("store/postgres: transaction timeout %s: must be positive", opt.TxTimeout)
	}
	if opt.TxTimeout == 0 {
		opt.TxTimeout = DefaultTxTimeout
	}
	s := &Store{pool: pool, dailyBudget: opt.CompanyDailyStorage, lease: opt.Lease, txTimeout: opt.TxTimeout, pruneBatch: defaultPruneBatch, deviceBatch: defaultDeviceBatch, holder: newHolder()}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if err := s.start(ctx, opt); err != nil {
		s.Close()
		return nil, fmt.Errorf("store/postgres: %w", err)
	}
	s.startReporters()
	return s, nil
}

func (s *Store) start(ctx context.Context, opt Options) error {
	var num string
	if err := s.pool.QueryRow(ctx, "SELECT current_setting('server_version_num')").Scan(&num); err != nil {
		return err
	}
	if v, _ := strconv.Atoi(num); v < MinServerVersion {
		return fmt.Errorf("the server is PostgreSQL %d.%d: simrelay needs 15 or later", v/10000, v%10000)
	}
	ms, err := loadMigrations(embedded)
	if err != nil {
		return err
	}
	if opt.Empty {
		if err := empty(ctx, s.pool); err != nil {
			return err
		}
	}
	s.schema, err = migrate(ctx, s.pool, ms, opt.Existing)
	return err
}

// Ping says whether the database answers: the readiness check.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("store/postgres: %w", s.closed(err))
	}
	return nil
}

// SchemaVersion is the highest migration applied to the database.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	v, err := schemaVersion(ctx, s.pool)
	if err != nil {
		return 0, fmt.Errorf("store/postgres: %w", s.closed(err))
	}
	return v, nil
}

// Close cancels the statements in flight and closes every connection.
func (s *Store) Close() error {
	s.cancel()
	s.stopReporters() // the changes queued fail with ErrClosed
	s.pool.Close()
	return nil
}

// bounded is the context of a statement made outside a transaction: the
// store's, within its transaction deadline.
func (s *Store) bounded() (context.Context, context.CancelFunc) {
	return context.WithTimeout(s.ctx, s.txTimeout)
}

// Ready says whether the database answers: the readiness check (/readyz).
func (s *Store) Ready() error {
	ctx, cancel := context.WithTimeout(s.ctx, 2*time.Second)
	defer cancel()
	return s.Ping(ctx)
}

// SetPlans sets how subscriptions price into plan limits; call it before
// the store is used.
func (s *Store) SetPlans(p store.Plans) { s.plans = p }

// SetStatusEvents sets the builder of outbound status events; call it
// before the store is used.
func (s *Store) SetStatusEvents(h store.StatusEvents) { s.statusEvents = &h }

// DailyStorageBudget is the store's budget in bytes per company and day, 0
// when there is none.
func (s *Store) DailyStorageBudget() int64 { return s.dailyBudget }
