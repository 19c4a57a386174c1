package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/simrelay/simrelay/internal/durable"
	"github.com/simrelay/simrelay/store/boltstore"
)

const restoreUsage = "Usage: simrelay admin restore FILE [--data-dir D]\n\n" +
	"Puts a backup (simrelay admin backup, GET /admin/backup) in place as the\n" +
	"embedded store of --data-dir, with the server stopped: a store a running\n" +
	"server holds is refused. The backup is checked first (a truncated or\n" +
	"damaged one is refused, nothing changed); the store it replaces is kept\n" +
	"beside it as simrelay.db.before-restore-TIME.\n\n"

// errStoreInUse is a store file another process holds (lockStoreFile).
var errStoreInUse = errors.New("the data file is in use by another process")

// adminRestore is simrelay admin restore. Copying a backup over a running
// server's file by hand rewrites pages under the server, and moving one
// over it leaves the server on a file no path names (boltstore's
// fileguard refuses its writes then); the command refuses both by taking
// the file's lock, which the server holds while it runs, before anything.
func adminRestore(args []string, stdout, stderr io.Writer) error {
	fs, where := adminFlags("restore", stderr)
	fs.Usage = flagUsage(fs, restoreUsage)
	file, err := parseFileFlags(fs, args)
	if err != nil {
		return err
	}
	if where.postgres() {
		return usageError{fmt.Errorf("the store is in the PostgreSQL database %s: restore a pg_dump with pg_restore (docs/operations.md); admin restore puts back the embedded store of --data-dir only", where.databaseURL)}
	}
	if file == "" {
		return usageError{errors.New("name the backup FILE to restore")}
	}
	if err := boltstore.Verify(file); err != nil {
		return fmt.Errorf("the backup %s: %w", file, err)
	}
	if err := os.MkdirAll(where.dataDir, 0o700); err != nil {
		return fmt.Errorf("data dir %s: %w", where.dataDir, err)
	}
	live := filepath.Join(where.dataDir, boltstore.FileName)
	kept := ""
	if fi, err := os.Stat(live); err == nil {
		// The store itself given as its backup would be copied onto itself
		// and a needless copy kept beside it. Found on the disk (a link or
		// a second name of the file too): exit 1, not a usage error.
		if bi, err := os.Stat(file); err == nil && os.SameFile(fi, bi) {
			return fmt.Errorf("%s is the store of --data-dir %s itself, not a backup of it; nothing was changed", file, where.dataDir)
		}
		unlock, err := lockStoreFile(live)
		if errors.Is(err, errStoreInUse) {
			return fmt.Errorf("%w (is a simrelay server running on it? stop it first: a restore replaces the file under it); nothing was changed", err)
		}
		if err != nil {
			return err
		}
		defer unlock()
		kept = live + ".before-restore-" + time.Now().UTC().Format("20060102T150405Z")
	} else if !errors.Is(err, os.ErrNotExist) {
		// A store that is there but cannot be looked at must not be
		// replaced unlocked and without its copy kept.
		return fmt.Errorf("look at the store %s: %w; nothing was changed", live, err)
	}
	// The copy goes next to the store, so the one rename that puts it in
	// place is atomic: the data dir holds the old store or the whole
	// backup, never a part of it. Until that rename nothing but the copy
	// and the old store's second name exist, and a failure removes both.
	removeKilledCopies(where.dataDir, stagedPattern)
	staged, n, err := stageCopy(file, where.dataDir)
	if err != nil {
		return fmt.Errorf("copy %s into %s: %w; nothing was changed", file, where.dataDir, err)
	}
	if kept != "" {
		if err := os.Link(live, kept); err != nil {
			_ = os.Remove(staged)
			return fmt.Errorf("keep the current store as %s: %w; nothing was changed", kept, err)
		}
	}
	if err := os.Rename(staged, live); err != nil {
		_ = os.Remove(staged)
		if kept != "" {
			_ = os.Remove(kept) // a second name of the store left in place
		}
		return fmt.Errorf("put the backup in place as %s: %w; nothing was changed", live, err)
	}
	if err := durable.SyncDir(where.dataDir); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "restored %s (%d bytes) as %s\n", file, n, live)
	if kept != "" {
		fmt.Fprintf(stdout, "the store it replaced is kept as %s: delete it once the server runs well on the backup\n", kept)
	}
	return nil
}

// stagedPattern names a restore's copy in the data directory until its
// rename; nothing else uses such a name.
const stagedPattern = ".simrelay-restore-*"

// removeKilledCopies removes the copies named by pattern that commands
// killed before their rename (Ctrl-C, kill -9) left in dir, each as large
// as a store: no process removes them otherwise. A copy a live command
// holds (holdCopy: a backup into the same directory) is left to it; a
// restore running beside this one (possible only while there is no store
// to lock) whose copy goes with them fails its rename and says so. The
// pattern matches names in dir, never dir's own path: a directory named
// "data[1]" or "a*" is a path, not a pattern.
func removeKilledCopies(dir, pattern string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if ok, _ := filepath.Match(pattern, e.Name()); !ok || !e.Type().IsRegular() {
			continue
		}
		if f := filepath.Join(dir, e.Name()); !copyHeld(f) {
			_ = os.Remove(f)
		}
	}
}

// stageCopy copies file into a new file of dir and syncs it, returning its
// path and size; on failure it leaves nothing behind.
func stageCopy(file, dir string) (staged string, n int64, err error) {
	src, err := os.Open(file)
	if err != nil {
		return "", 0, err
	}
	defer src.Close()
	tmp, err := os.CreateTemp(dir, stagedPattern)
	if err != nil {
		return "", 0, err
	}
	n, err = io.Copy(tmp, src)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return "", 0, err
	}
	return tmp.Name(), n, nil
}
