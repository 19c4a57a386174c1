package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/simrelay/simrelay/internal/ownprocess"
	"golang.org/x/sys/unix"
)

// A backup into a directory where no file can be made (its permissions; as
// root too: /proc takes no new file) named the temporary copy the command
// made up ("open /proc/.simrelay-backup-123: no such file or directory"),
// not FILE, and did not say whether anything was written.
func TestAdminBackupIntoADirectoryItCannotWriteNamesFILE(t *testing.T) {
	t.Parallel()
	src := emptyStoreDir(t)
	file := "/proc/simrelay-backup.db"
	code, out, errOut := runAdmin(t, "backup", file, "--data-dir", src)
	want := "write the backup " + file + ": cannot create a file in /proc: "
	if code != 1 || out != "" || !strings.Contains(errOut, want) || !strings.HasSuffix(strings.TrimSpace(errOut), "; nothing was written") ||
		strings.Contains(errOut, backupPattern[:len(backupPattern)-1]) {
		t.Errorf("backup %s: exit %d %q %q, want 1 with %q, ending in nothing was written, no temporary name", file, code, out, errOut, want)
	}
}

// A backup that the disk cannot take (full, a quota, a file size limit)
// said "write /backups/.simrelay-backup-123: no space left on device":
// the temporary copy's name, and not whether FILE was written. It must name
// FILE and say nothing was written (the copy is removed). The file size
// limit is the process's, so the test runs in a process of its own.
func TestAdminBackupOnAFullDiskSaysNothingWasWritten(t *testing.T) {
	if !ownprocess.Run(t) {
		return
	}
	src := emptyStoreDir(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "b.db")
	// Under the store's size: the copy's writes fail with EFBIG (Go ignores SIGXFSZ).
	if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: 8192, Max: unix.RLIM_INFINITY}); err != nil {
		t.Skipf("no file size limit here: %v", err)
	}
	code, out, errOut := runAdmin(t, "backup", file, "--data-dir", src)
	want := "write the backup " + file + ": file too large; nothing was written"
	if code != 1 || out != "" || !strings.Contains(errOut, want) || strings.Contains(errOut, backupPattern[:len(backupPattern)-1]) {
		t.Errorf("backup on a full disk: exit %d %q %q, want 1 with %q and no temporary name", code, out, errOut, want)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) > 0 {
		t.Errorf("files left behind: %v", left)
	}
}
