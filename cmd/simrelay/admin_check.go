package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/simrelay/simrelay/store/boltstore"
)

const checkUsage = "Usage: simrelay admin check [--data-dir D]\n\n" +
	"Walks every page of the embedded store of --data-dir with bbolt's own\n" +
	"consistency check, the server stopped, and says whether the file is whole.\n" +
	"A start checks the file's headers, size and the pages every request\n" +
	"stands on; damage deeper in the file (a bad disk block) is found here.\n" +
	"It reads the whole file: about four seconds per GB from the page cache,\n" +
	"longer from a cold disk. Exits 1 when the file is damaged.\n\n"

// adminCheck is simrelay admin check: the walk a start leaves out, for an
// operator who suspects the disk (docs/operations.md).
func adminCheck(args []string, stdout, stderr io.Writer) error {
	fs, where := adminFlags("check", stderr)
	fs.Usage = flagUsage(fs, checkUsage)
	if err := parseFlags(fs, args, 0); err != nil {
		return usageOrHelp(err)
	}
	if where.postgres() {
		return usageError{fmt.Errorf("the store is in the PostgreSQL database %s: PostgreSQL checks its own pages (data checksums, amcheck); admin check reads the embedded store of --data-dir only", where.databaseURL)}
	}
	if err := storeFileExists(where.dataDir); err != nil {
		return err
	}
	path := filepath.Join(where.dataDir, boltstore.FileName)
	start := time.Now()
	err := boltstore.Check(path)
	if errors.Is(err, boltstore.ErrLocked) {
		return fmt.Errorf("%w; or check a copy: GET /admin/backup with its --admin-token, then simrelay admin check on a directory holding it", err)
	}
	if err != nil {
		return err
	}
	size := int64(0)
	if fi, err := os.Stat(path); err == nil {
		size = fi.Size()
	}
	fmt.Fprintf(stdout, "%s is whole: every page checked (%d bytes in %s)\n", path, size, time.Since(start).Round(time.Millisecond))
	return nil
}
