package boltstore

import (
	"errors"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// CreateCompany stores a new company with its first admin, giving both their
// IDs. The admin's e-mail must be unused (ErrConflict) and c must carry its API key.
func (s *Store) CreateCompany(c *Company, admin *User) error {
	err := s.update(func(tx *bolt.Tx) error {
		companies := tx.Bucket(bucketCompanies)
		id, err := companies.NextSequence()
		if err != nil {
			return err
		}
		c.ID = id
		admin.CompanyID = id
		admin.Role = RoleAdmin
		if err := insertUser(tx, admin); err != nil {
			return err
		}
		if err := tx.Bucket(bucketAPIKeys).Put(c.APIKeyHash, itob(id)); err != nil {
			return err
		}
		return putJSON(companies, itob(id), c)
	})
	if err != nil {
		return fmt.Errorf("store: create company: %w", err)
	}
	return nil
}

// Company returns one company.
func (s *Store) Company(id uint64) (Company, error) {
	var c Company
	err := s.view(func(tx *bolt.Tx) error {
		return getJSON(tx.Bucket(bucketCompanies), itob(id), &c)
	})
	if err != nil {
		return c, fmt.Errorf("store: company %d: %w", id, err)
	}
	return c, nil
}

// DeviceCompany returns the company of one of its live devices, for what
// the device's link does on its behalf (an inbound message, the numbers of
// a hello, read in the company's region). It is ErrDeviceGone, and only
// then, when the device is not a live registration of the company
// (deleted, or an id of another company), or the company is not stored (its
// removal took its record) or is closing (MarkCompanyClosing): the phone is
// told what a deleted device's is. Any other error is the store's fault,
// never a removal; in particular a missing company is not ErrNotFound here.
func (s *Store) DeviceCompany(companyID, deviceID uint64) (Company, error) {
	var c Company
	err := s.view(func(tx *bolt.Tx) error {
		c = Company{}
		if !deviceLive(tx, companyID, deviceID) {
			return ErrDeviceGone
		}
		v := tx.Bucket(bucketCompanies).Get(itob(companyID))
		if v == nil {
			return ErrDeviceGone
		}
		if err := jsonUnmarshal(v, &c); err != nil {
			return err
		}
		if !c.ClosingAt.IsZero() {
			c = Company{}
			return ErrDeviceGone
		}
		return nil
	})
	if err != nil {
		return c, fmt.Errorf("store: company %d of device %d: %w", companyID, deviceID, err)
	}
	return c, nil
}

// CompanyByAPIKeyHash returns the company whose current API key has this
// hash. A company closing (MarkCompanyClosing) is ErrNotFound: its key is
// refused from the mark on, though the removal's first step has not taken
// it yet (or failed, and is tried again later).
func (s *Store) CompanyByAPIKeyHash(hash []byte) (Company, error) {
	var c Company
	err := s.view(func(tx *bolt.Tx) error {
		id := tx.Bucket(bucketAPIKeys).Get(hash)
		if id == nil {
			return ErrNotFound
		}
		if err := getJSON(tx.Bucket(bucketCompanies), id, &c); err != nil {
			return err
		}
		if !c.ClosingAt.IsZero() {
			c = Company{}
			return ErrNotFound
		}
		return nil
	})
	if err != nil {
		return c, fmt.Errorf("store: company by api key: %w", err)
	}
	return c, nil
}

// UpdateCompany applies fn to a company and stores the result. fn runs inside
// the write transaction: it must only change the record. A changed API key hash
// moves the key index with it, so the old key stops working in the same commit.
// An e-mail device that fn changes to one the company has no live device of
// is ErrEmailDeviceGone, and nothing is written. A company closing
// (MarkCompanyClosing) is ErrNotFound, as one removed: a key rotated by a
// request that checked its credential before the removal took the
// company's would work until the removal's next step.
func (s *Store) UpdateCompany(id uint64, fn func(*Company) error) (Company, error) {
	var c Company
	err := s.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketCompanies)
		if err := getJSON(b, itob(id), &c); err != nil {
			return err
		}
		if !c.ClosingAt.IsZero() {
			return fmt.Errorf("company %d is closing: %w", id, ErrNotFound)
		}
		oldHash, oldEmailDevice := append([]byte(nil), c.APIKeyHash...), c.EmailDevice
		if err := fn(&c); err != nil {
			return err
		}
		c.ID = id
		if c.EmailDevice != "" && c.EmailDevice != oldEmailDevice {
			if _, err := liveDevice(tx, id, c.EmailDevice); errors.Is(err, ErrDeviceGone) {
				return ErrEmailDeviceGone
			} else if err != nil {
				return err
			}
		}
		if string(oldHash) != string(c.APIKeyHash) {
			keys := tx.Bucket(bucketAPIKeys)
			if err := keys.Delete(oldHash); err != nil {
				return err
			}
			if err := keys.Put(c.APIKeyHash, itob(id)); err != nil {
				return err
			}
			if len(oldHash) > 0 {
				if err := addActivity(tx, id, Activity{Type: ActAPIKeyRotated, At: c.APIKeyCreatedAt, Description: "The API key was rotated; the previous key no longer works"}); err != nil {
					return err
				}
				// The codes the old key made end with it.
				if err := dropPairings(tx, func(p Pairing) bool { return p.CompanyID == id && p.ViaAPIKey }); err != nil {
					return err
				}
			}
		}
		return putJSON(b, itob(id), &c)
	})
	if err != nil {
		return c, fmt.Errorf("store: update company %d: %w", id, err)
	}
	return c, nil
}

// GoneCompanies answers, of the companies given, those not stored (their
// removal ended), in ascending order. A company closing is stored until its
// removal's last step.
func (s *Store) GoneCompanies(ids []uint64) ([]uint64, error) {
	var gone []uint64
	err := s.view(func(tx *bolt.Tx) error {
		gone = nil
		b := tx.Bucket(bucketCompanies)
		for _, id := range ids {
			if b.Get(itob(id)) == nil {
				gone = append(gone, id)
			}
		}
		return nil
	})
	slices.Sort(gone)
	return slices.Compact(gone), err
}

// CompanyIDs lists every company id, oldest first.
func (s *Store) CompanyIDs() ([]uint64, error) {
	var ids []uint64
	err := s.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketCompanies).ForEach(func(k, _ []byte) error {
			ids = append(ids, btoi(k))
			return nil
		})
	})
	return ids, err
}
