//go:build unix

package pgtest

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// The kept initdb result lies in a directory every user writes to
// (/dev/shm, or the temporary directory), under a name anyone can compute:
// a cluster starts from it only when it is a directory of the user the
// cluster runs as that no other user may write to. Another user's, or one
// others may change, could carry a configuration (a library to load, an
// archive command) that the test binary's server would run as its user:
// initdb makes the cluster's directory instead.
func TestInitDataRefusesAKeptDirectoryNotItsOwn(t *testing.T) {
	t.Parallel()
	bin, err := binDir(os.Getenv("PATH"), debianBinaries)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		plant func(t *testing.T, kept string, cred *syscall.Credential)
	}{
		{"writable by others", func(t *testing.T, kept string, cred *syscall.Credential) {
			plantData(t, kept, cred)
			if err := os.Chmod(kept, 0o777); err != nil {
				t.Fatal(err)
			}
		}},
		{"a link", func(t *testing.T, kept string, cred *syscall.Credential) {
			elsewhere := filepath.Join(filepath.Dir(kept), "elsewhere")
			plantData(t, elsewhere, cred)
			if err := os.Symlink(elsewhere, kept); err != nil {
				t.Fatal(err)
			}
		}},
		{"another user's", func(t *testing.T, kept string, cred *syscall.Credential) {
			if cred == nil {
				t.Skip("not root: a directory of another user cannot be made")
			}
			plantData(t, kept, nil) // root's, while the cluster runs as nobody
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			base, dir, cred := clusterDirs(t)
			key, err := initDataKey(bin, cred)
			if err != nil {
				t.Fatal(err)
			}
			tc.plant(t, filepath.Join(base, dirPrefix+"initdb-"+key), cred)
			data := filepath.Join(dir, "data")
			if err := initData(context.Background(), bin, base, dir, data, cred); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(data, "planted")); err == nil {
				t.Fatal("the cluster's directory is a copy of the planted one")
			}
			if _, err := os.Stat(filepath.Join(data, "PG_VERSION")); err != nil {
				t.Fatalf("initdb did not make the cluster's directory: %v", err)
			}
		})
	}
}

// clusterDirs makes a test's base directory and a cluster directory in it
// as the package makes them, and the user the cluster runs as there: as
// root the cluster runs as nobody, who must reach base.
func clusterDirs(t *testing.T) (base, dir string, cred *syscall.Credential) {
	t.Helper()
	base = t.TempDir()
	for _, d := range []string{filepath.Dir(base), base} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dir, err := os.MkdirTemp(base, dirPrefix+"0-*")
	if err != nil {
		t.Fatal(err)
	}
	if cred, err = runAs(dir); err != nil {
		t.Fatal(err)
	}
	return base, dir, cred
}

// plantData makes dir look like a kept initdb result, with a file of its
// own, owned by cred's user (the caller's when nil).
func plantData(t *testing.T, dir string, cred *syscall.Credential) {
	t.Helper()
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"PG_VERSION", "planted"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("15\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if cred != nil {
		for _, p := range []string{dir, filepath.Join(dir, "PG_VERSION"), filepath.Join(dir, "planted")} {
			if err := os.Lchown(p, int(cred.Uid), int(cred.Gid)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// Once it keeps its initdb result, a binary removes the ones kept for
// other binaries (an older PostgreSQL) by the same user, and only those:
// another user's stay, though root may remove them.
func TestInitDataRemovesOnlyItsUsersOtherResults(t *testing.T) {
	t.Parallel()
	bin, err := binDir(os.Getenv("PATH"), debianBinaries)
	if err != nil {
		t.Fatal(err)
	}
	base, dir, cred := clusterDirs(t)
	own := filepath.Join(base, dirPrefix+"initdb-older")
	plantData(t, own, cred)
	theirs := filepath.Join(base, dirPrefix+"initdb-theirs")
	if cred != nil {
		// Another user's: neither root's nor the cluster's.
		plantData(t, theirs, &syscall.Credential{Uid: cred.Uid + 4242, Gid: cred.Gid})
	}
	if err := initData(context.Background(), bin, base, dir, filepath.Join(dir, "data"), cred); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(own); !os.IsNotExist(err) {
		t.Errorf("the same user's older result: %v, want it removed", err)
	}
	if cred == nil {
		t.Skip("not root: a directory of another user cannot be made")
	}
	if _, err := os.Stat(filepath.Join(theirs, "planted")); err != nil {
		t.Errorf("another user's result: %v, want it kept", err)
	}
}
