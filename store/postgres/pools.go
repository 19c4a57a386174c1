package postgres

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simrelay/simrelay/store"
)

// Sender pools (docs/routing.md): a company's named set of (device, SIM)
// members that a send may name instead of one device. A pool is a row of
// pools with its record; its round-robin turn is a row of
// pool_member_turns per member (the turn at which it was last taken:
// poolpick.go) and its sticky entries rows of pool_sticky, all dropped
// with the pool. The
// company's row lock guards how many pools it has; the unique (company,
// lower-case name) its names; a pool's row lock its edits (FOR NO KEY
// UPDATE, which lets a send's foreign key to the pool pass). A write of a
// pool holds its members' devices (FOR SHARE) until its commit, so a
// device deleted at the same time is either refused as a member or taken
// out of the pool by its deletion: no member outlives its device.

// Pools returns the company's pools, oldest first.
func (s *Store) Pools(companyID uint64) ([]store.Pool, error) {
	var out []store.Pool
	err := s.read(fmt.Sprintf("pools of company %d", companyID), func(t *txn) error {
		var err error
		out, err = getRecs[store.Pool](t, "SELECT rec FROM pools WHERE company_id = $1 ORDER BY id", id(companyID))
		return err
	})
	return out, err
}

// AllPools returns every company's pools (the failover sweep's list;
// bounded by store.MaxPools per company).
func (s *Store) AllPools() ([]store.Pool, error) {
	var out []store.Pool
	err := s.read("all pools", func(t *txn) error {
		var err error
		out, err = getRecs[store.Pool](t, "SELECT rec FROM pools ORDER BY id")
		return err
	})
	return out, err
}

// Pool returns one of the company's pools; another company's is ErrNotFound.
func (s *Store) Pool(companyID, poolID uint64) (store.Pool, error) {
	var p store.Pool
	err := s.read(fmt.Sprintf("pool %d", poolID), func(t *txn) error {
		return getRec(t, &p, "SELECT rec FROM pools WHERE company_id = $1 AND id = $2", id(companyID), id(poolID))
	})
	return p, err
}

// poolNameKey is a pool's name as pools.name_key keys it.
func poolNameKey(name string) string { return strings.ToLower(name) }

// PutPool creates (id 0) or changes the company's pool to what edit makes
// of the pool as it is (the zero Pool for a new one), in one transaction;
// edit's error is returned as it is, and edit may run more than once.
// Members that name the same (device, SIM) as before keep their ids. A name
// another pool of the company has is ErrConflict; an unknown pool
// ErrNotFound; more than store.MaxPools store.ErrTooManyPools; a member
// naming a device the company does not have, or a (device, SIM) twice, a
// *store.PoolMemberError.
func (s *Store) PutPool(companyID, poolID uint64, now time.Time, edit func(cur store.Pool) (store.PoolInput, error)) (store.Pool, error) {
	var out store.Pool
	err := s.write("put pool", func(t *txn) error {
		var p store.Pool
		if poolID == 0 {
			// Counted again under the company's lock below; refused here
			// before edit, as the count is the first answer.
			if err := roomForPool(t, companyID); err != nil {
				return err
			}
			pid, err := nextID(t, "pools")
			if err != nil {
				return err
			}
			p = store.Pool{ID: pid, CompanyID: companyID, CreatedAt: now.UTC()}
		} else if err := getRec(t, &p, "SELECT rec FROM pools WHERE company_id = $1 AND id = $2 FOR NO KEY UPDATE", id(companyID), id(poolID)); err != nil {
			return err
		}
		in, err := edit(p)
		if err != nil {
			return err
		}
		var taken bool
		if err := t.row("SELECT EXISTS (SELECT 1 FROM pools WHERE company_id = $1 AND name_key = $2 AND id <> $3)",
			id(companyID), poolNameKey(in.Name), id(p.ID)).Scan(&taken); err != nil {
			return err
		}
		if taken {
			return store.ErrConflict
		}
		members, live, err := resolveMembers(t, companyID, &p, in.Members)
		if err != nil {
			return err
		}
		if poolID != 0 && (p.Strategy != in.Strategy || !slices.Equal(p.Members, members)) {
			// Another order of members or strategy starts the turns afresh.
			if _, err := t.exec("DELETE FROM pool_member_turns WHERE pool_id = $1", id(p.ID)); err != nil {
				return err
			}
		}
		// The members' devices are held until the commit (after the pool's
		// turn, as sends and failovers take turns, then devices): a
		// deletion of one waits for it, then takes the device out of this
		// pool as of any other. One deleted since resolveMembers read it
		// live makes the edit read them again, and refuse it.
		if err := holdMemberDevices(t, companyID, live); err != nil {
			return err
		}
		if poolID == 0 {
			// A device's lock comes before its company's, as a deletion
			// and a registration take them.
			if err := lockCompany(t, companyID); err != nil {
				return err
			}
			// A closing company takes no new pool, as bbolt refuses it.
			if err := companyOpen(t, companyID); err != nil {
				return err
			}
			if err := roomForPool(t, companyID); err != nil {
				return err
			}
		}
		was := p
		p.Name, p.Strategy, p.Fallback, p.FailoverAfter, p.Window, p.Members = in.Name, in.Strategy, in.Fallback, in.FailoverAfter, in.Window, members
		if poolID == 0 || !p.SameDefinition(was) {
			p.UpdatedAt = now.UTC() // an edit that changes nothing leaves it
		}
		raw, err := rec(p)
		if err != nil {
			return err
		}
		// A name taken by a pool committed since the check above breaks
		// the unique constraint: ErrConflict too.
		if poolID == 0 {
			_, err = t.exec("INSERT INTO pools (id, company_id, name_key, rec) VALUES ($1, $2, $3, $4)", id(p.ID), id(companyID), poolNameKey(p.Name), raw)
		} else {
			_, err = t.exec("UPDATE pools SET name_key = $2, rec = $3 WHERE id = $1", id(p.ID), poolNameKey(p.Name), raw)
		}
		if err == nil {
			err = memberTurnRows(t, p)
		}
		out = p
		return err
	})
	return out, err
}

