package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/simrelay/simrelay/store/boltstore"
)

// The store of --data-dir given as its own backup FILE (the operator read
// FILE as the store to copy) was written over with its own copy, and the
// operator was told a backup was written: there was none beside the store.
// It is refused, nothing written, with exit 1, as restore refuses it: what
// the paths name on the disk (the data dir through a symbolic link too). A
// hard link to the store elsewhere is another name, which the copy replaces,
// leaving the store alone: that one is a backup.
func TestAdminBackupOntoTheStoreItselfExits1(t *testing.T) {
	t.Parallel()
	dir := emptyStoreDir(t)
	live := filepath.Join(dir, boltstore.FileName)
	before, err := os.Stat(live)
	if err != nil {
		t.Fatal(err)
	}
	files := []string{live}
	alias := filepath.Join(t.TempDir(), "data")
	if err := os.Symlink(dir, alias); err == nil {
		files = append(files, filepath.Join(alias, boltstore.FileName))
	}
	for _, file := range files {
		code, out, errOut := runAdmin(t, "backup", file, "--data-dir", dir)
		if code != 1 || out != "" || !strings.Contains(errOut, file+" is the store of --data-dir "+dir+" itself: name another file; nothing was written") {
			t.Errorf("backup %s: exit %d %q %q, want 1 saying it is the store itself", file, code, out, errOut)
		}
	}
	after, err := os.Stat(live)
	if err != nil || !os.SameFile(before, after) {
		t.Errorf("the store file after the refused backups: %v, want the same file left in place", err)
	}
	link := filepath.Join(t.TempDir(), "backup.db")
	if err := os.Link(live, link); err != nil {
		return
	}
	if code, _, errOut := runAdmin(t, "backup", link, "--data-dir", dir); code != 0 {
		t.Errorf("backup onto a hard link of the store: exit %d %q, want 0", code, errOut)
	}
	if after, err := os.Stat(live); err != nil || !os.SameFile(before, after) {
		t.Errorf("the store file after a backup onto its hard link: %v, want it left in place", err)
	}
}
