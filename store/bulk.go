package store

import (
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// ProvisionDevices stores many new devices in one transaction, for fleets set
// up ahead of time (and the load harness). Each carries its token hash; a
// fingerprint that exists already is ErrConflict and nothing is stored.
func (s *Store) ProvisionDevices(devs []Device) error {
	err := s.db.Update(func(tx *bolt.Tx) error {
		devices := tx.Bucket(bucketDevices)
		tokens := tx.Bucket(bucketDeviceTokens)
		index := tx.Bucket(bucketCompanyDevices)
		for _, d := range devs {
			if devices.Get([]byte(d.Fingerprint)) != nil {
				return fmt.Errorf("%w: device %s exists", ErrConflict, d.Fingerprint)
			}
			if err := putJSON(devices, []byte(d.Fingerprint), d); err != nil {
				return err
			}
			if err := tokens.Put(d.TokenHash, []byte(d.Fingerprint)); err != nil {
				return err
			}
			if err := index.Put(companyKey(d.CompanyID, d.Fingerprint), nil); err != nil {
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
// conversations and the inbound indexes up to date. Import in created_at order.
func (s *Store) ImportMessages(msgs []Message) error {
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketMessages)
		for i := range msgs {
			m := &msgs[i]
			id, err := b.NextSequence()
			if err != nil {
				return err
			}
			m.ID = id
			if err := insertMessage(tx, m); err != nil {
				return err
			}
			if m.Direction != Inbound {
				continue
			}
			if err := tx.Bucket(bucketInboundClient).Put(devKey(m.Device, []byte(m.ClientID)), itob(id)); err != nil {
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
