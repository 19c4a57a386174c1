package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	bolt "go.etcd.io/bbolt"
)

// Snapshot is a consistent copy of the store in a temporary file, open at its
// start. It holds no transaction: a slow reader of it holds nothing of the store.
type Snapshot struct {
	*os.File
	// Size is the copy's length in bytes.
	Size     int64
	name     string
	unlinked bool
}

// Close closes the copy and deletes its file.
func (s *Snapshot) Close() error {
	err := s.File.Close()
	if !s.unlinked {
		if rerr := os.Remove(s.name); err == nil && !os.IsNotExist(rerr) {
			err = rerr
		}
	}
	return err
}

// Snapshot copies the store into a new temporary file in dir (the data
// directory when empty) inside one read transaction, ends the transaction,
// and hands the copy back for streaming. A read transaction held while a
// network client reads would block bbolt's remap, so the file could not grow
// and every write would wait for that client; copying to a local file bounds
// the transaction by disk speed instead.
//
// Where the system allows it the file is unlinked at once, so it never
// outlives the process (not even a crash); elsewhere Close deletes it.
func (s *Store) Snapshot(dir string) (*Snapshot, error) {
	if dir == "" {
		dir = filepath.Dir(s.path)
	}
	if err := s.roomForSnapshot(dir); err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(dir, ".simrelay-snapshot-*.tmp")
	if err != nil {
		return nil, fmt.Errorf("store: snapshot: %w", err)
	}
	snap := &Snapshot{File: f, name: f.Name()}
	snap.unlinked = os.Remove(f.Name()) == nil
	err = s.db.View(func(tx *bolt.Tx) error {
		var werr error
		snap.Size, werr = tx.WriteTo(f)
		return werr
	})
	if err == nil {
		_, err = f.Seek(0, 0)
	}
	if err != nil {
		_ = snap.Close()
		return nil, fmt.Errorf("store: snapshot: %w", err)
	}
	return snap, nil
}

// ErrNoRoom is returned by Snapshot when the copy would leave the file
// system too full for the store to go on growing.
var ErrNoRoom = errors.New("store: not enough free disk space for a snapshot")

// SnapshotHeadroom is the free space a snapshot must leave behind on its file
// system, beyond its own size, so that a backup never takes the room every
// company's writes need: 64 MiB, or a tenth of the store when that is more.
func SnapshotHeadroom(storeSize int64) uint64 {
	return max(64<<20, uint64(storeSize)/10)
}

// roomForSnapshot refuses a snapshot into dir that would leave less than
// SnapshotHeadroom free.
func (s *Store) roomForSnapshot(dir string) error {
	free, ok := freeBytes(dir)
	if !ok {
		return nil
	}
	var size int64
	if err := s.db.View(func(tx *bolt.Tx) error { size = tx.Size(); return nil }); err != nil {
		return fmt.Errorf("store: snapshot: %w", err)
	}
	return checkRoom(dir, free, size)
}

// checkRoom says whether free bytes in dir hold a copy of size bytes and
// the headroom behind it.
func checkRoom(dir string, free uint64, size int64) error {
	if need := uint64(size) + SnapshotHeadroom(size); free < need {
		return fmt.Errorf("%w: the copy needs %d bytes and %d more must stay free in %s; %d are free", ErrNoRoom, size, SnapshotHeadroom(size), dir, free)
	}
	return nil
}
