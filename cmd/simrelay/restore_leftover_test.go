package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/simrelay/simrelay/store/boltstore"
)

// A restore killed during its copy (Ctrl-C, kill -9) leaves the copy in
// the data directory, as large as the backup, under a name nothing else
// uses: the next restore removes it, whether or not a store is there yet.
func TestAdminRestoreRemovesAKilledRestoresCopy(t *testing.T) {
	t.Parallel()
	src := emptyStoreDir(t)
	backup := filepath.Join(src, boltstore.FileName)
	dir := t.TempDir()
	for round, what := range []string{"into an empty directory", "over a store"} {
		left := filepath.Join(dir, ".simrelay-restore-killed"+string(rune('0'+round)))
		if err := os.WriteFile(left, []byte("half a copy"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := adminRestore([]string{backup, "--data-dir", dir}, io.Discard, io.Discard); err != nil {
			t.Fatalf("restore %s: %v", what, err)
		}
		if _, err := os.Stat(left); !os.IsNotExist(err) {
			t.Errorf("restore %s: the killed restore's copy %s is still there (%v)", what, left, err)
		}
		if err := boltstore.Verify(filepath.Join(dir, boltstore.FileName)); err != nil {
			t.Errorf("restore %s: the store: %v", what, err)
		}
	}
}

// A backup killed before its rename leaves its copy beside FILE, as large
// as the store, under a name nothing else uses: the next backup into that
// directory removes it, and leaves the directory's other files alone.
func TestAdminBackupRemovesAKilledBackupsCopy(t *testing.T) {
	t.Parallel()
	src := emptyStoreDir(t)
	dir := t.TempDir()
	left, other := filepath.Join(dir, ".simrelay-backup-killed"), filepath.Join(dir, "notes.txt")
	for _, p := range []string{left, other} {
		if err := os.WriteFile(p, []byte("half a copy"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	backup := filepath.Join(dir, "b.db")
	if err := adminBackup([]string{backup, "--data-dir", src}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(left); !os.IsNotExist(err) {
		t.Errorf("the killed backup's copy %s is still there (%v)", left, err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("another file of the directory: %v, want it kept", err)
	}
	if err := boltstore.Verify(backup); err != nil {
		t.Errorf("the backup: %v", err)
	}
}

// emptyStoreDir is a data directory holding a new, empty embedded store.
func emptyStoreDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	st, err := boltstore.Open(dir, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// A backup FILE that is a directory, or in a directory that is not there,
// is refused before the copy, naming FILE: the first was copied whole and
// then failed its rename ("rename .simrelay-backup-123 /backups/: file
// exists"), the second named the temporary copy it could not create. Both
// exit 1, what the command found on the disk, as a file given as the
// --data-dir does; 2 is a command line wrong in itself (no FILE). A
// directory as FILE exited 2 and a missing directory 1.
func TestAdminBackupNamesAFileItCannotWrite(t *testing.T) {
	t.Parallel()
	src := emptyStoreDir(t)
	dir := t.TempDir()
	missing := filepath.Join(dir, "no-such-dir", "b.db")
	notDir := filepath.Join(dir, "a-file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		file string
		code int
		want string
	}{
		{dir + "/", 1, dir + "/ is a directory: name the file to write, such as " + filepath.Join(dir, "simrelay-backup.db")},
		{missing, 1, "the directory of " + missing + ": stat " + filepath.Dir(missing) + ": no such file or directory; nothing was written"},
		{filepath.Join(notDir, "b.db"), 1, "the directory of " + filepath.Join(notDir, "b.db") + ": " + notDir + " is not a directory"},
		{"", 2, "name the FILE to write"},
	} {
		code, _, errOut := runAdmin(t, "backup", tc.file, "--data-dir", src)
		if code != tc.code || !strings.Contains(errOut, tc.want) || strings.Contains(errOut, backupPattern[:len(backupPattern)-1]) {
			t.Errorf("backup %s: exit %d %q, want %d and %q", tc.file, code, errOut, tc.code, tc.want)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, backupPattern)); len(left) > 0 {
		t.Errorf("copies left behind: %v", left)
	}
}

// The store of --data-dir given as its own backup is refused, nothing
// changed, with exit 1, as a backup FILE that is a directory: what the
// paths name on the disk, found by looking (a link or a second name of the
// store file too), not a command line wrong in itself (it exited 2).
func TestAdminRestoreOfTheStoreItselfExits1(t *testing.T) {
	t.Parallel()
	dir := emptyStoreDir(t)
	live := filepath.Join(dir, boltstore.FileName)
	link := filepath.Join(t.TempDir(), "backup.db")
	if err := os.Link(live, link); err != nil {
		t.Skipf("no hard link here: %v", err)
	}
	for _, file := range []string{live, link} {
		code, _, errOut := runAdmin(t, "restore", file, "--data-dir", dir)
		if code != 1 || !strings.Contains(errOut, "itself, not a backup of it; nothing was changed") {
			t.Errorf("restore %s: exit %d %q, want 1 saying it is the store itself", file, code, errOut)
		}
	}
}

// The directory's path is a path, never a pattern: a data directory named
// "data[1]" has its killed copies removed, and a restore into "a*" leaves
// alone the copies of "ab" beside it (another command's, maybe in use).
func TestKilledCopiesOfTheDirectoryOnly(t *testing.T) {
	t.Parallel()
	parent := t.TempDir()
	dir, sibling := filepath.Join(parent, "data[1]"), filepath.Join(parent, "data1")
	for _, d := range []string{dir, sibling} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, ".simrelay-restore-killed"), []byte("half a copy"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	removeKilledCopies(dir, stagedPattern)
	if _, err := os.Stat(filepath.Join(dir, ".simrelay-restore-killed")); !os.IsNotExist(err) {
		t.Errorf("the copy in %s is still there (%v)", dir, err)
	}
	if _, err := os.Stat(filepath.Join(sibling, ".simrelay-restore-killed")); err != nil {
		t.Errorf("the copy in %s beside it: %v, want it kept", sibling, err)
	}
}
