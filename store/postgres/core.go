package postgres

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strings"
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

// emailKey is an address as users.email keys it: case and surrounding
// blanks do not make another address.
func emailKey(email string) string { return strings.ToLower(strings.TrimSpace(email)) }

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

// PutPairing stores a pairing code by its hash; it counts against the
// company's daily storage budget (a *BudgetError when spent), since codes
// are kept until a day after they expire.
func (s *Store) PutPairing(hash []byte, p store.Pairing, now time.Time) error {
	raw, err := rec(p)
	if err != nil {
		return err
	}
	return s.write("put pairing", func(t *txn) error {
		if err := s.charge(t, p.CompanyID, now, store.PairingCost); err != nil {
			return err
		}
		_, err := t.exec(`INSERT INTO pairings (hash, company_id, expires_at, rec) VALUES ($1, $2, $3, $4)
			ON CONFLICT (hash) DO UPDATE SET company_id = EXCLUDED.company_id, expires_at = EXCLUDED.expires_at, rec = EXCLUDED.rec`,
			hash, id(p.CompanyID), p.ExpiresAt, raw)
		return err
	})
}

// RegisterDevice spends a pairing code and stores the device with a new
// token, in one transaction. A fingerprint live in another company is
// ErrConflict. Registering again within the same company keeps the
// device's id and replaces its token; replaced reports that case. build
// fills the record from the pairing (and the old record when there is one);
// it may run more than once.
func (s *Store) RegisterDevice(pairingHash []byte, now time.Time, fingerprint string, build func(p store.Pairing, old *store.Device) (store.Device, error)) (dev store.Device, replaced bool, err error) {
	err = s.write("register device "+fingerprint, func(t *txn) error {
		replaced = false
		var p store.Pairing
		if err := getRec(t, &p, "SELECT rec FROM pairings WHERE hash = $1 FOR UPDATE", pairingHash); err != nil {
			return err
		}
		if !p.UsedAt.IsZero() {
			return store.ErrPairingUsed
		}
		if !now.Before(p.ExpiresAt) {
			return store.ErrTokenExpired
		}
		var old *store.Device
		var prev store.Device
		err := getRec(t, &prev, "SELECT rec FROM devices WHERE fingerprint = $1 AND deleted_at IS NULL FOR UPDATE", fingerprint)
		switch {
		case err == nil:
			if prev.CompanyID != p.CompanyID {
				return store.ErrConflict
			}
			old, replaced = &prev, true
		case !errors.Is(err, store.ErrNotFound):
			return err
		default:
			if _, err := s.planAllows(t, p.CompanyID, now, store.LimitDevices); err != nil {
				return err
			}
		}
		d, err := build(p, old)
		if err != nil {
			return err
		}
		d.Fingerprint, d.CompanyID = fingerprint, p.CompanyID
		if old != nil {
			d.ID = old.ID
			if err := putDevice(t, d); err != nil {
				return err
			}
		} else {
			if d.ID, err = nextID(t, "devices"); err != nil {
				return err
			}
			raw, err := rec(d)
			if err != nil {
				return err
			}
			_, err = t.exec("INSERT INTO devices (id, company_id, fingerprint, token_hash, rec) VALUES ($1, $2, $3, $4, $5)",
				id(d.ID), id(d.CompanyID), d.Fingerprint, d.TokenHash, raw)
			if errors.Is(mapErr(err), store.ErrConflict) {
				// Another registration of this handset committed since the
				// read: read again, and replace it or refuse.
				return errAgain
			}
			if err != nil {
				return err
			}
		}
		p.UsedAt = now
		raw, err := rec(p)
		if err != nil {
			return err
		}
		if _, err := t.exec("UPDATE pairings SET rec = $2 WHERE hash = $1", pairingHash, raw); err != nil {
			return err
		}
		dev = d
		return addActivity(t, d.CompanyID, store.Activity{Type: store.ActDevicePaired, At: now, Description: "Device " + store.ActivityName(store.DeviceLabel(d)) + " paired"})
	})
	if err != nil {
		return store.Device{}, false, err
	}
	return dev, replaced, nil
}

// putDevice writes a live device's record and token.
func putDevice(t *txn, d store.Device) error {
	raw, err := rec(d)
	if err != nil {
		return err
	}
	tag, err := t.exec("UPDATE devices SET token_hash = $2, rec = $3 WHERE id = $1 AND deleted_at IS NULL", id(d.ID), d.TokenHash, raw)
	if err == nil && tag.RowsAffected() == 0 {
		return store.ErrDeviceGone
	}
	return err
}

