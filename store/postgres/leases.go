package postgres

import (
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simrelay/simrelay/store"
)

// Leases: with several nodes on one database, each webhook delivery attempt
// and each e-mail attempt is made by one node. (E-mails are claimed one at a
// time by ClaimMail, in mail.go, the same way.) A node claims due rows of
// the outbox under a lock that makes the nodes' claims take turns
// (claimLock), takes them FOR UPDATE SKIP LOCKED (a row being recorded is
// passed over, not waited for) and leases them for Options.Lease:
// leased_until and leased_by on the row (migrations/0013_leases.sql). Recording the attempt
// ends the lease (RecordWebhookAttempt clears it, or deletes the row; a
// late record, made after the lease ran out and another holder took the
// row, only logs its line and leaves the new lease alone); a
// lease that ran out, its node dead mid-attempt, lets any node claim the
// row again. So an attempt is made once, and at least once across a crash:
// a node killed after the receiver answered but before the record commits
// leaves its delivery to be attempted again after the lease.
//
// Leases are timed by the database's clock (clock_timestamp()), one clock
// for every node, not by the caller's now, which says only what is due.
//
// A lease is held by a holder name drawn at Open, not by the node's name: a
// node restarted under the same name is a new holder, so the leases of the
// process that died are not taken for its own. A node registers its
// holder as its instance in the node registry (Holder), so the live nodes
// end the leases of a process whose beat stopped (EndDeadLeases) instead of
// waiting for them to run out.

// claimLock serialises the claims of webhook deliveries of every node
// ("simrelaw"): a claim counts the leases other nodes hold and leases up to
// the per-company bound less those, so two claims at once would each count
// without the other's and together pass the bound. A claim is a few
// statements; one per node per poll.
const claimLock int64 = 0x73696d72656c6177

// newHolder names this store's leases: random, so unique per process.
func newHolder() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24)
	return hex.EncodeToString(b[:])
}

// ClaimWebhookDeliveries is DueWebhookDeliveries for a node of a cluster:
// it returns up to limit deliveries due at now that no live lease holds,
// the longest due first, passing over those skip names, and leases the ones
// it returns to this store until their attempt is recorded or the lease runs
// out. Each one's CompanyLeased and EntryLeased count the company's and the
// entry's deliveries other holders lease, so the bounds hold across nodes:
// the claims of all nodes take turns (claimLock), so each counts the leases
// of those before it. Rows whose attempt is being recorded are passed over,
// not waited for. It also returns when to look again, as
// DueWebhookDeliveries does; a delivery another node leases is not in it
// (the caller looks again on a cluster's poll).
func (s *Store) ClaimWebhookDeliveries(now time.Time, limit int, skip store.DueSkip) ([]store.WebhookDue, time.Time, error) {
	var due []store.WebhookDue
	var next time.Time
	err := s.write("claim webhook deliveries", func(t *txn) error {
		due, next = nil, time.Time{}
		if _, err := t.exec("SELECT pg_advisory_xact_lock($1)", claimLock); err != nil {
			return err
		}
		leased, err := companyLeases(t, s.holder)
		if err != nil {
			return err
		}
		// The scan locks nothing: the rows skip passes over (a company at
		// its bound may have thousands due) are not written to; only the
		// ones taken are locked, by leaseDeliveries.
		var full bool
		due, full, err = scanDue(t, now, limit, true, func(d *store.WebhookDue) {
			d.CompanyLeased, d.EntryLeased = leased.company[d.CompanyID], leased.entry[d.WebhookID]
		}, skip)
		if err != nil {
			return err
		}
		if len(due) > 0 {
			if err := s.leaseDeliveries(t, &due); err != nil {
				return err
			}
		}
		if full {
			next = now
			return nil
		}
		next, err = nextAttempt(t, now)
		return err
	})
	if err != nil {
		return nil, time.Time{}, err
	}
	return due, next, nil
}

// otherLeases is the live leases of other holders: by company and by entry.
type otherLeases struct {
	company, entry map[uint64]int
}

// companyLeases counts each company's and each entry's deliveries under a
// live lease of a holder other than this one.
func companyLeases(t *txn, holder string) (otherLeases, error) {
	out := otherLeases{company: map[uint64]int{}, entry: map[uint64]int{}}
	rows, err := t.query(`SELECT company_id, webhook_id, count(*) FROM webhook_deliveries
		WHERE leased_by IS NOT NULL AND leased_by <> $1 AND leased_until > clock_timestamp()
		GROUP BY company_id, webhook_id`, holder)
	if err != nil {
		return out, err
	}
	defer rows.Close()
	for rows.Next() {
		var cid, wid, n int64
		if err := rows.Scan(&cid, &wid, &n); err != nil {
			return out, err
		}
		out.company[uint64(cid)] += int(n)
		out.entry[uint64(wid)] += int(n)
	}
	return out, rows.Err()
}

// leaseDeliveries leases the deliveries a claim took to this store, and
// drops from due those it could not: a row whose attempt another node is
// recording right now (its lease ran out meanwhile) is locked by that
// record, and passed over (SKIP LOCKED) rather than waited for; the lease
// condition is read again under the row's lock.
func (s *Store) leaseDeliveries(t *txn, due *[]store.WebhookDue) error {
	ids := make([]int64, len(*due))
	for i, d := range *due {
		ids[i] = id(d.ID)
	}
	rows, err := t.query(`UPDATE webhook_deliveries d
		SET leased_until = clock_timestamp() + $2 * interval '1 millisecond', leased_by = $3
		FROM (SELECT id FROM webhook_deliveries WHERE id = ANY($1)
			AND (leased_until IS NULL OR leased_until <= clock_timestamp()) FOR UPDATE SKIP LOCKED) c
		WHERE d.id = c.id RETURNING d.id`, ids, s.lease.Milliseconds(), s.holder)
	if err != nil {
		return err
	}
	leased, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil || len(leased) == len(ids) {
		return err
	}
	got := make(map[uint64]bool, len(leased))
	for _, l := range leased {
		got[uint64(l)] = true
	}
	kept := (*due)[:0]
	for _, d := range *due {
		if got[d.ID] {
			kept = append(kept, d)
		}
	}
	*due = kept
	return nil
}

// Holder is the name this store's leases carry. A node registers it as its
// instance (RegisterNode), which tells its leases from a dead process's.
func (s *Store) Holder() string { return s.holder }

// EndDeadLeases ends the leases on the webhook and e-mail outboxes held by
// no live node: their holder is not the instance of a node whose last beat
// is within live (it was killed, or stopped without handing them back, or
// a restart under its name replaced it). Never this store's own. It answers
// how many it ended; their deliveries and mails are then claimed as due.
// Called by a live node after each of its own beats.
func (s *Store) EndDeadLeases(live time.Duration) (int, error) {
	var n int
	err := s.write("end the leases of dead nodes", func(t *txn) error {
		n = 0
		for _, table := range []string{"webhook_deliveries", "mail_outbox"} {
			tag, err := t.exec(`UPDATE `+table+` SET leased_until = NULL, leased_by = NULL
				WHERE leased_by IS NOT NULL AND leased_by <> $1 AND leased_until > clock_timestamp()
				AND leased_by NOT IN (SELECT instance FROM cluster_nodes WHERE seen_at > now() - make_interval(secs => $2))`,
				s.holder, live.Seconds())
			if err != nil {
				return err
			}
			n += int(tag.RowsAffected())
		}
		return nil
	})
	return n, err
}
