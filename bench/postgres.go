package bench

import (
	"context"
	"errors"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/postgres"
)

// openPostgres opens the PostgreSQL store at url.
func openPostgres(ctx context.Context, url string) (store.Backend, error) {
	pg, err := postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		return nil, err
	}
	b, ok := any(pg).(store.Backend)
	if !ok {
		pg.Close()
		return nil, errors.New("bench: the PostgreSQL store of this build does not yet answer every method of the server's store")
	}
	return b, nil
}
