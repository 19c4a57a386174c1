package boltstore

import (
	"github.com/simrelay/simrelay/store"

	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// PutPairing stores a pairing code by its hash; it counts against the
// company's daily storage budget (a *BudgetError when spent), since codes
// are kept until a day after they expire.
func (s *Store) PutPairing(hash []byte, p Pairing, now time.Time) error {
	if err := s.update(func(tx *bolt.Tx) error {
		if err := companyOpen(tx, p.CompanyID); err != nil {
			return err
		}
		if err := s.charge(tx, p.CompanyID, now, store.PairingCost); err != nil {
			return err
		}
		return putJSON(tx.Bucket(bucketPairings), hash, p)
	}); err != nil {
		return fmt.Errorf("store: put pairing: %w", err)
	}
	return nil
}

// Pairing returns a pairing code's record.
func (s *Store) Pairing(hash []byte) (Pairing, error) {
	var p Pairing
	err := s.view(func(tx *bolt.Tx) error { return getJSON(tx.Bucket(bucketPairings), hash, &p) })
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
// sum is the device's summary as the registration leaves it (a device
// registered again keeps its queue and its failures; a new one has
// neither), so that the answer needs no read after the commit.
func (s *Store) RegisterDevice(pairingHash []byte, now time.Time, fingerprint string, build func(p Pairing, old *Device) (Device, error)) (dev Device, replaced bool, sum DeviceSummary, err error) {
	err = s.update(func(tx *bolt.Tx) error {
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
		// A closing company registers no device: the phones its closing
		// unlinks are those of the devices it read after the mark.
		if err := companyOpen(tx, p.CompanyID); err != nil {
			return err
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
		if old == nil {
			if _, err := s.planAllows(tx, p.CompanyID, now, store.LimitDevices); err != nil {
				return err
			}
		}
		d, err := build(p, old)
		if err != nil {
			return err
		}
		d.Fingerprint, d.CompanyID = fingerprint, p.CompanyID
		sum = DeviceSummary{}
		if old != nil {
			// The registration keeps its id and the numbers it holds.
			d.ID, d.NoNumbers = old.ID, old.NoNumbers
			if sum, err = deviceSummary(tx, d.CompanyID, d.ID); err != nil {
				return err
			}
		} else if d.ID, err = devices.NextSequence(); err != nil {
			return err
		} else {
			d.NoNumbers = true // a new id holds no number
		}
		p.UsedAt = now
		if err := putJSON(pairings, pairingHash, p); err != nil {
			return err
		}
		if err := putLiveDevice(tx, d); err != nil {
			return err
		}
		if err := addActivity(tx, d.CompanyID, Activity{Type: ActDevicePaired, At: now, Description: "Device " + store.ActivityName(store.DeviceLabel(d)) + " paired"}); err != nil {
			return err
		}
		dev = d
		return nil
	})
	if err != nil {
		return dev, false, DeviceSummary{}, fmt.Errorf("store: register device %s: %w", fingerprint, err)
	}
	return dev, replaced, sum, nil
}

// putLiveDevice stores a live device with its token and company entries.
func putLiveDevice(tx *bolt.Tx, d Device) error {
	if err := tx.Bucket(bucketDeviceTokens).Put(d.TokenHash, tokenValue(d)); err != nil {
		return err
	}
	if err := tx.Bucket(bucketCompanyDeviceIDs).Put(pair(d.CompanyID, d.ID), []byte(d.Fingerprint)); err != nil {
		return err
	}
	if err := syncDisabled(tx, d); err != nil {
		return err
	}
	if err := nameStatsDevice(tx, d); err != nil {
		return err
	}
	return putJSON(tx.Bucket(bucketDevices), []byte(d.Fingerprint), d)
}

// Device returns the live device with this fingerprint, whichever company
// holds it; callers acting for a company use CompanyDevice.
func (s *Store) Device(fingerprint string) (Device, error) {
	var d Device
	err := s.view(func(tx *bolt.Tx) error { return getJSON(tx.Bucket(bucketDevices), []byte(fingerprint), &d) })
	if err != nil {
		return d, fmt.Errorf("store: device %s: %w", fingerprint, err)
	}
	return d, nil
}

// CompanyDevice returns the company's live device with this fingerprint;
// another company's, or one of a company closing (companyOpen), is
// ErrNotFound.
func (s *Store) CompanyDevice(companyID uint64, fingerprint string) (Device, error) {
	var d Device
	err := s.view(func(tx *bolt.Tx) error {
		var err error
		d, err = liveDevice(tx, companyID, fingerprint)
		if errors.Is(err, ErrDeviceGone) {
			return ErrNotFound
		}
		if err == nil {
			err = companyOpen(tx, companyID)
		}
		if err != nil {
			d = Device{}
		}
		return err
	})
	if err != nil {
		return d, fmt.Errorf("store: device %s of company %d: %w", fingerprint, companyID, err)
	}
	return d, nil
}

// DeviceByTokenHash returns the device whose current token has this hash.
// A device of a company closing (MarkCompanyClosing) is ErrNotFound, read
// in the transaction that reads the device: its phone links no more from
// the mark on, though the removal's first step has not taken the token yet
// (DELETE /company closes the links of the devices it reads after the
// mark; one that passed this look before the mark is registered by then).
func (s *Store) DeviceByTokenHash(hash []byte) (Device, error) {
	var d Device
	err := s.view(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketDeviceTokens).Get(hash)
		if len(v) <= 8 {
			return ErrNotFound
		}
		if err := getJSON(tx.Bucket(bucketDevices), v[8:], &d); err != nil {
			return err
		}
		// The token must be the live registration's own.
		if d.ID != btoi(v[:8]) || !bytes.Equal(d.TokenHash, hash) {
			d = Device{}
			return ErrNotFound
		}
		if err := companyOpen(tx, d.CompanyID); err != nil {
			d = Device{}
			return err
		}
		return nil
	})
	if err != nil {
		return d, fmt.Errorf("store: device by token: %w", err)
	}
	return d, nil
}

// CompanyDevices lists a company's devices in fingerprint order.
func (s *Store) CompanyDevices(companyID uint64) ([]Device, error) {
	var out []Device
	err := s.view(func(tx *bolt.Tx) error {
		var err error
		walkPrefix(tx.Bucket(bucketCompanyDeviceIDs), itob(companyID), func(k, _ []byte) bool {
			var d Device
			if d, err = liveDeviceByID(tx, companyID, btoi(k[8:])); err != nil {
				return false
			}
			out = append(out, d)
			return true
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: devices of company %d: %w", companyID, err)
	}
	slices.SortFunc(out, func(a, b Device) int { return strings.Compare(a.Fingerprint, b.Fingerprint) })
	return out, nil
}

// DevicesReportedOnline lists every live device, of every company, whose
// last reported presence is online: those whose link ended without an
// offline report, as when the server stopped while they were linked.
func (s *Store) DevicesReportedOnline() ([]Device, error) {
	var out []Device
	err := s.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketDevices).ForEach(func(_, v []byte) error {
			var d Device
			if err := jsonUnmarshal(v, &d); err != nil {
				return err
			}
			if d.ID != 0 && d.Health != nil && d.Health.Presence == PresenceOnline {
				out = append(out, d)
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("store: devices reported online: %w", err)
	}
	return out, nil
}

// UpdateDevice applies fn to the company's device with this fingerprint and
// stores it; identity and token stay. Another company's device is ErrNotFound.
// fn may run more than once (updateDeviceTx), so it sets the device only.
func (s *Store) UpdateDevice(companyID uint64, fingerprint string, fn func(*Device) error) (Device, error) {
	return s.updateDevice(fmt.Sprintf("%s of company %d", fingerprint, companyID), func(tx *bolt.Tx) (Device, error) {
		return liveDevice(tx, companyID, fingerprint)
	}, fn)
}

// UpdateDeviceByID applies fn to the company's device with this id, as a
// phone's link knows it: a link of a deleted device, whose fingerprint
// another registration may hold by now, finds ErrNotFound.
func (s *Store) UpdateDeviceByID(companyID, deviceID uint64, fn func(*Device) error) (Device, error) {
	return s.updateDevice(fmt.Sprintf("%d of company %d", deviceID, companyID), func(tx *bolt.Tx) (Device, error) {
		return liveDeviceByID(tx, companyID, deviceID)
	}, fn)
}

// UpdateDeviceWith is UpdateDeviceByID whose fn also returns the events
// its change raises (device.online, ...): their webhook events
// (SetDeviceEvents) are written in the same transaction, so that the
// device's new state and what it raised are durable together or not at
// all. fn may run more than once; each run says afresh what it raises.
// It is the write of a link's hello: a record without NoNumbers is given
// it when the registration holds no WhatsApp number or iMessage handle
// (one seek in agent_number_held, in the same transaction); one with it
// reads nothing more. It is ErrDeviceGone, and only then, when the device
// is not a live registration of the company (deleted, or an id of another
// company), or its company is not stored or is closing
// (MarkCompanyClosing), as DeviceCompany says it: a link whose token
// passed its upgrade before the mark stores no hello after it (nor a
// health report or a presence; DELETE /company closes the link as the
// device's deletion would), and its phone is told the device is gone on
// that word alone.
func (s *Store) UpdateDeviceWith(companyID, deviceID uint64, fn func(d *Device) ([]DeviceEvent, error)) (Device, error) {
	return s.updateDeviceTx(fmt.Sprintf("%d of company %d", deviceID, companyID), func(tx *bolt.Tx) (Device, error) {
		d, err := liveDeviceByID(tx, companyID, deviceID)
		if err != nil {
			return Device{}, err
		}
		if err := devicesCompanyOpen(tx, companyID); err != nil {
			return Device{}, err
		}
		if !d.NoNumbers {
			d.NoNumbers = !holdsNumbers(tx, companyID, deviceID)
		}
		return d, nil
	}, fn)
}

// updateDevice is updateDeviceTx of a change that raises no event, whose
// device gone is ErrNotFound (UpdateDevice, UpdateDeviceByID: a request's
// 404).
func (s *Store) updateDevice(name string, find func(*bolt.Tx) (Device, error), fn func(*Device) error) (Device, error) {
	return s.updateDeviceTx(name, func(tx *bolt.Tx) (Device, error) {
		d, err := find(tx)
		if errors.Is(err, ErrDeviceGone) {
			return d, ErrNotFound
		}
		return d, err
	}, func(d *Device) ([]DeviceEvent, error) { return nil, fn(d) })
}

// updateDeviceTx goes through group commit: every link's hello, last-seen
// and presence change is a device write, and after a restart or a network
// blip thousands of phones make them at once; sharing commits keeps the
// fleet's return (and the sends meanwhile) from waiting on one fsync per
// phone. fn may therefore run more than once.
//
// A device that is gone and fn's refusal (a health report too soon, a bad
// value) come before anything is written: they are the caller's answer,
// not a failure of the commit, so they do not roll back the writes the
// batch shares (which would run them all again, and a phone repeating a
// refused frame could make every batch run twice).
func (s *Store) updateDeviceTx(name string, find func(*bolt.Tx) (Device, error), fn func(*Device) ([]DeviceEvent, error)) (Device, error) {
	var d Device
	err := s.grouped(func(tx *bolt.Tx) error {
		var err error
		if d, err = find(tx); err != nil {
			if errors.Is(err, ErrDeviceGone) || errors.Is(err, ErrNotFound) {
				return refuse(err) // find's word, as it said it
			}
			return err
		}
		before := d
		events, err := fn(&d)
		if err != nil {
			return refuse(err) // d changed in memory only
		}
		d.ID, d.Fingerprint, d.CompanyID, d.TokenHash, d.CreatedAt = before.ID, before.Fingerprint, before.CompanyID, before.TokenHash, before.CreatedAt
		if err := syncDisabled(tx, d); err != nil {
			return err
		}
		if err := nameStatsDevice(tx, d); err != nil {
			return err
		}
		if err := putJSON(tx.Bucket(bucketDevices), []byte(d.Fingerprint), &d); err != nil {
			return err
		}
		return s.writeDeviceEvents(tx, d, events)
	})
	if err != nil {
		return d, fmt.Errorf("store: update device %s: %w", name, err)
	}
	return d, nil
}

// DeleteDevice removes the company's device with this fingerprint, revokes
// its token, fails its scheduled, queued and sending messages (error
// device_deleted; an agent's queued sends are its number's, in the number's
// queue, and wait for the next agent that announces it) and clears the company's e-mail device when it is this one, in one
// transaction. Its history keeps its id, which no later registration of
// the fingerprint gets. Its SIMs' caps, counts and carrier-error streaks go
// with it. Another company's device is ErrNotFound.
func (s *Store) DeleteDevice(companyID uint64, fingerprint string, now time.Time) (Device, error) {
	var d Device
	err := s.grouped(func(tx *bolt.Tx) error {
		var err error
		d, err = s.deleteDeviceTx(tx, companyID, fingerprint, now)
		return err
	})
	if err != nil {
		return d, fmt.Errorf("store: delete device %s of company %d: %w", fingerprint, companyID, err)
	}
	return d, nil
}

func (s *Store) deleteDeviceTx(tx *bolt.Tx, companyID uint64, fingerprint string, now time.Time) (Device, error) {
	d, err := liveDevice(tx, companyID, fingerprint)
	if err != nil {
		if errors.Is(err, ErrDeviceGone) {
			return d, ErrNotFound
		}
		return d, err
	}
	if err := tx.Bucket(bucketDeviceTokens).Delete(d.TokenHash); err != nil {
		return d, err
	}
	if err := tx.Bucket(bucketCompanyDeviceIDs).Delete(pair(d.CompanyID, d.ID)); err != nil {
		return d, err
	}
	if err := s.failDeviceMessages(tx, d.CompanyID, d.ID, now); err != nil {
		return d, err
	}
	if err := tx.Bucket(bucketDisabledDevices).Delete(pair(d.CompanyID, d.ID)); err != nil {
		return d, err
	}
	if err := addActivity(tx, d.CompanyID, Activity{Type: ActDeviceDeleted, At: now, Description: "Device " + store.ActivityName(store.DeviceLabel(d)) + " deleted; its unfinished SMS failed"}); err != nil {
		return d, err
	}
	if err := tx.Bucket(bucketDeviceFailures).Delete(devKey(d.CompanyID, d.ID)); err != nil {
		return d, err
	}
	// Its SIMs' caps, counts, recipients and carrier-error streaks: nothing
	// reads them again (a phone paired again is a new device, with a new id),
	// and no prune would drop the caps and streaks.
	for _, name := range [][]byte{bucketSIMCaps, bucketSIMUsage, bucketSIMRecip, bucketSIMStreak} {
		if err := deletePrefix(tx.Bucket(name), devKey(d.CompanyID, d.ID)); err != nil {
			return d, err
		}
	}
	if err := leavePools(tx, d.CompanyID, d.ID, now); err != nil {
		return d, err
	}
	if err := dropEmailDevice(tx, d); err != nil {
		return d, err
	}
	return d, tx.Bucket(bucketDevices).Delete([]byte(fingerprint))
}

// dropEmailDevice clears the company's e-mail device (docs/email.md) when it
// is the deleted device d: the setting names no deleted device, nor one
// registered later with the same fingerprint.
func dropEmailDevice(tx *bolt.Tx, d Device) error {
	b := tx.Bucket(bucketCompanies)
	var c Company
	if err := getJSON(b, itob(d.CompanyID), &c); err != nil {
		return err
	}
	if c.EmailDevice != d.Fingerprint {
		return nil
	}
	c.EmailDevice = ""
	return putJSON(b, itob(d.CompanyID), &c)
}

// QueueDepth counts the device's SMS waiting to be sent to the phone
// (queued: its priority jobs and its plain queue), up to MaxQueueDepth.
func (s *Store) QueueDepth(companyID, deviceID uint64) (int, error) {
	n := 0
	err := s.view(func(tx *bolt.Tx) error {
		n = queueDepth(tx, companyID, deviceID)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("store: queue depth of device %d of company %d: %w", deviceID, companyID, err)
	}
	return n, nil
}

// queueDepth is QueueDepth in tx.
func queueDepth(tx *bolt.Tx, companyID, deviceID uint64) int {
	return queuedJobs(tx, companyID, deviceID, MaxQueueDepth)
}

// queuedJobs counts the device's queued jobs, its priority jobs and its
// plain queue, up to upTo: the one count of a device's queue (QueueDepth,
// the device summaries, least_loaded pools). The queues' keys start with
// the company id, so another company's device has none.
func queuedJobs(tx *bolt.Tx, companyID, deviceID uint64, upTo int) int {
	n := 0
	prefix := devKey(companyID, deviceID)
	for _, b := range [][]byte{bucketPrioQueue, bucketQueue} {
		c := tx.Bucket(b).Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && n < upTo; k, _ = c.Next() {
			n++
		}
	}
	return n
}
