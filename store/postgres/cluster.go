package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simrelay/simrelay/store"
)

// nodeLock serializes the start-up checks of nodes starting together
// ("simrelan": next to the migration lock).
const nodeLock int64 = 0x73696d72656c616e

// clockTimeout bounds a reading of the database's clock (DatabaseTime).
const clockTimeout = 2 * time.Second

// Node is a row of the cluster's registry.
type Node struct {
	Name      string
	StartedAt time.Time
	SeenAt    time.Time
	Bus       bool
	Instance  string
	// Version is the simrelay build the node runs (its start line's
	// version=); "" in a row written before nodes recorded it.
	Version string
}

// NodeRefused is RegisterNode's refusal: Reason says why, for the
// operator; Other is the live node in the way (the node's own name when
// NameLive: a restart right after a crash sees its own last beat).
type NodeRefused struct {
	Reason   string
	Other    string
	NameLive bool
}

func (e *NodeRefused) Error() string { return "store/postgres: node refused: " + e.Reason }

// RegisterNode writes this node into the registry, or refuses it (a
// *NodeRefused) when the cluster's rules forbid it:
//   - another live node (a beat within live) has the same name and another
//     instance: two processes would share one name;
//   - another live node is on the database and this node or that one has no
//     bus: the two would not hear each other's signals.
//
// The checks and the write are one transaction under an advisory lock, so
// nodes starting together are checked one after the other.
//
// It also refuses (ErrSchemaTooNew) a schema migrated past this binary's
// since Open checked it: a newer node migrates only while no node beats
// (migrate.go), and a node that opened the store before that migration
// but registers after it would beat in the registry unseen by it and run
// on a schema it does not know. Both take the migration's advisory lock,
// so one of them sees the other: the migration this node's beat, or this
// node the migrated schema.
func (s *Store) RegisterNode(n Node, live time.Duration) error {
	return s.write("register node", func(t *txn) error {
		if _, err := t.exec("SELECT pg_advisory_xact_lock($1)", nodeLock); err != nil {
			return err
		}
		// After the node lock, as migrate takes none: no two wait on each other.
		if _, err := t.exec("SELECT pg_advisory_xact_lock($1)", migrationLock); err != nil {
			return err
		}
		var schema int
		if err := t.row("SELECT coalesce(max(version), 0) FROM schema_version").Scan(&schema); err != nil {
			return err
		}
		if schema > s.schema {
			return fmt.Errorf("%w: it was migrated to version %d since this node opened it at %d: run the newer simrelay that migrated it", ErrSchemaTooNew, schema, s.schema)
		}
		rows, err := t.query(`SELECT name, bus, instance FROM cluster_nodes
			WHERE seen_at > now() - make_interval(secs => $1) AND NOT (name = $2 AND instance = $3)`, live.Seconds(), n.Name, n.Instance)
		if err != nil {
			return err
		}
		others, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Node, error) {
			var o Node
			return o, r.Scan(&o.Name, &o.Bus, &o.Instance)
		})
		if err != nil {
			return err
		}
		for _, o := range others {
			switch {
			case o.Name == n.Name:
				return &NodeRefused{NameLive: true, Other: o.Name, Reason: fmt.Sprintf("a live node is named %q already (its last beat is within %s): give each node its own --node-name", n.Name, live)}
			case !n.Bus && !o.Bus:
				return &NodeRefused{Other: o.Name, Reason: fmt.Sprintf("node %q runs on this database without a bus, and so would this one: two nodes on one database need --nats-url each", o.Name)}
			case !n.Bus:
				return &NodeRefused{Other: o.Name, Reason: fmt.Sprintf("node %q runs on this database with a bus, and this one has none: give this node the cluster's --nats-url", o.Name)}
			case !o.Bus:
				return &NodeRefused{Other: o.Name, Reason: fmt.Sprintf("node %q runs on this database without a bus: restart it with --nats-url before adding nodes", o.Name)}
			}
		}
		// The links recorded under the name are of a process that held it
		// before (this node's previous run, killed), whose beat has aged
		// past the window: with the name live again they would count as
		// open on this node, which holds none of them, and no sweep would
		// end them (their devices online for ever, never reported offline).
		// This node links nothing before it registers.
		if _, err := t.exec(`UPDATE device_links SET ended_at = now() WHERE node = $1 AND ended_at IS NULL`, n.Name); err != nil {
			return err
		}
		_, err = t.exec(`INSERT INTO cluster_nodes (name, started_at, seen_at, bus, instance, version) VALUES ($1, now(), now(), $2, $3, $4)
			ON CONFLICT (name) DO UPDATE SET started_at = now(), seen_at = now(), bus = $2, instance = $3, version = $4`, n.Name, n.Bus, n.Instance, n.Version)
		return err
	})
}

