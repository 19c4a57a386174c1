//go:build unix

package main

import (
	"io"
	"os"
	"path/filepath"
	"testing"
)

// Two backups into one directory at once (two servers' stores, at the same
// hour of a cron): the second leaves the copy the first is still writing,
// which it removed as a killed one's, and the first failed its rename.
func TestAdminBackupLeavesALiveBackupsCopy(t *testing.T) {
	t.Parallel()
	src := emptyStoreDir(t)
	dir := t.TempDir()
	live, err := os.CreateTemp(dir, backupPattern)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	release, err := holdCopy(live.Name())
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if err := adminBackup([]string{filepath.Join(dir, "b.db"), "--data-dir", src}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(live.Name()); err != nil {
		t.Errorf("the copy a running backup writes: %v, want it kept", err)
	}
	release()
	if err := adminBackup([]string{filepath.Join(dir, "c.db"), "--data-dir", src}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(live.Name()); !os.IsNotExist(err) {
		t.Errorf("the copy once its backup is gone: %v, want it removed", err)
	}
}
