package boltstore

// Where a transaction's sends go: the device they name, or the member their
// pool picks, counted against the SIMs' caps.

import (
	"errors"
	"time"

	bolt "go.etcd.io/bbolt"
)

// router places the sends of one transaction: through the device they
// name, or through the pool they name, and counts them against their
// SIMs' caps.
type router struct {
	tally simTally     // a value of the router's: one allocation with it
	pool  *poolPicker  // nil for a device send
	dev   vettedDevice // the device of a device send
}

// route vets where a send goes inside its transaction: the device m names,
// or, when m names a pool, the member the pool picks, whose device, SIM and
// pool id it then sets on m. Call r.next for each further message of the
// same request, and r.commit with the writes.
func route(tx *bolt.Tx, devs *deviceCache, m *Message, check DeviceCheck, now time.Time) (vettedDevice, *router, error) {
	r := &router{tally: simTally{tx: tx, now: now}}
	if m.Pool == "" {
		d, err := sendingDevice(tx, devs, m.CompanyID, m.Device, m.SIMSlot, check)
		if err != nil || d.refused != nil {
			return d, r, err
		}
		r.dev = d
		d, err = r.next(m)
		return d, r, err
	}
	pp, err := openPool(tx, m.CompanyID, m.Pool, check, &r.tally)
	if errors.Is(err, ErrPoolGone) {
		return vettedDevice{refused: err}, r, nil
	}
	if err != nil {
		return vettedDevice{}, nil, err
	}
	r.pool = pp
	d, err := r.next(m)
	return d, r, err
}

// next places one more message of the request.
func (r *router) next(m *Message) (vettedDevice, error) {
	if r.pool != nil {
		return r.pool.pickFor(m)
	}
	capped, err := r.tally.allows(m.CompanyID, r.dev.ID, m.SIMSlot, m.Phone)
	if err != nil || capped != nil {
		return vettedDevice{refused: capped}, err
	}
	return r.dev, r.tally.take(m.CompanyID, r.dev.ID, m.SIMSlot, m.Phone)
}

// commit writes what the placing changed: the counts, and a pool's turn
// and sticky entries.
func (r *router) commit() error {
	if r.pool != nil {
		return r.pool.commit()
	}
	return r.tally.flush()
}

// pickFor picks the member for m and sets it on m.
func (pp *poolPicker) pickFor(m *Message) (vettedDevice, error) {
	mem, d, err := pp.pick(m.Phone)
	if err != nil {
		var pu *PoolUnavailableError
		var pc *PoolCappedError
		if errors.As(err, &pu) || errors.As(err, &pc) {
			return vettedDevice{refused: err}, nil
		}
		return vettedDevice{}, err
	}
	if err := m.SetPoolMember(pp.pool, d.Fingerprint, mem.SIMSlot, pp.tally.now); err != nil {
		return vettedDevice{refused: err}, nil // nothing written: the picks are the commit's
	}
	return vettedDevice{Device: *d}, nil
}