// NodeSeen is the last beat of the named node (zero when it has no row)
// and the database's time now.
func (s *Store) NodeSeen(name string) (seen, now time.Time, err error) {
	err = s.read("node seen", func(t *txn) error {
		var at *time.Time
		if err := t.row(`SELECT (SELECT seen_at FROM cluster_nodes WHERE name = $1), now()`, name).Scan(&at, &now); err != nil {
			return err
		}
		if at != nil {
			seen = *at
		}
		return nil
	})
	return seen, now, err
}

// NodeBeat says the node is alive. It answers false when the node's row
// belongs to another instance now (a process that took the name over after
// this one stopped beating) or is gone (a rotation of the secrets removed
// it, RotateSecrets): this node must stop.
func (s *Store) NodeBeat(name, instance string) (bool, error) {
	var ok bool
	err := s.write("node beat", func(t *txn) error {
		tag, err := t.exec(`UPDATE cluster_nodes SET seen_at = now() WHERE name = $1 AND instance = $2`, name, instance)
		ok = tag.RowsAffected() == 1
		return err
	})
	return ok, err
}

// LeaveNode removes the node from the registry, and ends the links it still
// records (a clean shutdown closed them all). A node whose name another
// process took while it was silent (NodeBeat answered false) leaves the
// links recorded under the name alone: they are that process's.
func (s *Store) LeaveNode(name, instance string) error {
	return s.write("leave node", func(t *txn) error {
		if _, err := t.exec(`UPDATE device_links SET ended_at = now() WHERE node = $1 AND ended_at IS NULL
			AND NOT EXISTS (SELECT 1 FROM cluster_nodes WHERE name = $1 AND instance <> $2)`, name, instance); err != nil {
			return err
		}
		_, err := t.exec(`DELETE FROM cluster_nodes WHERE name = $1 AND instance = $2`, name, instance)
		return err
	})
}

// LiveNodes are the nodes whose last beat is within live, by name.
func (s *Store) LiveNodes(live time.Duration) ([]Node, error) {
	var nodes []Node
	err := s.read("live nodes", func(t *txn) error {
		rows, err := t.query(`SELECT name, started_at, seen_at, bus, instance, version FROM cluster_nodes
			WHERE seen_at > now() - make_interval(secs => $1) ORDER BY name`, live.Seconds())
		if err != nil {
			return err
		}
		nodes, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Node, error) {
			var n Node
			return n, r.Scan(&n.Name, &n.StartedAt, &n.SeenAt, &n.Bus, &n.Instance, &n.Version)
		})
		return err
	})
	return nodes, err
}

// ClaimLink makes the node the holder of the device's link and answers the
// link's epoch: one more than any before, so every older link of the
// device, on any node, is fenced out.
func (s *Store) ClaimLink(deviceID uint64, node string) (uint64, error) {
	var epoch int64
	err := s.write("claim link", func(t *txn) error {
		return t.row(`INSERT INTO device_links (device_id, epoch, node, linked_at) VALUES ($1, 1, $2, now())
			ON CONFLICT (device_id) DO UPDATE SET epoch = device_links.epoch + 1, node = $2, linked_at = now(), ended_at = NULL
			RETURNING epoch`, int64(deviceID), node).Scan(&epoch)
	})
	return uint64(epoch), err
}

// LinkEpochs answers the newest epoch of each device that has one.
func (s *Store) LinkEpochs(deviceIDs []uint64) (map[uint64]uint64, error) {
	out := make(map[uint64]uint64, len(deviceIDs))
	if len(deviceIDs) == 0 {
		return out, nil
	}
	ids := make([]int64, len(deviceIDs))
	for i, id := range deviceIDs {
		ids[i] = int64(id)
	}
	err := s.read("link epochs", func(t *txn) error {
		rows, err := t.query(`SELECT device_id, epoch FROM device_links WHERE device_id = ANY($1)`, ids)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id, epoch int64
			if err := rows.Scan(&id, &epoch); err != nil {
				return err
			}
			out[uint64(id)] = uint64(epoch)
		}
		return rows.Err()
	})
	return out, err
}