// memberTurnRows gives each member of p its row of pool_member_turns (a
// new one not yet taken) and drops the rows of members p no longer has: a
// send through the pool chooses among the rows it can lock.
func memberTurnRows(t *txn, p store.Pool) error {
	ids := make([]int64, len(p.Members))
	for i, m := range p.Members {
		ids[i] = id(m.ID)
	}
	b := &pgx.Batch{}
	b.Queue("DELETE FROM pool_member_turns WHERE pool_id = $1 AND NOT member_id = ANY($2)", id(p.ID), ids)
	b.Queue(`INSERT INTO pool_member_turns (pool_id, member_id) SELECT $1, unnest($2::bigint[])
		ON CONFLICT DO NOTHING`, id(p.ID), ids)
	return t.sendBatch(b)
}

// roomForPool refuses with ErrTooManyPools a new pool of a company that
// has store.MaxPools.
func roomForPool(t *txn, companyID uint64) error {
	var n int
	if err := t.row("SELECT count(*) FROM pools WHERE company_id = $1", id(companyID)).Scan(&n); err != nil {
		return err
	}
	if n >= store.MaxPools {
		return store.ErrTooManyPools
	}
	return nil
}

// holdMemberDevices takes a share lock on each of the devices (ids, found
// live), in id order, until the transaction ends; one deleted meanwhile is
// errAgain.
func holdMemberDevices(t *txn, companyID uint64, devices []int64) error {
	if len(devices) == 0 {
		return nil
	}
	var held int
	if err := t.row(`SELECT count(*) FROM (SELECT id FROM devices WHERE company_id = $1 AND id = ANY($2)
		AND deleted_at IS NULL ORDER BY id FOR SHARE) d`, id(companyID), devices).Scan(&held); err != nil {
		return err
	}
	if held != len(devices) {
		return errAgain
	}
	return nil
}

