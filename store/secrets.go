package store

import (
	"crypto/rand"
	"errors"
	"fmt"
)

// The backend-neutral steps of RotateSecrets (the rotate-keys command),
// which both backends run inside the rotation's transaction.

// ReplaceSecrets replaces each of names that read finds held with as many
// fresh random bytes as it has, stored by write, each name once. It
// returns the names replaced, in the order given, and the old and the
// fresh bytes of each by name, for the re-seal (ResealKeys). read says
// whether the store holds name and its bytes, which ReplaceSecrets keeps
// past write: a backend whose bytes live only as long as the transaction
// copies them.
func ReplaceSecrets(names []string, read func(name string) (value []byte, held bool, err error), write func(name string, value []byte) error) (replaced []string, old, fresh map[string][]byte, err error) {
	old, fresh = map[string][]byte{}, map[string][]byte{}
	for _, name := range names {
		if _, done := old[name]; done {
			continue
		}
		v, held, err := read(name)
		if err != nil {
			return nil, nil, nil, err
		}
		if !held {
			continue
		}
		nv := make([]byte, len(v))
		if _, err := rand.Read(nv); err != nil {
			return nil, nil, nil, err
		}
		if err := write(name, nv); err != nil {
			return nil, nil, nil, err
		}
		old[name], fresh[name] = v, nv
		replaced = append(replaced, name)
	}
	return replaced, old, fresh, nil
}

// ResealKeys re-seals with reseal, given the old and the fresh bytes of the
// secrets replaced, the API key of each of companies that has one, and has
// put store each company re-sealed. It returns how many were re-sealed and
// the companies whose sealed key reseal could not open (ErrSealedUnopened),
// each kept as it was; any other error of reseal's (naming its company) or
// of put's ends it, and the caller's transaction writes nothing.
func ResealKeys(companies []Company, old, fresh map[string][]byte, reseal Reseal, put func(Company) error) (resealed int, unopened []Company, err error) {
	for _, c := range companies {
		if len(c.APIKeySealed) == 0 {
			continue
		}
		v, err := reseal(old, fresh, c.APIKeySealed)
		if errors.Is(err, ErrSealedUnopened) {
			// Unreadable before the rotation, and so after it: kept as
			// it is (the key authenticates by its hash).
			unopened = append(unopened, c)
			continue
		}
		if err != nil {
			return 0, nil, fmt.Errorf("company %d: %w", c.ID, err)
		}
		c.APIKeySealed = v
		if err := put(c); err != nil {
			return 0, nil, err
		}
		resealed++
	}
	return resealed, unopened, nil
}
