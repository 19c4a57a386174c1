package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simrelay/simrelay/store"
)

// ErrNodesLive refuses to replace the server's secrets (a rotation, a
// copy-store) while nodes beat in the registry: each holds the old ones in
// memory until it stops, so the credentials it signs would not pass the
// others, nor its own next start.
var ErrNodesLive = errors.New("nodes run on this database")

// noNodeHoldsSecrets refuses (ErrNodesLive, naming them, then what to do
// once they are stopped) while nodes are live by liveNodes: each holds the
// secrets it read at its start.
func noNodeHoldsSecrets(query func(string, ...any) (pgx.Rows, error), then string) error {
	live, err := liveNodes(query)
	if err != nil {
		return err
	}
	if len(live) > 0 {
		return fmt.Errorf("%w (%s): stop every node first, then %s (a node killed a moment ago counts for %d s after its last beat)", ErrNodesLive, strings.Join(live, ", "), then, migrateLiveWithin)
	}
	return nil
}

// RotateSecrets replaces, in one transaction, each of names the database
// holds with as many fresh random bytes as it has, and re-seals every
// company's API key with reseal (given the old and fresh bytes of the
// secrets replaced), keeping what it returns. A name the database does not
// hold yet is left for Secret to make at its first use. It returns the
// names replaced, in the order given, how many companies' keys were
// re-sealed, and the companies whose sealed key reseal could not open
// (store.ErrSealedUnopened), by id, each kept as it was; on any other error
// (reseal's too) nothing is written.
//
// It refuses (ErrNodesLive) while a node's beat is within
// migrateLiveWithin seconds, as a migration does, under the same advisory
// lock that a node registers under (RegisterNode) before it reads any
// secret: a node registers before the rotation and is refused by it, or
// after its commit and reads the new secrets. An admin command that seals
// with a secret holds that lock too, shared (HoldSecrets), so the rotation
// waits for it and re-seals what it stored. A rotation that replaces
// anything removes the nodes of the registry (none live): a node silent
// past the window but not stopped finds its row gone at its next beat and
// stops.
func (s *Store) RotateSecrets(names []string, reseal store.Reseal) (replaced []string, resealed int, unopened []store.Company, err error) {
	err = s.write("rotate secrets", func(t *txn) error {
		replaced, resealed, unopened = nil, 0, nil
		if _, err := t.exec("SELECT pg_advisory_xact_lock($1)", migrationLock); err != nil {
			return err
		}
		if err := noNodeHoldsSecrets(t.query, "rotate"); err != nil {
			return err
		}
		var old, fresh map[string][]byte
		replaced, old, fresh, err = store.ReplaceSecrets(names, func(name string) ([]byte, bool, error) {
			var v []byte
			err := t.row("SELECT value FROM secrets WHERE name = $1 FOR UPDATE", name).Scan(&v)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil, false, nil
			}
			return v, err == nil, err
		}, func(name string, v []byte) error {
			_, err := t.exec("UPDATE secrets SET value = $2 WHERE name = $1", name, v)
			return err
		})
		if err != nil {
			return err
		}
		if len(replaced) > 0 {
			// The nodes left in the registry are not live (above), but one
			// may not be stopped: paused, or cut off from the database,
			// past the window. It holds the secrets replaced here. Its row
			// goes, so that its next beat (NodeBeat) answers false and it
			// stops rather than go on with them.
			if _, err := t.exec("DELETE FROM cluster_nodes WHERE seen_at <= now() - make_interval(secs => $1)", migrateLiveWithin); err != nil {
				return err
			}
		}
		if len(replaced) == 0 || reseal == nil {
			return nil
		}
		companies, err := getRecs[store.Company](t, "SELECT rec FROM companies ORDER BY id FOR UPDATE")
		if err != nil {
			return err
		}
		resealed, unopened, err = store.ResealKeys(companies, old, fresh, reseal, func(c store.Company) error {
			raw, err := rec(c)
			if err != nil {
				return err
			}
			_, err = t.exec("UPDATE companies SET rec = $2 WHERE id = $1", id(c.ID), raw)
			return err
		})
		return err
	})
	if err != nil {
		return nil, 0, nil, err
	}
	return replaced, resealed, unopened, nil
}

// HoldSecrets runs fn holding the advisory lock a rotation of the server's
// secrets takes (RotateSecrets), shared, on a session of its own beside the
// pool: fn's reads of the secrets and the writes it makes with them (an
// admin command's company, its API key sealed under the seal key it read)
// all come before a rotation or all after it, never across it. A rotation
// that began first is waited for; one that begins while fn runs waits for
// fn, and then re-seals the API key fn stored. Commands hold it side by
// side (it is shared). fn's own transactions have the pool's connections,
// however few (pool_max_conns=1: one taken for the lock left fn none).
//
// The lock is the session's: the session is closed when fn returns, and
// the lock goes with it.
func (s *Store) HoldSecrets(fn func() error) error {
	ctx, cancel := s.bounded()
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err == nil {
		if _, err = conn.Exec(ctx, "SELECT pg_advisory_lock_shared($1)", migrationLock); err != nil {
			_ = conn.Close(context.Background())
		}
	}
	cancel()
	if err != nil {
		return fmt.Errorf("store: hold secrets: %w", s.closed(err))
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = conn.Close(ctx)
	}()
	return fn()
}
