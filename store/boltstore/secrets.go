package boltstore

import (
	"bytes"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/simrelay/simrelay/store"
)

// RotateSecrets replaces, in one transaction, each of names the store
// holds with as many fresh random bytes as it has, and re-seals every
// company's API key with reseal (given the old and fresh bytes of the
// secrets replaced), keeping what it returns. A name the store does not
// hold yet is left for Secret to make at its first use. It returns the
// names replaced, in the order given, how many companies' keys were
// re-sealed, and the companies whose sealed key reseal could not open
// (store.ErrSealedUnopened), by id, each kept as it was; on any other error
// (reseal's too) nothing is written.
func (s *Store) RotateSecrets(names []string, reseal store.Reseal) (replaced []string, resealed int, unopened []store.Company, err error) {
	err = s.update(func(tx *bolt.Tx) error {
		replaced, resealed, unopened = nil, 0, nil
		meta := tx.Bucket(bucketMeta)
		var old, fresh map[string][]byte
		var err error
		replaced, old, fresh, err = store.ReplaceSecrets(names, func(name string) ([]byte, bool, error) {
			v := meta.Get([]byte(secretPrefix + name))
			return bytes.Clone(v), v != nil, nil
		}, func(name string, v []byte) error {
			return meta.Put([]byte(secretPrefix+name), v)
		})
		if err != nil || len(replaced) == 0 || reseal == nil {
			return err
		}
		b := tx.Bucket(bucketCompanies)
		var sealed []Company
		if err := b.ForEach(func(k, v []byte) error {
			if v == nil {
				return nil
			}
			var c Company
			if err := jsonUnmarshal(v, &c); err != nil {
				return fmt.Errorf("company %d: %w", btoi(k), err)
			}
			if len(c.APIKeySealed) > 0 {
				c.ID = btoi(k) // the record's key, which put writes it back under
				sealed = append(sealed, c)
			}
			return nil
		}); err != nil {
			return err
		}
		resealed, unopened, err = store.ResealKeys(sealed, old, fresh, reseal, func(c Company) error {
			return putJSON(b, itob(c.ID), &c)
		})
		return err
	})
	if err != nil {
		return nil, 0, nil, fmt.Errorf("store: rotate secrets: %w", err)
	}
	return replaced, resealed, unopened, nil
}
