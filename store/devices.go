package store

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Device status values.
const (
	DeviceActive   = "active"
	DeviceDisabled = "disabled"
)

// ErrPairingUsed is returned for a pairing code that was already spent.
var ErrPairingUsed = errors.New("store: pairing code already used")

// SIM is one SIM slot of a device.
type SIM struct {
	Slot        string `json:"slot"`
	Carrier     string `json:"carrier,omitempty"`
	PhoneNumber string `json:"phone_number,omitempty"`
}

// Device is a paired phone, keyed by its fingerprint (unique across companies).
type Device struct {
	Fingerprint string    `json:"fingerprint"`
	CompanyID   uint64    `json:"company_id"`
	UserID      uint64    `json:"user_id"`
	Name        string    `json:"name"`
	Status      string    `json:"status"`
	SelectedSIM string    `json:"selected_sim"`
	SIMs        []SIM     `json:"sims"`
	FCMToken    string    `json:"fcm_token,omitempty"`
	AppVersion  string    `json:"app_version,omitempty"`
	TokenHash   []byte    `json:"token_hash"`
	CreatedAt   time.Time `json:"created_at"`
	LastSeenAt  time.Time `json:"last_seen_at,omitzero"`
	// SMSPerMinute paces sends to this phone; 0 leaves pacing to Android's own quota.
	SMSPerMinute int `json:"sms_per_minute,omitempty"`
}

// Pairing is a single-use code that lets a phone join a company.
type Pairing struct {
	CompanyID uint64    `json:"company_id"`
	UserID    uint64    `json:"user_id"`
	ExpiresAt time.Time `json:"expires_at"`
	UsedAt    time.Time `json:"used_at,omitzero"`
}

// PutPairing stores a pairing code by its hash.
func (s *Store) PutPairing(hash []byte, p Pairing) error {
	if err := s.db.Update(func(tx *bolt.Tx) error {
		return putJSON(tx.Bucket(bucketPairings), hash, p)
	}); err != nil {
		return fmt.Errorf("store: put pairing: %w", err)
	}
	return nil
}

// Pairing returns a pairing code's record.
func (s *Store) Pairing(hash []byte) (Pairing, error) {
	var p Pairing
	err := s.db.View(func(tx *bolt.Tx) error { return getJSON(tx.Bucket(bucketPairings), hash, &p) })
	if err != nil {
		return p, fmt.Errorf("store: pairing: %w", err)
	}
	return p, nil
}

// RegisterDevice spends a pairing code and stores the device with a new
// token, in one transaction. A fingerprint owned by another company is
// ErrConflict. Registering again within the same company keeps the device's
// creation time and replaces its token; replaced reports that case. build
// fills the record from the pairing (and the old record when there is one).
func (s *Store) RegisterDevice(pairingHash []byte, now time.Time, fingerprint string, build func(p Pairing, old *Device) (Device, error)) (dev Device, replaced bool, err error) {
	err = s.db.Update(func(tx *bolt.Tx) error {
		pairings := tx.Bucket(bucketPairings)
		var p Pairing
		if err := getJSON(pairings, pairingHash, &p); err != nil {
			return err
		}
		if !p.UsedAt.IsZero() {
			return ErrPairingUsed
		}
		if !now.Before(p.ExpiresAt) {
			return ErrTokenExpired
		}
		devices := tx.Bucket(bucketDevices)
		tokens := tx.Bucket(bucketDeviceTokens)
		var old *Device
		var prev Device
		if err := getJSON(devices, []byte(fingerprint), &prev); err == nil {
			if prev.CompanyID != p.CompanyID {
				return ErrConflict
			}
			old, replaced = &prev, true
			if err := tokens.Delete(prev.TokenHash); err != nil {
				return err
			}
		} else if !errors.Is(err, ErrNotFound) {
			return err
		}
		d, err := build(p, old)
		if err != nil {
			return err
		}
		d.Fingerprint, d.CompanyID = fingerprint, p.CompanyID
		p.UsedAt = now
		if err := putJSON(pairings, pairingHash, p); err != nil {
			return err
		}
		if err := tokens.Put(d.TokenHash, []byte(fingerprint)); err != nil {
			return err
		}
		if err := tx.Bucket(bucketCompanyDevices).Put(companyKey(d.CompanyID, fingerprint), nil); err != nil {
			return err
		}
		dev = d
		return putJSON(devices, []byte(fingerprint), d)
	})
	if err != nil {
		return dev, false, fmt.Errorf("store: register device %s: %w", fingerprint, err)
	}
	return dev, replaced, nil
}

