package boltstore

import (
	"errors"
	"fmt"
	"os"

	bolt "go.etcd.io/bbolt"

	"github.com/simrelay/simrelay/store"
)

// A data file deleted or replaced under a running server (its directory
// removed by a cleanup script, a backup moved over it) stays open and
// writable in this process, and every write to it still commits: a send
// answered 2xx then is in a file that no path names, gone the moment the
// process ends, and a restart starts an empty store or the replacement. So
// every write first checks that the path still names the file the store
// opened, one stat(2) per commit (a group commit carries many sends), next
// to the fsync it precedes; a missing or other file refuses the write with
// store.ErrDataFile (the API's 503, nothing done) and fails /readyz. The
// store still reads, and GET /admin/backup still copies the open file, so
// the operator can take its data out before restarting (README).

// fileGuard remembers the data file as Open found it.
type fileGuard struct {
	path string
	id   os.FileInfo // nil: not guarded (a read-only open)
}

func newFileGuard(path string) (fileGuard, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileGuard{}, fmt.Errorf("store: stat %s: %w", path, err)
	}
	return fileGuard{path: path, id: fi}, nil
}

// check answers nil while the path names the opened file.
func (g fileGuard) check() error {
	if g.id == nil {
		return nil
	}
	fi, err := os.Stat(g.path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("%w: the data file %s was deleted while the server ran (its directory too?), so nothing written now would outlive this process; nothing was written. Take the data out with GET /admin/backup (recreate the directory first if it is gone), stop the server, put the backup in place as %s and start it again", store.ErrDataFile, g.path, FileName)
	case err != nil:
		return fmt.Errorf("%w: the data file %s cannot be checked: %v; nothing was written", store.ErrDataFile, g.path, err)
	case !os.SameFile(fi, g.id):
		return fmt.Errorf("%w: the data file %s was replaced by another file while the server ran; nothing was written. Stop the server before restoring a backup: the replacement is used from the next start", store.ErrDataFile, g.path)
	}
	return nil
}

// update is db.Update behind the file check, its commit seen by the
// disk-full watch (diskfull.go): every write of the store but
// the group commit's (which checks per batch) goes through it.
func (s *Store) update(fn func(*bolt.Tx) error) error {
	if err := s.guard.check(); err != nil {
		return err
	}
	err, full := s.space.committed(closedErr(s.db.Update(fn)))
	if full && err == nil {
		s.space.probe()
	}
	return err
}
