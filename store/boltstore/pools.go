package boltstore

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Sender pools (docs/routing.md): a company's named set of (device, SIM)
// members that a send may name instead of one device. The member is chosen
// inside the send's transaction, so what the choice reads (queues, turns,
// sticky entries) and what the send writes commit together.

var (
	bucketPools      = []byte("pools")       // company id + pool id -> Pool
	bucketPoolNames  = []byte("pool_names")  // company id + lower-case name -> pool id
	bucketPoolTurns  = []byte("pool_turns")  // company id + pool id -> round-robin turn
	bucketPoolSticky = []byte("pool_sticky") // company id + pool id + phone -> device id + written at (unix ns) + slot
	poolBuckets      = [][]byte{bucketPools, bucketPoolNames, bucketPoolTurns, bucketPoolSticky}
)

func poolNameKey(companyID uint64, name string) []byte {
	return append(itob(companyID), strings.ToLower(name)...)
}

// Pools returns the company's pools, oldest first.
func (s *Store) Pools(companyID uint64) ([]Pool, error) {
	var out []Pool
	err := s.view(func(tx *bolt.Tx) error {
		var err error
		walkPrefix(tx.Bucket(bucketPools), itob(companyID), func(_, v []byte) bool {
			var p Pool
			if err = jsonUnmarshal(v, &p); err != nil {
				return false
			}
			out = append(out, p)
			return true
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: pools of company %d: %w", companyID, err)
	}
	return out, nil
}

// leavePools takes the deleted device deviceID out of every pool of its
// company, in the deletion's transaction: a member never outlives its
// device, so a pool lists only phones that exist, and a phone registered
// again under the same fingerprint (a new device) joins no pool by itself.
func leavePools(tx *bolt.Tx, companyID, deviceID uint64, now time.Time) error {
	b := tx.Bucket(bucketPools)
	var changed []Pool
	var err error
	walkPrefix(b, itob(companyID), func(_, v []byte) bool {
		var p Pool
		if err = jsonUnmarshal(v, &p); err != nil {
			return false
		}
		kept := slices.DeleteFunc(slices.Clone(p.Members), func(m PoolMember) bool { return m.DeviceID == deviceID })
		if len(kept) != len(p.Members) {
			p.Members, p.UpdatedAt = kept, now.UTC()
			changed = append(changed, p)
		}
		return true
	})
	if err != nil {
		return err
	}
	for _, p := range changed {
		if err := putJSON(b, pair(companyID, p.ID), p); err != nil {
			return err
		}
	}
	return nil
}

// Pool returns one of the company's pools; another company's is ErrNotFound.
func (s *Store) Pool(companyID, id uint64) (Pool, error) {
	var p Pool
	err := s.view(func(tx *bolt.Tx) error { return getJSON(tx.Bucket(bucketPools), pair(companyID, id), &p) })
	if err != nil {
		return p, fmt.Errorf("store: pool %d: %w", id, err)
	}
	return p, nil
}

// PutPool creates (id 0) or changes the company's pool to what edit makes
// of the pool as it is (the zero Pool for a new one), in one transaction;
// edit's error is returned as it is. Members that name the same (device,
// SIM) as before keep their ids. A name another pool of the company has is
// ErrConflict; an unknown pool ErrNotFound; a member naming a device the
// company does not have, or a (device, SIM) twice, a *PoolMemberError.
func (s *Store) PutPool(companyID, id uint64, now time.Time, edit func(cur Pool) (PoolInput, error)) (Pool, error) {
	var out Pool
	err := s.update(func(tx *bolt.Tx) error {
		if err := companyOpen(tx, companyID); err != nil {
			return err
		}
		pools, names := tx.Bucket(bucketPools), tx.Bucket(bucketPoolNames)
		var p Pool
		if id == 0 {
			n := 0
			walkPrefix(pools, itob(companyID), func(_, _ []byte) bool { n++; return n < MaxPools })
			if n >= MaxPools {
				return ErrTooManyPools
			}
			seq, err := pools.NextSequence()
			if err != nil {
				return err
			}
			p = Pool{ID: seq, CompanyID: companyID, CreatedAt: now.UTC()}
		} else {
			if err := getJSON(pools, pair(companyID, id), &p); err != nil {
				return err
			}
			if err := names.Delete(poolNameKey(companyID, p.Name)); err != nil {
				return err
			}
		}
		in, err := edit(p)
		if err != nil {
			return err
		}
		if names.Get(poolNameKey(companyID, in.Name)) != nil {
			return ErrConflict
		}
		members, err := resolveMembers(tx, companyID, &p, in.Members)
		if err != nil {
			return err
		}
		if p.Strategy != in.Strategy || !slices.Equal(p.Members, members) {
			// Another order of members or strategy starts the turns afresh.
			if err := tx.Bucket(bucketPoolTurns).Delete(pair(companyID, p.ID)); err != nil {
				return err
			}
		}
		was := p
		p.Name, p.Strategy, p.Fallback, p.FailoverAfter, p.Window, p.Members = in.Name, in.Strategy, in.Fallback, in.FailoverAfter, in.Window, members
		if id == 0 || !p.SameDefinition(was) {
			p.UpdatedAt = now.UTC() // an edit that changes nothing leaves it
		}
		if err := names.Put(poolNameKey(companyID, p.Name), itob(p.ID)); err != nil {
			return err
		}
		out = p
		return putJSON(pools, pair(companyID, p.ID), p)
	})
	if err != nil {
		return out, fmt.Errorf("store: put pool: %w", err)
	}
	return out, nil
}

// resolveMembers turns the members a company names into p's members,
// keeping the ids of those p had and numbering the new ones.
func resolveMembers(tx *bolt.Tx, companyID uint64, p *Pool, in []PoolMemberInput) ([]PoolMember, error) {
	type ds struct {
		dev  uint64
		slot string
	}
	had := map[ds]uint64{}
	for _, m := range p.Members {
		had[ds{m.DeviceID, m.SIMSlot}] = m.ID
	}
	seen := map[ds]bool{}
	out := make([]PoolMember, 0, len(in))
	for i, m := range in {
		d, err := liveDevice(tx, companyID, m.Device)
		if err != nil {
			// A member the pool has stays though its device is gone (it is
			// passed over); a new one must name a live device.
			if _, ok := had[ds{m.DeviceID, m.SIMSlot}]; !ok || m.DeviceID == 0 || !errors.Is(err, ErrDeviceGone) {
				return nil, &PoolMemberError{Index: i, Err: err}
			}
			d = Device{ID: m.DeviceID, Fingerprint: m.Device}
		}
		k := ds{d.ID, m.SIMSlot}
		if seen[k] {
			return nil, &PoolMemberError{Index: i, Err: ErrConflict}
		}
		seen[k] = true
		id, ok := had[k]
		if !ok {
			p.MemberSeq++
			id = p.MemberSeq
		}
		out = append(out, PoolMember{ID: id, DeviceID: d.ID, Device: d.Fingerprint, SIMSlot: m.SIMSlot})
	}
	return out, nil
}

// DeletePool removes the company's pool with its turns and sticky entries.
// Messages sent through it keep their device and the pool's name.
func (s *Store) DeletePool(companyID, id uint64) (Pool, error) {
	var p Pool
	err := s.update(func(tx *bolt.Tx) error {
		if err := getJSON(tx.Bucket(bucketPools), pair(companyID, id), &p); err != nil {
			return err
		}
		if err := tx.Bucket(bucketPools).Delete(pair(companyID, id)); err != nil {
			return err
		}
		if err := tx.Bucket(bucketPoolNames).Delete(poolNameKey(companyID, p.Name)); err != nil {
			return err
		}
		if err := tx.Bucket(bucketPoolTurns).Delete(pair(companyID, id)); err != nil {
			return err
		}
		return deletePrefix(tx.Bucket(bucketPoolSticky), pair(companyID, id))
	})
	if err != nil {
		return p, fmt.Errorf("store: delete pool %d: %w", id, err)
	}
	return p, nil
}

// deletePrefix deletes every key of b under prefix.
func deletePrefix(b *bolt.Bucket, prefix []byte) error {
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Seek(prefix) {
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return nil
}
