package postgres

// A phone's registration: pairing codes, the device a code makes or
// replaces, and the reads of a company's live devices.

import (
	"errors"
	"time"

	"github.com/simrelay/simrelay/store"
)

// PutPairing stores a pairing code by its hash; it counts against the
// company's daily storage budget (a *BudgetError when spent), since codes
// are kept until a day after they expire.
func (s *Store) PutPairing(hash []byte, p store.Pairing, now time.Time) error {
	raw, err := rec(p)
	if err != nil {
		return err
	}
	return s.write("put pairing", func(t *txn) error {
		if err := companyOpen(t, p.CompanyID); err != nil {
			return err
		}
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
// it may run more than once. sum is the device's summary as the
// registration leaves it (a device registered again keeps its queue and its
// failures; a new one has neither), so that the answer needs no read after
// the commit.
func (s *Store) RegisterDevice(pairingHash []byte, now time.Time, fingerprint string, build func(p store.Pairing, old *store.Device) (store.Device, error)) (dev store.Device, replaced bool, sum store.DeviceSummary, err error) {
	err = s.write("register device "+fingerprint, func(t *txn) error {
		replaced, sum = false, store.DeviceSummary{}
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
		// A closing company registers no device: the phones its closing
		// unlinks are those of the devices it read after the mark. The
		// company's row KEY SHARE, after the device's, as the foreign
		// key's check takes it.
		if err := companyOpen(t, p.CompanyID); err != nil {
			return err
		}
		d, err := build(p, old)
		if err != nil {
			return err
		}
		d.Fingerprint, d.CompanyID = fingerprint, p.CompanyID
		if old != nil {
			// The registration keeps its id and the numbers it holds
			// (its row locked: no hello gives it one meanwhile).
			d.ID, d.NoNumbers = old.ID, old.NoNumbers
			if err := putDevice(t, d); err != nil {
				return err
			}
			sums := map[uint64]store.DeviceSummary{}
			if err := readSummaries(t, d.CompanyID, []int64{id(d.ID)}, sums); err != nil {
				return err
			}
			sum = sums[d.ID]
		} else {
			err := insertDevice(t, &d)
			if errors.Is(err, store.ErrConflict) {
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
		return store.Device{}, false, store.DeviceSummary{}, err
	}
	return dev, replaced, sum, nil
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
// another company's, or one of a company closing (MarkCompanyClosing), is
// ErrNotFound.
func (s *Store) CompanyDevice(companyID uint64, fingerprint string) (store.Device, error) {
	var d store.Device
	err := s.read("device "+fingerprint, func(t *txn) error {
		d = store.Device{}
		return getRec(t, &d, `SELECT d.rec FROM devices d JOIN companies c ON c.id = d.company_id
			WHERE d.company_id = $1 AND d.fingerprint = $2 AND d.deleted_at IS NULL AND NOT c.rec ? 'closing_at'`,
			id(companyID), fingerprint)
	})
	return d, err
}