func companyKey(companyID uint64, name string) []byte { return append(itob(companyID), name...) }

// Device returns one device by fingerprint.
func (s *Store) Device(fingerprint string) (Device, error) {
	var d Device
	err := s.db.View(func(tx *bolt.Tx) error { return getJSON(tx.Bucket(bucketDevices), []byte(fingerprint), &d) })
	if err != nil {
		return d, fmt.Errorf("store: device %s: %w", fingerprint, err)
	}
	return d, nil
}

// DeviceByTokenHash returns the device whose current token has this hash.
func (s *Store) DeviceByTokenHash(hash []byte) (Device, error) {
	var d Device
	err := s.db.View(func(tx *bolt.Tx) error {
		fp := tx.Bucket(bucketDeviceTokens).Get(hash)
		if fp == nil {
			return ErrNotFound
		}
		return getJSON(tx.Bucket(bucketDevices), fp, &d)
	})
	if err != nil {
		return d, fmt.Errorf("store: device by token: %w", err)
	}
	return d, nil
}

// CompanyDevices lists a company's devices in fingerprint order.
func (s *Store) CompanyDevices(companyID uint64) ([]Device, error) {
	var out []Device
	err := s.db.View(func(tx *bolt.Tx) error {
		devices := tx.Bucket(bucketDevices)
		prefix := itob(companyID)
		c := tx.Bucket(bucketCompanyDevices).Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			var d Device
			if err := getJSON(devices, k[8:], &d); err != nil {
				return err
			}
			out = append(out, d)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: devices of company %d: %w", companyID, err)
	}
	return out, nil
}

// UpdateDevice applies fn to a device and stores it; identity and token stay.
func (s *Store) UpdateDevice(fingerprint string, fn func(*Device) error) (Device, error) {
	var d Device
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketDevices)
		if err := getJSON(b, []byte(fingerprint), &d); err != nil {
			return err
		}
		before := d
		if err := fn(&d); err != nil {
			return err
		}
		d.Fingerprint, d.CompanyID, d.TokenHash, d.CreatedAt = before.Fingerprint, before.CompanyID, before.TokenHash, before.CreatedAt
		return putJSON(b, []byte(fingerprint), &d)
	})
	if err != nil {
		return d, fmt.Errorf("store: update device %s: %w", fingerprint, err)
	}
	return d, nil
}

// DeleteDevice removes a device and revokes its token, and fails its queued
// and sending messages (error device_deleted), in one transaction.
func (s *Store) DeleteDevice(fingerprint string, now time.Time) (Device, error) {
	var d Device
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketDevices)
		if err := getJSON(b, []byte(fingerprint), &d); err != nil {
			return err
		}
		if err := tx.Bucket(bucketDeviceTokens).Delete(d.TokenHash); err != nil {
			return err
		}
		if err := tx.Bucket(bucketCompanyDevices).Delete(companyKey(d.CompanyID, fingerprint)); err != nil {
			return err
		}
		if err := failDeviceMessages(tx, fingerprint, now); err != nil {
			return err
		}
		return b.Delete([]byte(fingerprint))
	})
	if err != nil {
		return d, fmt.Errorf("store: delete device %s: %w", fingerprint, err)
	}
	return d, nil
}
