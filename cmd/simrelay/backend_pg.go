package main

import (
	"errors"

	"github.com/simrelay/simrelay/store/postgres"
)

// pgBackend is the PostgreSQL store as the server's backend.
func pgBackend(pg *postgres.Store) (backend, error) {
	b, ok := any(pg).(backend)
	if !ok {
		pg.Close()
		return nil, errors.New("the PostgreSQL store of this build does not yet answer every method of the server's store")
	}
	return b, nil
}