// resolveMembers turns the members a company names into p's members,
// keeping the ids of those p had and numbering the new ones, and lists the
// devices it found live (each once) for holdMemberDevices.
func resolveMembers(t *txn, companyID uint64, p *store.Pool, in []store.PoolMemberInput) ([]store.PoolMember, []int64, error) {
	type ds struct {
		dev  uint64
		slot string
	}
	had := map[ds]uint64{}
	for _, m := range p.Members {
		had[ds{m.DeviceID, m.SIMSlot}] = m.ID
	}
	fps := make([]string, 0, len(in))
	for _, m := range in {
		fps = append(fps, m.Device)
	}
	live := map[string]uint64{}
	rows, err := t.query("SELECT fingerprint, id FROM devices WHERE company_id = $1 AND fingerprint = ANY($2) AND deleted_at IS NULL", id(companyID), fps)
	if err != nil {
		return nil, nil, err
	}
	for rows.Next() {
		var fp string
		var dev int64
		if err := rows.Scan(&fp, &dev); err != nil {
			rows.Close()
			return nil, nil, err
		}
		live[fp] = uint64(dev)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	seen := map[ds]bool{}
	held := map[uint64]bool{}
	var devices []int64
	out := make([]store.PoolMember, 0, len(in))
	for i, m := range in {
		dev, ok := live[m.Device]
		if !ok {
			// A member the pool has stays though its device is gone (it is
			// passed over); a new one must name a live device.
			if _, had := had[ds{m.DeviceID, m.SIMSlot}]; !had || m.DeviceID == 0 {
				return nil, nil, &store.PoolMemberError{Index: i, Err: store.ErrDeviceGone}
			}
			dev = m.DeviceID
		} else if !held[dev] {
			held[dev] = true
			devices = append(devices, id(dev))
		}
		k := ds{dev, m.SIMSlot}
		if seen[k] {
			return nil, nil, &store.PoolMemberError{Index: i, Err: store.ErrConflict}
		}
		seen[k] = true
		mid, ok := had[k]
		if !ok {
			p.MemberSeq++
			mid = p.MemberSeq
		}
		out = append(out, store.PoolMember{ID: mid, DeviceID: dev, Device: m.Device, SIMSlot: m.SIMSlot})
	}
	return out, devices, nil
}

// DeletePool removes the company's pool with its turn and sticky entries.
// Messages sent through it keep their device and the pool's name.
//
// A pool keeps a sticky entry for each recipient it sent to within
// store.StickyAge (millions for a campaign's pool), more than one
// transaction deletes within the store's deadline: they are deleted first,
// a batch of Store.pruneBatch a transaction, while the pool is live (a
// send through it meanwhile picks its member afresh), and the last
// transaction deletes the pool with what is left. Another company's pool
// is ErrNotFound, nothing of it deleted.
//
// The batches end at one that found fewer entries than it may delete, not
// at one that deleted none: sends through the pool write entries while
// the batches run, and under steady traffic some were there at every
// batch, so the deletion never ended. What the sends wrote since the last
// batch (and an entry a send renewed under it, which the batch skips, as
// deleteSome says) is few, and goes with the pool.
func (s *Store) DeletePool(companyID, poolID uint64) (store.Pool, error) {
	name := fmt.Sprintf("delete pool %d", poolID)
	for {
		found := 0
		err := s.write(name, func(t *txn) error {
			return t.row(`WITH c AS MATERIALIZED (SELECT ctid FROM pool_sticky
					WHERE pool_id = (SELECT id FROM pools WHERE company_id = $2 AND id = $3) LIMIT $1),
				d AS (DELETE FROM pool_sticky WHERE ctid = ANY (ARRAY (SELECT ctid FROM c)) RETURNING 1)
				SELECT (SELECT count(*) FROM c), (SELECT count(*) FROM d)`,
				s.pruneBatch, id(companyID), id(poolID)).Scan(&found, new(int))
		})
		if err != nil {
			return store.Pool{}, err
		}
		if found < s.pruneBatch {
			break
		}
	}
	var p store.Pool
	err := s.write(name, func(t *txn) error {
		return getRec(t, &p, "DELETE FROM pools WHERE company_id = $1 AND id = $2 RETURNING rec", id(companyID), id(poolID))
	})
	return p, err
}

// leavePools takes the deleted device deviceID out of every pool of its
// company, in the deletion's transaction: a member never outlives its
// device, so a pool lists only phones that exist, and a phone registered
// again under the same fingerprint (a new device) joins no pool by itself.
func leavePools(t *txn, companyID, deviceID uint64, now time.Time) error {
	pools, err := getRecs[store.Pool](t, `SELECT rec FROM pools WHERE company_id = $1
		AND rec->'members' @> jsonb_build_array(jsonb_build_object('device_id', $2::bigint)) ORDER BY id FOR NO KEY UPDATE`,
		id(companyID), id(deviceID))
	if err != nil {
		return err
	}
	for _, p := range pools {
		p.Members = slices.DeleteFunc(p.Members, func(m store.PoolMember) bool { return m.DeviceID == deviceID })
		p.UpdatedAt = now.UTC()
		raw, err := rec(p)
		if err != nil {
			return err
		}
		if _, err := t.exec("UPDATE pools SET rec = $2 WHERE id = $1", id(p.ID), raw); err != nil {
			return err
		}
	}
	return nil
}

// PruneSticky removes the sticky entries of every pool written before
// cutoff (now less store.StickyAge in service), so they hold at most the
// recipients a pool sent to within StickyAge.
func (s *Store) PruneSticky(cutoff time.Time) (int, error) {
	return s.pruneBatches("prune sticky entries", func(t *txn, limit int) (int, error) {
		return deleteSome(t, "pool_sticky", "written_at < $2", limit, cutoff)
	})
}
