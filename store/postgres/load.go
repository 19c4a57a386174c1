package postgres

// Loading a copy of another store (store.Loader; simrelay admin
// copy-store). The whole load is one transaction, so a copy that fails
// leaves the database as it was and can simply be run again. It takes the
// companies table's EXCLUSIVE lock first and refuses a database that holds
// a company: a server started on the database meanwhile cannot create one
// under the copy, and every other record hangs off a company, but for the
// server's secrets, which a node makes at its start. Those the copy
// replaces with the source's, all of them: the source's API keys are
// sealed with its secret, and the sessions it signed with its key, and a
// database without a company has signed nothing. So it refuses
// (ErrNodesLive) while a node beats in the registry, which holds the
// secrets it read in memory, as a rotation of them does (RotateSecrets).
//
// Records go in with their ids, by COPY in batches; the identity sequences
// then move past the highest id the source ever handed out (its last ids,
// used or since deleted), so no id is handed out twice, and the queue
// places' sequence past every copied place and id (placeQueues). Split
// counters load into their first shard; what the tables' triggers keep
// (conversations, the counters' day sums) they build as the rows go in, and
// the webhook outbox's counters are summed from what was loaded.
//
// Where the records differ from what this backend writes itself:
//   - a deleted device registration keeps what the source knows of it (id,
//     company, fingerprint, name), with the copy's time as its deletion's;
//   - a webhook delivery written before events were shared carries its own
//     body and names an event the dump gives without one (the delivery
//     sends its own body; endDelivery leaves such an event in place);
//   - an Idempotency-Key answer kept before keys had routes has the route
//     "", which no request has: it no longer replays (it is a day old at
//     most, and pruned with the others);
//   - a provider customer binds the company whose subscription names it;
//     the embedded store's bindings of customers a company no longer has
//     are not kept.
//
// Load and the counts a copy checks are here; the loader that writes the
// records by COPY is in loader.go, each record's row in load_rows.go.

import (
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simrelay/simrelay/store"
)

var _ store.Loader = (*Store)(nil)

// loaded are the kinds Load takes, in store.Kinds' order.
var loaded = []store.Kind{
	store.KindCompanies, store.KindUsers, store.KindDevices, store.KindPairings, store.KindSubscriptions,
	store.KindPlanUsage, store.KindStorageUsage, store.KindActivity, store.KindStats, store.KindTokenFamilies,
	store.KindRefreshTokens, store.KindOneTimeTokens, store.KindConsoleSessions, store.KindSecrets,
	store.KindMessages, store.KindIdempotency, store.KindOptOuts, store.KindDeviceFailures, store.KindPools,
	store.KindStickyEntries, store.KindSIMCaps, store.KindSIMCounts, store.KindWebhookSets, store.KindWebhookEvents,
	store.KindWebhookDeliveries, store.KindWebhookAttempts, store.KindMail, store.KindMedia, store.KindBillingEvents,
	store.KindAgentNumbers, store.KindAgentSends, store.KindAgentMessages,
}

