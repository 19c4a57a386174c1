package agent

import (
	"bytes"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// readOutbox decodes every record of an outbox bucket (reports, inbound
// messages), oldest first. A record that does not decode - a damaged
// journal - could never be sent and would otherwise hold back every
// record read with it: it is deleted (with its entry in index, a bucket of
// key -> seq, when given), and the error names it, once. The records
// decoded are handed to decode, with their seq, even when an error is
// returned.
func (j *Journal) readOutbox(bucket, index []byte, decode func(seq, v []byte) error) error {
	var bad [][]byte
	var errs []error
	err := j.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucket).ForEach(func(k, v []byte) error {
			if err := decode(k, v); err != nil {
				bad = append(bad, bytes.Clone(k))
				errs = append(errs, fmt.Errorf("journal: unreadable %s record %x deleted: %w", bucket, k, err))
			}
			return nil
		})
	})
	if err != nil || len(bad) == 0 {
		return err
	}
	err = j.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket)
		for _, k := range bad {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		if index == nil {
			return nil
		}
		var stale [][]byte
		err := tx.Bucket(index).ForEach(func(k, v []byte) error {
			for _, seq := range bad {
				if bytes.Equal(v, seq) {
					stale = append(stale, bytes.Clone(k))
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range stale {
			if err := tx.Bucket(index).Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		errs = append(errs, fmt.Errorf("journal: delete unreadable %s records: %w", bucket, err))
	}
	return errors.Join(errs...)
}
