package boltstore

import (
	"fmt"
	"os"
	"path/filepath"

	bolt "go.etcd.io/bbolt"
)

// Snapshot copies the store into a new temporary file in dir (the data
// directory when empty) inside one read transaction, ends the transaction,
// and hands the copy back for streaming. A read transaction held while a
// network client reads would block bbolt's remap, so the file could not grow
// and every write would wait for that client; copying to a local file bounds
// the transaction by disk speed instead.
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
	snap := NewSnapshot(f)
	err = s.view(func(tx *bolt.Tx) error {
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

// roomForSnapshot refuses a snapshot into dir that would leave less than
// SnapshotHeadroom free.
func (s *Store) roomForSnapshot(dir string) error {
	free, ok := freeBytes(dir)
	if !ok {
		return nil
	}
	var size int64
	if err := s.view(func(tx *bolt.Tx) error { size = tx.Size(); return nil }); err != nil {
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
