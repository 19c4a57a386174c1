//go:build unix

package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A backup FILE that is there and is neither a file nor a directory (a
// device such as /dev/null, a FIFO, a socket) is refused before the copy,
// exit 1, and left as it was: the copy's rename put a plain file in its
// place (admin backup /dev/null, run as root, replaced the device).
func TestAdminBackupLeavesASpecialFileAlone(t *testing.T) {
	t.Parallel()
	src := emptyStoreDir(t)
	fifo := filepath.Join(t.TempDir(), "pipe")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	code, _, errOut := runAdmin(t, "backup", fifo, "--data-dir", src)
	want := fifo + " is not a regular file: name a file to write; nothing was written"
	if code != 1 || !strings.Contains(errOut, want) {
		t.Errorf("backup %s: exit %d %q, want 1 and %q", fifo, code, errOut, want)
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the FIFO is now %v (%v)", fi.Mode(), err)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(fifo), backupPattern)); len(left) > 0 {
		t.Errorf("copies left behind: %v", left)
	}
}
