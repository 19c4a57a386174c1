//go:build unix

package boltstore

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A data file the server cannot open (its permissions, a link that leads
// nowhere) was named twice in the error: "store: open D/simrelay.db: open
// D/simrelay.db: permission denied". A link to itself stands for any such
// file here, since root opens a file whatever its permissions.
func TestOpenErrorNamesTheFileOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	if err := os.Symlink(path, path); err != nil {
		t.Skipf("no symbolic link here: %v", err)
	}
	st, err := Open(dir, Options{})
	if err == nil {
		st.Close()
		t.Fatal("a data file that cannot be opened: opened")
	}
	if n := strings.Count(err.Error(), path); n != 1 {
		t.Errorf("the error %q names the file %d times, want once", err, n)
	}
}
