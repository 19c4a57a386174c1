package postgres

// The load's writer: the loader that buffers one table's rows and writes them
// by COPY in batches, then moves the identity sequences and the queue places
// past what was copied and sums the webhook outbox's counters.

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simrelay/simrelay/store"
)

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
	// turns are the pools' members' turn rows (pool id, member id,
	// taken), written once the pools are.
	turns [][3]int64
	// ownBodies are, by company, the bytes of the pending deliveries that
	// carry their own bodies, for the outbox counters.
	ownBodies map[uint64]int64
	// secrets are the names of the source's secrets, written as they come
	// (dropOtherSecrets deletes the database's others).
	secrets []string
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
		l.secrets = append(l.secrets, sec.Name)
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

// writeTurns writes the pools' turns, the pools written.
func (l *loader) writeTurns() error {
	if err := l.flush(); err != nil {
		return err
	}
	rows := make([][]any, len(l.turns))
	for i, t := range l.turns {
		rows[i] = []any{t[0], t[1], t[2]}
	}
	l.turns = nil
	if len(rows) == 0 {
		return nil
	}
	_, err := l.tx.CopyFrom(l.ctx, pgx.Identifier{"pool_member_turns"}, []string{"pool_id", "member_id", "taken"}, pgx.CopyFromRows(rows))
	if err != nil {
		return fmt.Errorf("pool_member_turns: %w", err)
	}
	return nil
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

// dropOtherSecrets deletes the secrets the source did not give: the
// database's secrets become the source's, all of them. Those a server
// made here before the copy go, the cluster's own among them (the bus's
// cluster id, the settings digest's key), which the next node makes
// afresh. So do the registry's rows (none is live: load checked): a node
// silent past the window but not stopped finds its row gone at its next
// beat and stops, rather than go on with the secrets replaced.
func (l *loader) dropOtherSecrets() error {
	names := append([]string{}, l.secrets...) // never nil: ALL(NULL) would keep them all
	if _, err := l.tx.Exec(l.ctx, "DELETE FROM secrets WHERE name <> ALL($1)", names); err != nil {
		return err
	}
	_, err := l.tx.Exec(l.ctx, "DELETE FROM cluster_nodes")
	return err
}
