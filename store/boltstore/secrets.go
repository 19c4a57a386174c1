package boltstore

import (
	"crypto/rand"
	"errors"
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
		old, fresh := map[string][]byte{}, map[string][]byte{}
		for _, name := range names {
			key := []byte(secretPrefix + name)
			v := meta.Get(key)
			if v == nil {
				continue
			}
			if _, done := old[name]; done {
				continue
			}
			nv := make([]byte, len(v))
			if _, err := rand.Read(nv); err != nil {
				return err
			}
			old[name], fresh[name] = append([]byte(nil), v...), nv
			if err := meta.Put(key, nv); err != nil {
				return err
			}
			replaced = append(replaced, name)
		}
		if len(replaced) == 0 || reseal == nil {
			return nil
		}
		b := tx.Bucket(bucketCompanies)
		type sealed struct {
			id uint64
			c  Company
		}
		var all []sealed
		if err := b.ForEach(func(k, v []byte) error {
			if v == nil {
				return nil
			}
			var c Company
			if err := jsonUnmarshal(v, &c); err != nil {
				return fmt.Errorf("company %d: %w", btoi(k), err)
			}
			if len(c.APIKeySealed) > 0 {
				all = append(all, sealed{btoi(k), c})
			}
			return nil
		}); err != nil {
			return err
		}
		for _, x := range all {
			v, err := reseal(old, fresh, x.c.APIKeySealed)
			if errors.Is(err, store.ErrSealedUnopened) {
				// Unreadable before the rotation, and so after it:
				// kept as it is (the key authenticates by its hash).
				unopened = append(unopened, x.c)
				continue
			}
			if err != nil {
				return fmt.Errorf("company %d: %w", x.id, err)
			}
			x.c.APIKeySealed = v
			if err := putJSON(b, itob(x.id), &x.c); err != nil {
				return err
			}
			resealed++
		}
		return nil
	})
	if err != nil {
		return nil, 0, nil, fmt.Errorf("store: rotate secrets: %w", err)
	}
	return replaced, resealed, unopened, nil
}
