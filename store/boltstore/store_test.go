package boltstore

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func open(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestOpenLockedFailsFast(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	open(t, dir)
	// A second open of a held file must give up at the timeout with a clear error.
	_, err := Open(dir, Options{Timeout: 200 * time.Millisecond})
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("got %v, want ErrLocked", err)
	}
	_, err = Open(dir, Options{Timeout: 200 * time.Millisecond, ReadOnly: true})
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("read-only open of a held store: got %v, want ErrLocked", err)
	}
}

// TestOpenLockWaitFitsTheAdminPromise: the contract (section 0) and
// simrelay admin -h promise that an admin command on a store a running
// server holds fails within 2 s. The lock wait is most of that time, and
// the command's own start and its message come on top of it (2.07 s in
// all with a 2 s wait, on a loaded machine), so the wait leaves them half
// a second.
func TestOpenLockWaitFitsTheAdminPromise(t *testing.T) {
	t.Parallel()
	const promised, startRoom = 2 * time.Second, 500 * time.Millisecond
	if DefaultOpenTimeout+startRoom > promised {
		t.Errorf("DefaultOpenTimeout is %v: with %v for the command's start and message, a held store is refused after %v, past the %v promised",
			DefaultOpenTimeout, startRoom, DefaultOpenTimeout+startRoom, promised)
	}
}

func TestReadOnlyNeedsFile(t *testing.T) {
	t.Parallel()
	if _, err := Open(t.TempDir(), Options{ReadOnly: true}); err == nil {
		t.Fatal("read-only open of an empty directory succeeded")
	}
}

func TestSchemaVersionAndNewerFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	v, err := s.Version()
	if err != nil || v != SchemaVersion() {
		t.Fatalf("got version %d (%v), want %d", v, err, SchemaVersion())
	}
	s.Close()
	// A file written by a newer build is refused rather than misread, and
	// left as it was, byte for byte: a newer schema may have dropped a
	// bucket this build has (here, webhook_log_sizes), which the refused
	// open must not write back, nor commit anything else.
	for _, c := range []struct {
		name     string
		key      []byte
		value    uint64
		wantText string
	}{
		{"a newer schema version", keySchemaVersion, SchemaVersion() + 1, "newer than this build's"},
		{"half way through a newer migration", keyMigrating, SchemaVersion(), "which this build does not have"},
	} {
		dir := t.TempDir()
		s := open(t, dir)
		if err := s.db.Update(func(tx *bolt.Tx) error {
			if err := tx.DeleteBucket(bucketWebhookLogSizes); err != nil {
				return err
			}
			return tx.Bucket(bucketMeta).Put(c.key, itob(c.value))
		}); err != nil {
			t.Fatal(err)
		}
		s.Close()
		path := filepath.Join(dir, FileName)
		before, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if s, err := Open(dir, Options{}); err == nil {
			s.Close()
			t.Fatalf("%s: opened", c.name)
		} else if !strings.Contains(err.Error(), c.wantText) || !strings.Contains(err.Error(), "run a newer simrelay") {
			t.Errorf("%s: got %v, want it refused saying %q", c.name, err, c.wantText)
		}
		after, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(before, after) {
			t.Errorf("%s: the refused open changed the file", c.name)
		}
	}
}

// A secret outlives the process that made it (the suite's Secrets case
// holds it stable within one).
func TestSecretSurvivesReopen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, _ := Open(dir, Options{})
	a, err := s.Secret("jwt", 32)
	if err != nil || len(a) != 32 {
		t.Fatalf("got %d bytes (%v), want 32", len(a), err)
	}
	s.Close()
	s = open(t, dir)
	b, _ := s.Secret("jwt", 32)
	if !bytes.Equal(a, b) {
		t.Fatal("the secret changed across a reopen")
	}
}

func newCompany(t *testing.T, s *Store, email, keyHash string) (Company, User) {
	t.Helper()
	c := Company{Name: "Acme", APIKeyHash: []byte(keyHash)}
	u := User{FirstName: "Ana", Email: email, PasswordHash: "set"}
	if err := s.CreateCompany(&c, &u); err != nil {
		t.Fatal(err)
	}
	return c, u
}

func TestBackupIsAStore(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	c, _ := newCompany(t, s, "a@example.com", "h")
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	n, err := s.Backup(f)
	f.Close()
	if err != nil || n == 0 {
		t.Fatalf("backup wrote %d bytes: %v", n, err)
	}
	copyStore := open(t, dir)
	if got, err := copyStore.Company(c.ID); err != nil || got.Name != "Acme" {
		t.Fatalf("the backup lacks the company: %+v %v", got, err)
	}
}

// A bbolt database of another program is refused, not adopted.
func TestForeignBoltFileIsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db, err := bolt.Open(filepath.Join(dir, FileName), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("foo")); return err }); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir, Options{})
	if err == nil {
		s.Close()
		t.Fatal("another program's bbolt file was opened; want it refused")
	}
	if !errors.Is(err, ErrBadFile) || !strings.Contains(err.Error(), `"foo"`) {
		t.Fatalf("got %v, want ErrBadFile naming the bucket", err)
	}
	db, err = bolt.Open(filepath.Join(dir, FileName), 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_ = db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketMeta) != nil {
			t.Error("simrelay's buckets were written into the other file")
		}
		return nil
	})
}