// liveDevice reads the company's live device with this fingerprint; none
// (deleted, never paired, or another company's) is store.ErrDeviceGone.
// lock takes its row lock, which guards the device's queue and counters.
func liveDevice(t *txn, companyID uint64, fingerprint string, lock bool) (store.Device, error) {
	var d store.Device
	q := "SELECT rec FROM devices WHERE company_id = $1 AND fingerprint = $2 AND deleted_at IS NULL"
	if lock {
		q += " FOR UPDATE"
	}
	err := getRec(t, &d, q, id(companyID), fingerprint)
	if errors.Is(err, store.ErrNotFound) {
		return d, store.ErrDeviceGone
	}
	return d, err
}

// liveDeviceByID reads the company's live device with this registration id,
// as liveDevice does.
func liveDeviceByID(t *txn, companyID, deviceID uint64, lock bool) (store.Device, error) {
	var d store.Device
	q := "SELECT rec FROM devices WHERE company_id = $1 AND id = $2 AND deleted_at IS NULL"
	if lock {
		q += " FOR UPDATE"
	}
	err := getRec(t, &d, q, id(companyID), id(deviceID))
	if errors.Is(err, store.ErrNotFound) {
		return d, store.ErrDeviceGone
	}
	return d, err
}

// CompanyDevice returns the company's live device with this fingerprint;
// another company's is ErrNotFound.
func (s *Store) CompanyDevice(companyID uint64, fingerprint string) (store.Device, error) {
	var d store.Device
	err := s.read("device "+fingerprint, func(t *txn) error {
		var err error
		d, err = liveDevice(t, companyID, fingerprint, false)
		if errors.Is(err, store.ErrDeviceGone) {
			return store.ErrNotFound
		}
		return err
	})
	return d, err
}

// takePlace gives a job the next place in its device's queue, under the
// device row's lock (held until the transaction ends): the places of one
// device rise in commit order, so a link that read up to a place never
// misses a job that commits after its read. See messages.queue_place.
// Places come from one sequence (queue_places), drawn once the lock is
// held, so none is shared and MessageSequence is above every place handed
// out, on every device.
func takePlace(t *txn, deviceID uint64) (uint64, error) {
	var n int64
	err := t.row("UPDATE devices SET next_place = nextval('queue_places') WHERE id = $1 AND deleted_at IS NULL RETURNING next_place", id(deviceID)).Scan(&n)
	if errors.Is(mapErr(err), store.ErrNotFound) {
		return 0, store.ErrDeviceGone
	}
	return uint64(n), err
}

// charge adds cost to the company's bytes of now's day, or refuses with a
// *store.BudgetError when that would go over the daily budget, having
// written nothing. The check reads the day's shards without locking them,
// so writes of one company that run at the same moment may each pass it:
// the budget (a guard of the disk, not a price) can be overshot by what is
// in flight at once, at most one write per connection of the pool.
func (s *Store) charge(t *txn, companyID uint64, now time.Time, cost int64) error {
	return s.addUsage(t, companyID, now, cost, true)
}

// chargeAfter counts what follows a write the budget already admitted (an
// inbound message's webhook event) without refusing it.
func (s *Store) chargeAfter(t *txn, companyID uint64, now time.Time, cost int64) error {
	return s.addUsage(t, companyID, now, cost, false)
}

func (s *Store) addUsage(t *txn, companyID uint64, now time.Time, cost int64, mayRefuse bool) error {
	var used int64
	if mayRefuse && s.dailyBudget > 0 {
		if err := t.row("SELECT coalesce(sum(used), 0) FROM storage_usage WHERE company_id = $1 AND day = $2", id(companyID), day(now)).Scan(&used); err != nil {
			return err
		}
	}
	return s.addUsed(t, companyID, now, cost, used, mayRefuse)
}

// addUsed is addUsage for a caller that read the day's use (used) itself,
// earlier in the transaction.
func (s *Store) addUsed(t *txn, companyID uint64, now time.Time, cost, used int64, mayRefuse bool) error {
	if mayRefuse {
		if err := s.overBudget(companyID, now, cost, used); err != nil {
			return err
		}
	}
	_, err := t.exec(storageAddSQL, storageAddArgs(companyID, now, cost)...)
	return err
}

// overBudget refuses with a *store.BudgetError when adding cost to the
// day's use (used) would go over the daily budget.
func (s *Store) overBudget(companyID uint64, now time.Time, cost, used int64) error {
	if s.dailyBudget > 0 && used+cost > s.dailyBudget {
		return &store.BudgetError{CompanyID: companyID, Limit: s.dailyBudget, Used: used, Cost: cost, Reset: store.NextDay(now)}
	}
	return nil
}