// tableKinds says, for every table of the schema, what a load writes into
// it: the kind whose records it holds (or a part of them), or "" for what
// the database derives from them (triggers, the load's own sums) or keeps
// for itself. A table added without a line here fails
// TestEveryTableLoaded, so a copy never leaves one empty unseen.
var tableKinds = map[string]store.Kind{
	// the schema's own
	"schema_version": "",
	"meta":           "",
	// core and accounts
	"companies":        store.KindCompanies,
	"users":            store.KindUsers,
	"devices":          store.KindDevices,
	"pairings":         store.KindPairings,
	"subscriptions":    store.KindSubscriptions,
	"plan_usage":       store.KindPlanUsage,
	"storage_usage":    store.KindStorageUsage,
	"activity":         store.KindActivity,
	"stats_days":       store.KindStats,
	"messages":         store.KindMessages, // and store.KindAgentMessages
	"token_families":   store.KindTokenFamilies,
	"refresh_tokens":   store.KindRefreshTokens,
	"one_time_tokens":  store.KindOneTimeTokens,
	"console_sessions": store.KindConsoleSessions,
	"secrets":          store.KindSecrets,
	// devices, pools and SIMs
	"device_failures":   store.KindDeviceFailures,
	"pools":             store.KindPools,
	"pool_member_turns": store.KindPools, // CopyPool.Turn
	"pool_sticky":       store.KindStickyEntries,
	"sim_caps":          store.KindSIMCaps,
	"sim_usage":         store.KindSIMCounts,
	"sim_recipients":    store.KindSIMCounts,
	"sim_streaks":       store.KindSIMCounts,
	// the send path, dispatch and the counters
	"idempotency":        store.KindIdempotency,
	"opt_outs":           store.KindOptOuts,
	"conversations":      "", // its triggers
	"stats_company_days": "", // its triggers
	"stats_device_days":  "", // its triggers
	"stats_user_days":    "", // its triggers
	// webhooks, mail and media
	"webhook_sets":       store.KindWebhookSets,
	"webhook_events":     store.KindWebhookEvents,
	"webhook_deliveries": store.KindWebhookDeliveries,
	"webhook_outboxes":   "", // sumOutboxes
	"webhook_attempts":   store.KindWebhookAttempts,
	"mail_outbox":        store.KindMail,
	"media":              store.KindMedia,
	"media_chunks":       store.KindMedia, // CopyMediaChunk
	// billing and agents
	"billing_events": store.KindBillingEvents,
	"agent_numbers":  store.KindAgentNumbers,
	"agent_sends":    store.KindAgentSends,
	// the cluster's own, about running nodes: an embedded store has none of it
	"cluster_nodes": "", // nodes register at start
	"device_links":  "", // links claim their epochs as phones connect
	"rate_windows":  "", // windows start with a node's first request
	"login_windows": "", // as rate_windows
	"stream_leases": "", // leases of open console streams
}

// LoadKinds are the kinds Load takes.
func (s *Store) LoadKinds() []store.Kind { return loaded }

// Load stores every record dump gives, keeping their ids, in one
// transaction; see the top of this file.
func (s *Store) Load(dump func(put func(store.CopyRecord) error) error) error {
	if err := s.load(dump); err != nil {
		return fmt.Errorf("store: load: %w", err)
	}
	return nil
}

func (s *Store) load(dump func(put func(store.CopyRecord) error) error) (err error) {
	// The load's statements run outside the transaction helper, so their
	// errors are classified here as a transaction's are (a full disk is
	// store.ErrDiskFull): put's as they come, the others on the way out.
	// The source's own errors (dump's, not put's) are not the database's
	// and are returned as they are.
	fromSource := false
	defer func() {
		if !fromSource {
			err = s.closed(err)
		}
	}()
	ctx := s.ctx
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit it does nothing
	// The load reads its source between statements, as long as it takes:
	// no idle timeout (serverSettings) ends it half way.
	if _, err := tx.Exec(ctx, "SET LOCAL idle_in_transaction_session_timeout = 0"); err != nil {
		return err
	}
	// The copy replaces the server's secrets, as a rotation does
	// (RotateSecrets): under the same advisory lock, taken before the
	// companies' lock (an admin create-company holds it shared while it
	// inserts its company), and never beside a live node, which holds the
	// secrets it read at its start in memory and would go on signing and
	// sealing with them.
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", migrationLock); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE companies IN EXCLUSIVE MODE"); err != nil {
		return err
	}
	var held bool
	if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM companies)").Scan(&held); err != nil {
		return err
	}
	if held {
		return store.ErrNotEmpty
	}
	if err := noNodeHoldsSecrets(func(sql string, args ...any) (pgx.Rows, error) { return tx.Query(ctx, sql, args...) }, "copy"); err != nil {
		return err
	}
	l := &loader{ctx: ctx, tx: tx, now: time.Now().UTC(), last: store.CopyLastIDs{}, ownBodies: map[uint64]int64{}}
	put := func(r store.CopyRecord) error { return s.closed(l.put(r)) }
	if err := dump(put); err != nil {
		fromSource = true // put's errors are classified already
		return err
	}
	if err := l.flush(); err != nil {
		return err
	}
	if err := l.dropOtherSecrets(); err != nil {
		return err
	}
	if err := l.writeTurns(); err != nil {
		return err
	}
	if err := l.moveSequences(); err != nil {
		return err
	}
	if err := l.placeQueues(); err != nil {
		return err
	}
	if err := l.sumOutboxes(); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// copyCounts are the statements that count each kind as a dump gives it:
