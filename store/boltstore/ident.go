package boltstore

import (
	"bytes"
	"errors"

	bolt "go.etcd.io/bbolt"
)

// A device has two names. Its fingerprint is the handset's own, stable for
// the life of the phone, so it follows the phone from one company to the next
// and is reused after a delete: it finds the live device and nothing else.
// Its id is the store's (a sequence number of the devices bucket, never
// reused): a registration after a delete gets a new one, a re-registration
// within the company keeps it. Every per-device record and index is keyed by
// the device's company and id (devKey), so history, queues and dedupe
// entries stay with the company and the registration that made them.

// devKey is the 16-byte prefix of every per-device key, company id then
// device id, both big-endian, followed by the rest of the key.
func devKey(companyID, deviceID uint64, rest ...[]byte) []byte {
	k := make([]byte, 16, 16+32)
	copy(k, itob(companyID))
	copy(k[8:], itob(deviceID))
	for _, r := range rest {
		k = append(k, r...)
	}
	return k
}

// devName is a device as a company names it: by fingerprint.
type devName struct {
	companyID   uint64
	fingerprint string
}

// msgDevKey is the per-device prefix of a message's device.
func msgDevKey(m Message, rest ...[]byte) []byte { return devKey(m.CompanyID, m.DeviceID, rest...) }

// tokenValue is a device_tokens value: the device id, then its fingerprint.
func tokenValue(d Device) []byte { return append(itob(d.ID), d.Fingerprint...) }

// liveDevice returns the company's live device with this fingerprint; a
// fingerprint that is unknown, or another company's, is ErrDeviceGone.
func liveDevice(tx *bolt.Tx, companyID uint64, fingerprint string) (Device, error) {
	var d Device
	if err := getJSON(tx.Bucket(bucketDevices), []byte(fingerprint), &d); err != nil {
		if errors.Is(err, ErrNotFound) {
			return d, ErrDeviceGone
		}
		return d, err
	}
	if d.CompanyID != companyID || d.ID == 0 {
		return Device{}, ErrDeviceGone
	}
	return d, nil
}

// liveDeviceByID returns the company's live device with this id; a deleted
// device, or an id of another company, is ErrDeviceGone.
func liveDeviceByID(tx *bolt.Tx, companyID, deviceID uint64) (Device, error) {
	fp := tx.Bucket(bucketCompanyDeviceIDs).Get(pair(companyID, deviceID))
	if fp == nil {
		return Device{}, ErrDeviceGone
	}
	d, err := liveDevice(tx, companyID, string(fp))
	if err != nil {
		return d, err
	}
	if d.ID != deviceID {
		return Device{}, ErrDeviceGone
	}
	return d, nil
}

// liveRef is what the hot paths (a phone's reports, inbound and dispatch)
// need of a live registration: who it is and what to call it. It is read
// from two small keys, never by decoding the device record.
type liveRef struct {
	CompanyID, ID uint64
	Fingerprint   string
	Label         string // the device's name, or its fingerprint when it has none
}

// deviceLive says whether the company's device is registered, as
// liveDeviceRef would find it, without reading its label.
func deviceLive(tx *bolt.Tx, companyID, deviceID uint64) bool {
	return tx.Bucket(bucketCompanyDeviceIDs).Get(pair(companyID, deviceID)) != nil
}

// liveDeviceRef is liveDeviceByID without the device record:
// company_device_ids holds exactly the live registrations, and the counters'
// device index (kept current on every device write) holds its name.
func liveDeviceRef(tx *bolt.Tx, companyID, deviceID uint64) (liveRef, error) {
	fp := tx.Bucket(bucketCompanyDeviceIDs).Get(pair(companyID, deviceID))
	if fp == nil {
		return liveRef{}, ErrDeviceGone
	}
	r := liveRef{CompanyID: companyID, ID: deviceID, Fingerprint: string(fp), Label: string(fp)}
	if b := tx.Bucket(bucketStatsDevices); b != nil {
		if v := b.Get(pair(companyID, deviceID)); v != nil {
			if _, name, ok := bytes.Cut(v, []byte{0}); ok && len(name) > 0 {
				r.Label = string(name)
			}
		}
	}
	return r, nil
}

// liveDeviceRefOfOpenCompany is liveDeviceRef for a write a device's link
// makes on the company's behalf (an inbound message): a device of a
// company closing (MarkCompanyClosing), or not stored, is ErrDeviceGone
// too, read in the write's own transaction, so that a mark committed
// after the link's read of its company (DeviceCompany) still refuses it.
func liveDeviceRefOfOpenCompany(tx *bolt.Tx, companyID, deviceID uint64) (liveRef, error) {
	r, err := liveDeviceRef(tx, companyID, deviceID)
	if err != nil {
		return r, err
	}
	if err := devicesCompanyOpen(tx, companyID); err != nil {
		return liveRef{}, err
	}
	return r, nil
}

// devicesCompanyOpen is companyOpen for a write of a live device's: a
// company closing or not stored is ErrDeviceGone, the store's word that
// the device is gone.
func devicesCompanyOpen(tx *bolt.Tx, companyID uint64) error {
	if err := companyOpen(tx, companyID); errors.Is(err, ErrNotFound) {
		return ErrDeviceGone
	} else if err != nil {
		return err
	}
	return nil
}

// walkPrefix calls fn with each key under prefix, in order, until fn says stop.
func walkPrefix(b *bolt.Bucket, prefix []byte, fn func(k, v []byte) bool) {
	c := b.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		if !fn(k, v) {
			return
		}
	}
}