// storageAddSQL adds bytes to a company's use of a day, in a random shard
// (storageAddArgs).
const storageAddSQL = `INSERT INTO storage_usage (company_id, day, shard, used) VALUES ($1, $2, $3, $4)
	ON CONFLICT (company_id, day, shard) DO UPDATE SET used = storage_usage.used + EXCLUDED.used`

func storageAddArgs(companyID uint64, now time.Time, cost int64) []any {
	return []any{id(companyID), day(now), shard(), cost}
}

// limits are the company's plan limits at now.
func (s *Store) limits(t *txn, companyID uint64, now time.Time) (store.PlanLimits, error) {
	if s.plans == nil {
		return s.limitsOf(nil, now)
	}
	var raw []byte
	err := t.row("SELECT rec FROM subscriptions WHERE company_id = $1", id(companyID)).Scan(&raw)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return store.PlanLimits{}, err
	}
	return s.limitsOf(raw, now)
}

// limitsOf are the plan limits at now of the company whose subscription's
// record is sub (nil: it has none).
func (s *Store) limitsOf(sub []byte, now time.Time) (store.PlanLimits, error) {
	if s.plans == nil {
		from, to := store.CalendarMonth(now)
		return store.PlanLimits{Messages: -1, Devices: -1, PeriodStart: from, PeriodEnd: to}, nil
	}
	var rec store.Subscription
	if sub != nil {
		if err := json.Unmarshal(sub, &rec); err != nil {
			return store.PlanLimits{}, err
		}
	}
	return s.plans.Limits(rec, sub != nil, now), nil
}

// usageSlot is a send's place in its company's plan usage: what the period
// has used, its limit (-1: none), and whether the count is exact (shard 0
// locked).
type usageSlot struct {
	companyID uint64
	limits    store.PlanLimits
	used      int64
}

// room refuses with a *store.PlanLimitError when n more messages would go
// over the plan.
func (u usageSlot) room(n int64) error {
	if l := u.limits; l.Messages >= 0 && u.used+n > l.Messages {
		return &store.PlanLimitError{What: store.LimitMessages, Limit: l.Messages, PeriodEnd: l.PeriodEnd}
	}
	return nil
}

// add counts n messages queued in the slot's period.
func (u usageSlot) add(t *txn, n int64) error {
	sh := shard()
	if u.limits.Messages >= 0 {
		sh = 0 // the row planAllows locked
	}
	_, err := t.exec(planAddSQL, id(u.companyID), u.limits.PeriodStart, sh, n)
	return err
}

// planAddSQL adds n messages to a shard of a company's plan usage of a
// period (company, period start, shard, n).
const planAddSQL = `INSERT INTO plan_usage (company_id, period_start, shard, used) VALUES ($1, $2, $3, $4)
	ON CONFLICT (company_id, period_start, shard) DO UPDATE SET used = plan_usage.used + EXCLUDED.used`

// queueAllowAdd queues planAllowsUnder and add for n messages as one
// statement, for a send that writes in one round trip: an uncapped plan
// adds to a random shard; a capped one adds to shard 0, which locks it
// (the row lockPlanUsage locks, making it for the period's first send),
// and returns the period's use, shard 0 as it stands once locked, the
// other shards as the statement's snapshot has them, as lockPlanUsage
// reads it. Going over the plan is the batch's error, a
// *store.PlanLimitError: the transaction then rolls back what it added.
func (u usageSlot) queueAllowAdd(b *pgx.Batch, n int64) {
	if u.limits.Messages < 0 {
		b.Queue(planAddSQL, id(u.companyID), u.limits.PeriodStart, shard(), n)
		return
	}
	b.Queue(planAddSQL+` RETURNING plan_usage.used + (SELECT coalesce(sum(o.used), 0) FROM plan_usage o
		WHERE o.company_id = $1 AND o.period_start = $2 AND o.shard <> 0)`,
		id(u.companyID), u.limits.PeriodStart, 0, n).QueryRow(func(row pgx.Row) error {
		var total int64
		if err := row.Scan(&total); err != nil {
			return err
		}
		u.used = total - n
		return u.room(n)
	})
}

// planAllows refuses with a *store.PlanLimitError, having written nothing,
// when one more message (what = store.LimitMessages) or device
// (store.LimitDevices) would go over the company's plan. For messages it
// returns the slot to add to once the message is stored; a company whose
// plan caps its messages has its usage row locked until the transaction
// ends, so concurrent sends count exactly (an uncapped company's sends
// lock nothing). For devices it takes the company's row lock and counts.
func (s *Store) planAllows(t *txn, companyID uint64, now time.Time, what string) (usageSlot, error) {
	l, err := s.limits(t, companyID, now)
	if err != nil {
		return usageSlot{}, err
	}
	return planAllowsUnder(t, companyID, l, what)
}

