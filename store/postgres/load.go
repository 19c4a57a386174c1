package postgres

// Loading a copy of another store (store.Loader; simrelay admin
// copy-store). The whole load is one transaction, so a copy that fails
// leaves the database as it was and can simply be run again. It takes the
// companies table's EXCLUSIVE lock first and refuses a database that holds
// a company: a server started on the database meanwhile cannot create one
// under the copy, and every other record hangs off a company, but for the
// server's secrets, which a node makes at its start. Those the copy
// overwrites with the source's: the source's API keys are sealed with its
// secret, and the sessions it signed with its key, and a database without a
// company has signed nothing.
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

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
	"device_failures": store.KindDeviceFailures,
	"pools":           store.KindPools,
	"pool_turns":      store.KindPools, // CopyPool.Turn
	"pool_sticky":     store.KindStickyEntries,
	"sim_caps":        store.KindSIMCaps,
	"sim_usage":       store.KindSIMCounts,
	"sim_recipients":  store.KindSIMCounts,
	"sim_streaks":     store.KindSIMCounts,
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
	"stream_leases": "", // leases of open console streams
}

// LoadKinds are the kinds Load takes.
func (s *Store) LoadKinds() []store.Kind { return loaded }

// loadBatch is how many rows one COPY carries at most, and loadBatchBytes
// about how many bytes: a batch of media chunks is held in memory whole.
const (
	loadBatch      = 1000
	loadBatchBytes = 16 << 20
)

