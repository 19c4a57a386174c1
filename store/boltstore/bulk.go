package boltstore

import (
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// ProvisionDevices stores many new devices in one transaction, for fleets set
// up ahead of time (and the load harness), giving each its id. Each carries
// its token hash; a fingerprint that exists already is ErrConflict and
// nothing is stored.
func (s *Store) ProvisionDevices(devs []Device) error {
	err := s.update(func(tx *bolt.Tx) error {
		devices := tx.Bucket(bucketDevices)
		for _, d := range devs {
			if devices.Get([]byte(d.Fingerprint)) != nil {
				return fmt.Errorf("%w: device %s exists", ErrConflict, d.Fingerprint)
			}
			var err error
			if d.ID, err = devices.NextSequence(); err != nil {
				return err
			}
			d.NoNumbers = true // a new id holds no number
			if err := putLiveDevice(tx, d); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: provision devices: %w", err)
	}
	return nil
}

// ImportMessages stores finished history (delivered, failed or received
// messages, with their UUIDs and times set) in one transaction, keeping
// conversations and the inbound indexes up to date. Import in created_at
// order. Device names the fingerprint of a live device of the message's
// company, whose id the message takes; any other is ErrDeviceGone.
func (s *Store) ImportMessages(msgs []Message) error {
	err := s.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketMessages)
		ids := map[devName]uint64{}
		for i := range msgs {
			m := &msgs[i]
			name := devName{m.CompanyID, m.Device}
			if ids[name] == 0 {
				d, err := liveDevice(tx, m.CompanyID, m.Device)
				if err != nil {
					return fmt.Errorf("message %s: device %s: %w", m.UUID, m.Device, err)
				}
				ids[name] = d.ID
			}
			m.DeviceID = ids[name]
			id, err := b.NextSequence()
			if err != nil {
				return err
			}
			m.ID = id
			if err := insertMessage(tx, m); err != nil {
				return err
			}
			if err := countStored(tx, *m); err != nil {
				return err
			}
			if m.Direction != Inbound {
				continue
			}
			if err := tx.Bucket(bucketInboundClient).Put(msgDevKey(*m, []byte(m.ClientID)), itob(id)); err != nil {
				return err
			}
			for _, k := range inboundCompanyKeys(*m) {
				if err := tx.Bucket(bucketInboundCompany).Put(k, nil); err != nil {
					return err
				}
			}
			for _, k := range inboundDeviceKeys(*m) {
				if err := tx.Bucket(bucketInboundDevice).Put(k, nil); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: import messages: %w", err)
	}
	return nil
}