// planAllowsUnder is planAllows for a caller that read the limits itself.
func planAllowsUnder(t *txn, companyID uint64, l store.PlanLimits, what string) (usageSlot, error) {
	u := usageSlot{companyID: companyID, limits: l}
	if what == store.LimitDevices {
		if l.Devices < 0 {
			return u, nil
		}
		if err := lockCompany(t, companyID); err != nil {
			return u, err
		}
		var n int64
		if err := t.row("SELECT count(*) FROM devices WHERE company_id = $1 AND deleted_at IS NULL", id(companyID)).Scan(&n); err != nil {
			return u, err
		}
		if n >= l.Devices {
			return u, &store.PlanLimitError{What: what, Limit: l.Devices}
		}
		return u, nil
	}
	if l.Messages < 0 {
		return u, nil
	}
	var err error
	if u.used, err = lockPlanUsage(t, companyID, l.PeriodStart); err != nil {
		return u, err
	}
	return u, u.room(1)
}

// lockPlanUsage takes the lock of the company's shard 0 of the period's
// plan usage (making the row for the period's first send) and reads the
// period's use, in one statement: shard 0 as it stands once locked, the
// other shards as the statement's snapshot has them. While the plan caps
// messages every send adds to shard 0 alone (usageSlot.add), so the other
// shards hold only what was sent before the cap, and the sum is exact.
func lockPlanUsage(t *txn, companyID uint64, period time.Time) (int64, error) {
	for range 2 {
		var used int64
		err := t.row(`SELECT u.used + (SELECT coalesce(sum(o.used), 0) FROM plan_usage o
				WHERE o.company_id = $1 AND o.period_start = $2 AND o.shard <> 0)
			FROM plan_usage u WHERE u.company_id = $1 AND u.period_start = $2 AND u.shard = 0 FOR UPDATE OF u`,
			id(companyID), period).Scan(&used)
		if !errors.Is(err, pgx.ErrNoRows) {
			return used, err
		}
		// The period's first send: make shard 0 (or wait for the send
		// making it), then lock it.
		if _, err := t.exec(`INSERT INTO plan_usage (company_id, period_start, shard, used) VALUES ($1, $2, 0, 0)
			ON CONFLICT DO NOTHING`, id(companyID), period); err != nil {
			return 0, err
		}
	}
	return 0, errors.New("store: plan usage: shard 0 made but not found")
}

// addActivity adds an event to the company's feed and drops what falls
// out of its newest store.ActivityKeep.
func addActivity(t *txn, companyID uint64, a store.Activity) error {
	a.At = a.At.UTC()
	raw, err := rec(a)
	if err != nil {
		return err
	}
	var seq int64
	if err := t.row("INSERT INTO activity (company_id, rec) VALUES ($1, $2) RETURNING seq", id(companyID), raw).Scan(&seq); err != nil {
		return err
	}
	_, err = t.exec(`DELETE FROM activity WHERE company_id = $1 AND seq < (
		SELECT min(seq) FROM (SELECT seq FROM activity WHERE company_id = $1 ORDER BY seq DESC LIMIT $2) newest)`,
		id(companyID), store.ActivityKeep)
	return err
}

// count adds c to the message's counters of at's day (its company, channel,
// device registration and user; store/boltstore/stats.go says what counts
// when), in one of the row's shards.
func count(t *txn, m store.Message, at time.Time, c store.Counts) error {
	if c.IsZero() {
		return nil
	}
	_, err := t.exec(`INSERT INTO stats_days AS s (company_id, day, channel, device_id, user_id, shard, sent, delivered, failed, received, expired, segments)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
		ON CONFLICT (company_id, day, channel, device_id, user_id, shard) DO UPDATE SET
			sent = s.sent + EXCLUDED.sent, delivered = s.delivered + EXCLUDED.delivered, failed = s.failed + EXCLUDED.failed,
			received = s.received + EXCLUDED.received, expired = s.expired + EXCLUDED.expired, segments = s.segments + EXCLUDED.segments`,
		id(m.CompanyID), day(at), int16(store.ChannelByte(m.Channel)), id(m.DeviceID), id(store.MessageUser(m)), shard(),
		int64(c.Sent), int64(c.Delivered), int64(c.Failed), int64(c.Received), int64(c.Expired), int64(c.Segments))
	return err
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
