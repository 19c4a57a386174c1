package store

import (
	"errors"
	"os"
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

// NewSnapshot makes f, a new temporary file a backend copies itself into,
// a Snapshot. Where the system allows it the file is unlinked at once, so it
// never outlives the process (not even a crash); elsewhere Close deletes it.
func NewSnapshot(f *os.File) *Snapshot {
	return &Snapshot{File: f, name: f.Name(), unlinked: os.Remove(f.Name()) == nil}
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

// ErrNoRoom is returned by Snapshot when the copy would leave the file
// system too full for the store to go on growing.
var ErrNoRoom = errors.New("store: not enough free disk space for a snapshot")

// SnapshotHeadroom is the free space a snapshot must leave behind on its file
// system, beyond its own size, so that a backup never takes the room every
// company's writes need: 64 MiB, or a tenth of the store when that is more.
func SnapshotHeadroom(storeSize int64) uint64 {
	return max(64<<20, uint64(storeSize)/10)
}