// split counters once per key, whatever their shards.
var copyCounts = map[store.Kind]string{
	store.KindCompanies:         "SELECT count(*) FROM companies",
	store.KindUsers:             "SELECT count(*) FROM users",
	store.KindDevices:           "SELECT count(*) FROM devices",
	store.KindPairings:          "SELECT count(*) FROM pairings",
	store.KindSubscriptions:     "SELECT count(*) FROM subscriptions",
	store.KindPlanUsage:         "SELECT count(*) FROM (SELECT 1 FROM plan_usage GROUP BY company_id, period_start HAVING sum(used) > 0) k",
	store.KindStorageUsage:      "SELECT count(*) FROM (SELECT DISTINCT company_id, day FROM storage_usage) k",
	store.KindActivity:          "SELECT count(*) FROM activity",
	store.KindStats:             "SELECT count(*) FROM (SELECT DISTINCT company_id, day, channel, device_id, user_id FROM stats_days) k",
	store.KindTokenFamilies:     "SELECT count(*) FROM token_families",
	store.KindRefreshTokens:     "SELECT count(*) FROM refresh_tokens",
	store.KindOneTimeTokens:     "SELECT count(*) FROM one_time_tokens",
	store.KindConsoleSessions:   "SELECT count(*) FROM console_sessions",
	store.KindSecrets:           "SELECT count(*) FROM secrets",
	store.KindMessages:          "SELECT count(*) FROM messages WHERE channel NOT IN ('" + store.ChannelNameWhatsApp + "', '" + store.ChannelNameIMessage + "')",
	store.KindAgentMessages:     "SELECT count(*) FROM messages WHERE channel IN ('" + store.ChannelNameWhatsApp + "', '" + store.ChannelNameIMessage + "')",
	store.KindBillingEvents:     "SELECT count(*) FROM billing_events",
	store.KindAgentNumbers:      "SELECT count(*) FROM agent_numbers",
	store.KindAgentSends:        "SELECT count(*) FROM agent_sends",
	store.KindIdempotency:       "SELECT count(*) FROM idempotency WHERE rec IS NOT NULL",
	store.KindOptOuts:           "SELECT count(*) FROM opt_outs",
	store.KindDeviceFailures:    "SELECT count(*) FROM device_failures",
	store.KindPools:             "SELECT count(*) FROM pools",
	store.KindStickyEntries:     "SELECT count(*) FROM pool_sticky",
	store.KindSIMCaps:           "SELECT count(*) FROM sim_caps",
	store.KindSIMCounts:         "SELECT (SELECT count(*) FROM sim_usage) + (SELECT count(*) FROM sim_recipients) + (SELECT count(*) FROM sim_streaks)",
	store.KindWebhookSets:       "SELECT count(*) FROM webhook_sets",
	store.KindWebhookEvents:     "SELECT count(*) FROM webhook_events",
	store.KindWebhookDeliveries: "SELECT count(*) FROM webhook_deliveries",
	store.KindWebhookAttempts:   "SELECT count(*) FROM webhook_attempts",
	store.KindMail:              "SELECT count(*) FROM mail_outbox",
	store.KindMedia:             "SELECT count(*) FROM media",
}

// CopyCounts counts the store's records of each kind Load takes, in one
// snapshot.
func (s *Store) CopyCounts() (map[store.Kind]int64, error) {
	counts := map[store.Kind]int64{}
	err := s.readUnbounded("count records", func(t *txn) error {
		for _, k := range loaded {
			q, ok := copyCounts[k]
			if !ok {
				return errors.New("no count for " + string(k))
			}
			var n int64
			if err := t.row(q).Scan(&n); err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
			counts[k] = n
		}
		return nil
	})
	return counts, err
}