// GoneDevices answers, of the devices given, those deleted (true) or
// disabled (false): a link of one of them left open on a node that missed
// the bus's disconnect is closed by that node's sweep. A device without a
// row is deleted: its company was removed (RemoveCompanyStep deletes the
// rows, where DeleteDevice keeps one marked deleted).
func (s *Store) GoneDevices(deviceIDs []uint64) (map[uint64]bool, error) {
	out := make(map[uint64]bool)
	if len(deviceIDs) == 0 {
		return out, nil
	}
	ids := make([]int64, len(deviceIDs))
	for i, id := range deviceIDs {
		ids[i] = int64(id)
	}
	err := s.read("gone devices", func(t *txn) error {
		clear(out) // a retried read starts over
		rows, err := t.query(`SELECT x.id, d.id IS NULL OR d.deleted_at IS NOT NULL
			FROM unnest($1::bigint[]) AS x(id) LEFT JOIN devices d ON d.id = x.id
			WHERE d.id IS NULL OR d.deleted_at IS NOT NULL OR d.rec->>'status' = $2`, ids, store.DeviceDisabled)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id int64
			var deleted bool
			if err := rows.Scan(&id, &deleted); err != nil {
				return err
			}
			out[uint64(id)] = deleted
		}
		return rows.Err()
	})
	return out, err
}

// EndLink records that the device's link of that epoch ended; a newer
// link's row is left as it is.
func (s *Store) EndLink(deviceID, epoch uint64) error {
	return s.write("end link", func(t *txn) error {
		_, err := t.exec(`UPDATE device_links SET ended_at = now() WHERE device_id = $1 AND epoch = $2 AND ended_at IS NULL`, int64(deviceID), int64(epoch))
		return err
	})
}

// Linked answers the node holding the device's link when that link has not
// ended and its node is live (a beat within live).
func (s *Store) Linked(deviceID uint64, live time.Duration) (node string, ok bool, err error) {
	err = s.read("linked", func(t *txn) error {
		e := t.row(`SELECT l.node FROM device_links l JOIN cluster_nodes n ON n.name = l.node
			WHERE l.device_id = $1 AND l.ended_at IS NULL AND n.seen_at > now() - make_interval(secs => $2)`, int64(deviceID), live.Seconds()).Scan(&node)
		if errors.Is(e, pgx.ErrNoRows) {
			return nil
		}
		ok = e == nil
		return e
	})
	return node, ok, err
}

// OrphanLinks answers the devices whose link has not ended but whose node
// is not live (it died without closing them): their presence is checked
// again by a live node.
func (s *Store) OrphanLinks(live time.Duration) ([]uint64, error) {
	var ids []uint64
	err := s.read("orphan links", func(t *txn) error {
		rows, err := t.query(`SELECT l.device_id FROM device_links l LEFT JOIN cluster_nodes n ON n.name = l.node
			WHERE l.ended_at IS NULL AND (n.name IS NULL OR n.seen_at <= now() - make_interval(secs => $1))
			ORDER BY l.device_id LIMIT 1000`, live.Seconds())
		if err != nil {
			return err
		}
		ids, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (uint64, error) {
			var id int64
			err := r.Scan(&id)
			return uint64(id), err
		})
		return err
	})
	return ids, err
}

// DatabaseTime is the database server's clock now (clock_timestamp()), read
// in one round trip, outside a transaction: the nodes of a cluster time
// their work by it (cluster.Clock), so that one node's wrong clock moves no
// schedule of the others. It waits at most clockTimeout: a reading that
// slow measures nothing useful, and the beat loop that asks must not hang
// on it.
func (s *Store) DatabaseTime() (time.Time, error) {
	ctx, cancel := context.WithTimeout(s.ctx, clockTimeout)
	defer cancel()
	var at time.Time
	if err := s.pool.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&at); err != nil {
		return time.Time{}, fmt.Errorf("store: read the database's clock: %w", s.closed(err))
	}
	return at, nil
}