// identities are the tables whose ids come from an identity column, by the
// kind whose last id moves its sequence.
var identities = map[store.Kind]string{
	store.KindCompanies:         "companies",
	store.KindUsers:             "users",
	store.KindDevices:           "devices",
	store.KindMessages:          "messages",
	store.KindPools:             "pools",
	store.KindWebhookDeliveries: "webhook_deliveries",
	store.KindWebhookAttempts:   "webhook_attempts",
	store.KindMail:              "mail_outbox",
	store.KindAgentNumbers:      "agent_numbers",
}

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
	l := &loader{ctx: ctx, tx: tx, now: time.Now().UTC(), last: store.CopyLastIDs{}, ownBodies: map[uint64]int64{}}
	put := func(r store.CopyRecord) error { return s.closed(l.put(r)) }
	if err := dump(put); err != nil {
		fromSource = true // put's errors are classified already
		return err
	}
	if err := l.flush(); err != nil {
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

// loader buffers the rows of one table at a time and writes them by COPY.
type loader struct {
	ctx  context.Context
	tx   pgx.Tx
	now  time.Time
	last store.CopyLastIDs

	table string
	cols  []string
	rows  [][]any
	size  int // the rows' bytes and strings
	// turns are the pools' round-robin turns (pool id, turn), written
	// once the pools are.
	turns [][2]int64
	// ownBodies are, by company, the bytes of the pending deliveries that
	// carry their own bodies, for the outbox counters.
	ownBodies map[uint64]int64
}

// put adds one record to the load.
func (l *loader) put(r store.CopyRecord) error {
	if last, ok := r.(store.CopyLastIDs); ok {
		for k, v := range last {
			l.last[k] = max(l.last[k], v)
		}
		return nil
	}
	if sec, ok := r.(store.CopySecret); ok {
		_, err := l.tx.Exec(l.ctx, "INSERT INTO secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value", sec.Name, sec.Value)
		return err
	}
	table, cols, row, err := l.row(r)
	if err != nil {
		return err
	}
	if table != l.table && l.table == "pools" {
		if err := l.writeTurns(); err != nil {
			return err
		}
	}
	if table != l.table || !slices.Equal(cols, l.cols) || len(l.rows) >= loadBatch || l.size >= loadBatchBytes {
		if err := l.flush(); err != nil {
			return err
		}
		l.table, l.cols = table, cols
	}
	l.rows = append(l.rows, row)
	for _, v := range row {
		switch v := v.(type) {
		case []byte:
			l.size += len(v)
		case string:
			l.size += len(v)
		}
	}
	return nil
}

// flush writes the buffered rows.
func (l *loader) flush() error {
	if len(l.rows) == 0 {
		return nil
	}
	n, err := l.tx.CopyFrom(l.ctx, pgx.Identifier{l.table}, l.cols, pgx.CopyFromRows(l.rows))
	if err != nil {
		return fmt.Errorf("%s: %w", l.table, mapErr(err))
	}
	if n != int64(len(l.rows)) {
		return fmt.Errorf("%s: %d rows of %d written", l.table, n, len(l.rows))
	}
	l.rows, l.size = l.rows[:0], 0
	return nil
}

// agentMessage is a WhatsApp or iMessage message as its row: it waits in
// its number's queue (number_id), not a device's, and an inbound one keeps
// its agent's client id (agent_client), as insertAgentMessage writes them.
func (l *loader) agentMessage(m store.Message) (table string, cols []string, vals []any, err error) {
	raw, err := rec(m)
	if err != nil {
		return "", nil, nil, fmt.Errorf("%s: %w", store.KindAgentMessages, err)
	}
	var expires, client any
	if !m.ExpiresAt.IsZero() {
		expires = m.ExpiresAt
	}
	if m.Direction == store.Inbound && m.ClientID != "" {
		client = m.ClientID
	}
	return "messages", []string{"id", "company_id", "device_id", "uuid", "direction", "channel", "phone", "status", "expires_at",
			"created_at", "updated_at", "rec", "number_id", "agent_client"},
		[]any{id(m.ID), id(m.CompanyID), id(m.DeviceID), m.UUID, m.Direction, m.Channel, m.Phone, m.Status, expires,
			m.CreatedAt, m.UpdatedAt, raw, id(m.NumberID), client}, nil
}

// writeTurns writes the pools' turns, the pools written.
func (l *loader) writeTurns() error {
	if err := l.flush(); err != nil {
		return err
	}
	rows := make([][]any, len(l.turns))
	for i, t := range l.turns {
		rows[i] = []any{t[0], t[1]}
	}
	l.turns = nil
	if len(rows) == 0 {
		return nil
	}
	_, err := l.tx.CopyFrom(l.ctx, pgx.Identifier{"pool_turns"}, []string{"pool_id", "turn"}, pgx.CopyFromRows(rows))
	if err != nil {
		return fmt.Errorf("pool_turns: %w", err)
	}
	return nil
}

// row is a record as its table's row: the table, its columns and their values.
func (l *loader) row(r store.CopyRecord) (table string, cols []string, vals []any, err error) {
	var raw []byte
	switch r := r.(type) {
	case store.CopyCompany:
		c := r.Company
		if raw, err = rec(c); err == nil {
			return "companies", []string{"id", "api_key_hash", "rec"}, []any{id(c.ID), c.APIKeyHash, raw}, nil
		}
	case store.CopyUser:
		u := r.User
		if raw, err = rec(u); err == nil {
			return "users", []string{"id", "company_id", "email", "held", "rec"}, []any{id(u.ID), id(u.CompanyID), emailKey(u.Email), r.Held, raw}, nil
		}
	case store.CopyDevice:
		d := r.Device
		var token []byte
		var deleted *time.Time
		if r.Deleted {
			deleted = &l.now
		} else {
			token = d.TokenHash
		}
		if raw, err = rec(d); err == nil {
			return "devices", []string{"id", "company_id", "fingerprint", "token_hash", "deleted_at", "rec"},
				[]any{id(d.ID), id(d.CompanyID), d.Fingerprint, token, deleted, raw}, nil
		}
	case store.CopyPairing:
		p := r.Pairing
		if raw, err = rec(p); err == nil {
			return "pairings", []string{"hash", "company_id", "expires_at", "rec"}, []any{r.Hash, id(p.CompanyID), p.ExpiresAt, raw}, nil
		}
	case store.CopySubscription:
		sub := r.Subscription
		var customer *string
		if sub.CustomerID != "" {
			customer = &sub.CustomerID
		}
		if raw, err = rec(sub); err == nil {
			return "subscriptions", []string{"company_id", "customer_id", "rec"}, []any{id(sub.CompanyID), customer, raw}, nil
		}
	case store.CopyPlanUsage:
		return "plan_usage", []string{"company_id", "period_start", "shard", "used"}, []any{id(r.CompanyID), r.PeriodStart, int16(0), r.Used}, nil
	case store.CopyStorageUsage:
		return "storage_usage", []string{"company_id", "day", "shard", "used"}, []any{id(r.CompanyID), int32(r.Day), int16(0), r.Used}, nil
	case store.CopyActivity:
		a := r.Activity
		a.At = a.At.UTC()
		if raw, err = rec(a); err == nil {
			return "activity", []string{"company_id", "rec"}, []any{id(r.CompanyID), raw}, nil
		}
	case store.CopyStats:
		c := r.Counts
		return "stats_days", []string{"company_id", "day", "channel", "device_id", "user_id", "shard", "sent", "delivered", "failed", "received", "expired", "segments"},
			[]any{id(r.CompanyID), int32(r.Day), int16(r.Channel), id(r.DeviceID), id(r.UserID), int16(0),
				int64(c.Sent), int64(c.Delivered), int64(c.Failed), int64(c.Received), int64(c.Expired), int64(c.Segments)}, nil
	case store.CopyTokenFamily:
		f := r.Token
		if raw, err = rec(f); err == nil {
			return "token_families", []string{"family", "user_id", "revoked", "rec"}, []any{r.Family, id(f.UserID), f.Revoked, raw}, nil
		}
	case store.CopyRefreshToken:
		tok := r.Token
		if raw, err = rec(tok); err == nil {
			return "refresh_tokens", []string{"hash", "family", "expires_at", "rec"}, []any{r.Hash, tok.Family, tok.ExpiresAt, raw}, nil
		}
	case store.CopyOneTimeToken:
		tok := r.Token
		if raw, err = rec(tok); err == nil {
			return "one_time_tokens", []string{"hash", "expires_at", "rec"}, []any{r.Hash, tok.ExpiresAt, raw}, nil
		}
	case store.CopyConsoleSession:
		sess := r.Session
		if raw, err = rec(sess); err == nil {
			return "console_sessions", []string{"hash", "user_id", "seen_at", "expires_at", "rec"}, []any{r.Hash, id(sess.UserID), sess.SeenAt, sess.ExpiresAt, raw}, nil
		}
	case store.CopyMessage:
		m := r.Message
		if store.IsAgentChannel(m.Channel) {
			return l.agentMessage(m)
		}
		var clientID any
		if m.Direction == store.Inbound && m.ClientID != "" {
			clientID = m.ClientID
		}
		var place, due, expires any
		if m.Direction == store.Outbound {
			place, due, expires = sendColumns(m)
		}
		if raw, err = rec(m); err == nil {
			return "messages", []string{"id", "company_id", "device_id", "uuid", "direction", "channel", "phone", "status", "client_id",
					"priority", "queue_place", "due_at", "expires_at", "created_at", "updated_at", "rec"},
				[]any{id(m.ID), id(m.CompanyID), id(m.DeviceID), m.UUID, m.Direction, m.Channel, m.Phone, m.Status, clientID,
					int16(m.Priority), place, due, expires, m.CreatedAt, m.UpdatedAt, raw}, nil
		}
	case store.CopyIdempotency:
		if raw, err = rec(r.Answer); err == nil {
			return "idempotency", []string{"company_id", "route", "key", "created_at", "rec"}, []any{id(r.CompanyID), r.Route, r.Key, r.Answer.CreatedAt, raw}, nil
		}
	case store.CopyOptOut:
		o := r.OptOut
		if raw, err = rec(o); err == nil {
			return "opt_outs", []string{"company_id", "phone", "rec"}, []any{id(r.CompanyID), o.Phone, raw}, nil
		}
	case store.CopyDeviceFailure:
		if raw, err = rec(r.Failure); err == nil {
			return "device_failures", []string{"device_id", "company_id", "rec"}, []any{id(r.DeviceID), id(r.CompanyID), raw}, nil
		}
	case store.CopyPool:
		p := r.Pool
		if raw, err = rec(p); err == nil {
			// The turn is written with the pools, once they are in (turns).
			l.turns = append(l.turns, [2]int64{id(p.ID), id(r.Turn)})
			return "pools", []string{"id", "company_id", "name_key", "rec"}, []any{id(p.ID), id(p.CompanyID), poolNameKey(p.Name), raw}, nil
		}
	case store.CopySticky:
		return "pool_sticky", []string{"pool_id", "phone", "device_id", "sim_slot", "written_at"},
			[]any{id(r.PoolID), r.Phone, id(r.DeviceID), r.SIMSlot, r.WrittenAt}, nil
	case store.CopySIMCaps:
		if raw, err = rec(r.Caps); err == nil {
			return "sim_caps", []string{"device_id", "sim_slot", "company_id", "rec"}, []any{id(r.DeviceID), r.Slot, id(r.CompanyID), raw}, nil
		}
	case store.CopySIMUsage:
		return "sim_usage", []string{"device_id", "sim_slot", "kind", "period", "n"}, []any{id(r.DeviceID), r.Slot, string(rune(r.Kind)), r.Period, r.N}, nil
	case store.CopySIMRecipient:
		return "sim_recipients", []string{"device_id", "sim_slot", "day", "phone"}, []any{id(r.DeviceID), r.Slot, r.Day, r.Phone}, nil
	case store.CopySIMStreak:
		return "sim_streaks", []string{"device_id", "sim_slot", "company_id", "n", "last_at"}, []any{id(r.DeviceID), r.Slot, id(r.CompanyID), r.N, r.LastAt}, nil
	case store.CopyWebhookSet:
		if raw, err = rec(r.Set); err == nil {
			return "webhook_sets", []string{"company_id", "rec"}, []any{id(r.Set.CompanyID), raw}, nil
		}
	case store.CopyWebhookEvent:
		return "webhook_events", []string{"id", "company_id", "pending", "body"}, []any{r.ID, id(r.CompanyID), r.Pending, r.Body}, nil
	case store.CopyWebhookDelivery:
		d := r.Delivery
		if len(d.Body) > 0 { // written before events were shared: its bytes are its own
			l.ownBodies[d.CompanyID] += int64(len(d.Body))
		}
		if raw, err = rec(d); err == nil {
			return "webhook_deliveries", []string{"id", "company_id", "webhook_id", "event_id", "next_attempt_at", "rec"},
				[]any{id(d.ID), id(d.CompanyID), id(d.WebhookID), d.EventID, d.NextAttemptAt, raw}, nil
		}
	case store.CopyWebhookAttempt:
		a := r.Attempt
		if raw, err = rec(a); err == nil {
			return "webhook_attempts", []string{"id", "company_id", "webhook_id", "created_at", "rec"}, []any{id(a.ID), id(a.CompanyID), id(a.WebhookID), a.CreatedAt, raw}, nil
		}
	case store.CopyMail:
		m := r.Mail
		if raw, err = rec(m); err == nil {
			return "mail_outbox", []string{"id", "state", "created_at", "rec"}, []any{id(m.ID), m.State, m.CreatedAt, raw}, nil
		}
	case store.CopyMedia:
		m := r.Media
		var msg any
		if m.MessageID != 0 {
			msg = id(m.MessageID)
		}
		if raw, err = rec(m); err == nil {
			return "media", []string{"id", "company_id", "device_id", "key", "message_id", "created_at", "rec"},
				[]any{m.ID, id(m.CompanyID), id(m.DeviceID), m.Key, msg, m.CreatedAt, raw}, nil
		}
	case store.CopyBillingEvent:
		return "billing_events", []string{"event_id", "applied_at"}, []any{r.ID, r.AppliedAt}, nil
	case store.CopyAgentNumber:
		n := r.Number
		var holder any
		if n.DeviceID != 0 {
			holder = id(n.DeviceID)
		}
		if raw, err = rec(n); err == nil {
			return "agent_numbers", []string{"id", "company_id", "channel", "address", "public_id", "device_id", "rec"},
				[]any{id(n.ID), id(n.CompanyID), n.Channel, n.Address, n.PublicID, holder, raw}, nil
		}
	case store.CopyAgentSend:
		return "agent_sends", []string{"company_id", "number_id", "sent_at", "message_id"}, []any{id(r.CompanyID), id(r.NumberID), r.SentAt, id(r.MessageID)}, nil
	case store.CopyMediaChunk:
		return "media_chunks", []string{"media_id", "n", "data"}, []any{r.MediaID, int32(r.N), r.Data}, nil
	}
	if err == nil {
		return "", nil, nil, fmt.Errorf("%s (%T): this build cannot load that kind into PostgreSQL yet", r.CopyKind(), r)
	}
	return "", nil, nil, fmt.Errorf("%s: %w", r.CopyKind(), err)
}

// moveSequences moves each identity column's sequence past both the
// highest id loaded and the highest the source handed out.
func (l *loader) moveSequences() error {
	for kind, table := range identities {
		if _, err := l.tx.Exec(l.ctx, `SELECT setval(pg_get_serial_sequence($1, 'id'), greatest(top, 1), top > 0)
				FROM (SELECT greatest(max(id), $2::bigint) AS top FROM `+pgx.Identifier{table}.Sanitize()+`) t`,
			table, id(l.last[kind])); err != nil {
			return fmt.Errorf("sequence of %s: %w", table, err)
		}
	}
	return nil
}

// placeQueues moves the queue places past the copied ones: queued messages
// keep their places (store.Message.QueuePlace, drawn from the source's
// message ids), so the places' sequence (queue_places, which
// MessageSequence reads) goes past both them and the source's last id, as
// each device's next_place goes past its own queue: a send after the copy
// queues behind every job copied, and a link's cursor never meets a place
// twice.
func (l *loader) placeQueues() error {
	if _, err := l.tx.Exec(l.ctx, `SELECT setval('queue_places', greatest(top, 1), top > 0)
		FROM (SELECT greatest(max(queue_place), $1::bigint) AS top FROM messages) t`, id(l.last[store.KindMessages])); err != nil {
		return fmt.Errorf("queue places: %w", err)
	}
	_, err := l.tx.Exec(l.ctx, `UPDATE devices d SET next_place = q.top
		FROM (SELECT device_id, max(queue_place) AS top FROM messages WHERE queue_place IS NOT NULL GROUP BY device_id) q
		WHERE d.id = q.device_id AND d.next_place < q.top`)
	return err
}

// sumOutboxes writes each company's webhook outbox counters (its pending
// deliveries, the bytes of their events and of the deliveries that carry
// their own) from what was loaded, and moves the webhook entries' ids past
// the source's.
func (l *loader) sumOutboxes() error {
	companies, own := make([]int64, 0, len(l.ownBodies)), make([]int64, 0, len(l.ownBodies))
	for c, n := range l.ownBodies {
		companies, own = append(companies, id(c)), append(own, n)
	}
	if _, err := l.tx.Exec(l.ctx, `INSERT INTO webhook_outboxes (company_id, shard, deliveries, bytes)
		SELECT company_id, 0, sum(deliveries), sum(bytes) FROM (
			SELECT company_id, count(*) AS deliveries, 0 AS bytes FROM webhook_deliveries GROUP BY company_id
			UNION ALL
			SELECT company_id, 0, sum(length(body)) FROM webhook_events GROUP BY company_id
			UNION ALL
			SELECT company_id, 0, bytes FROM unnest($1::bigint[], $2::bigint[]) AS own (company_id, bytes)) o
		GROUP BY company_id`, companies, own); err != nil {
		return fmt.Errorf("webhook outboxes: %w", err)
	}
	if last := l.last[store.KindWebhookSets]; last > 0 {
		if _, err := l.tx.Exec(l.ctx, "SELECT setval('webhook_entry_ids', $1)", id(last)); err != nil {
			return fmt.Errorf("webhook entry ids: %w", err)
		}
	}
	return nil
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
	err := s.read("count records", func(t *txn) error {
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
