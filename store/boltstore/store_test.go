package boltstore

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
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
	// A file written by a newer build is refused rather than misread.
	if err := s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(keySchemaVersion, itob(SchemaVersion()+1))
	}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := Open(dir, Options{}); err == nil {
		t.Fatal("opened a store with a newer schema version")
	}
}

func TestSecretIsStable(t *testing.T) {
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
	c, _ := s.Secret("other", 32)
	if bytes.Equal(a, c) {
		t.Fatal("two secrets are equal")
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

func TestCompanyAndUsers(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	c, admin := newCompany(t, s, "Ana@Example.com", "h1")
	if c.ID == 0 || admin.ID == 0 || admin.CompanyID != c.ID || admin.Role != RoleAdmin {
		t.Fatalf("got company %+v admin %+v", c, admin)
	}
	if _, err := s.UserByEmail("ana@example.COM"); err != nil {
		t.Fatalf("e-mail lookup must ignore case: %v", err)
	}
	dup := User{CompanyID: c.ID, Email: "ana@example.com"}
	if err := s.CreateUser(&dup); !errors.Is(err, ErrConflict) {
		t.Fatalf("duplicate e-mail: got %v, want ErrConflict", err)
	}
	got, err := s.CompanyByAPIKeyHash([]byte("h1"))
	if err != nil || got.ID != c.ID {
		t.Fatalf("by key hash: got %+v, %v", got, err)
	}

	// Rotating the key moves the index in the same commit.
	if _, err := s.UpdateCompany(c.ID, func(c *Company) error { c.APIKeyHash = []byte("h2"); return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CompanyByAPIKeyHash([]byte("h1")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("old key hash: got %v, want ErrNotFound", err)
	}
	if _, err := s.CompanyByAPIKeyHash([]byte("h2")); err != nil {
		t.Fatalf("new key hash: %v", err)
	}

	// The last admin can be neither demoted nor removed.
	if _, err := s.UpdateUser(admin.ID, func(u *User) error { u.Role = RoleMember; return nil }); !errors.Is(err, ErrLastAdmin) {
		t.Fatalf("demote last admin: got %v, want ErrLastAdmin", err)
	}
	if err := s.DeleteUser(admin.ID); !errors.Is(err, ErrLastAdmin) {
		t.Fatalf("delete last admin: got %v, want ErrLastAdmin", err)
	}
	// An invited admin who never set a password cannot stand in for the last one.
	invited := User{CompanyID: c.ID, Email: "cy@example.com", Role: RoleAdmin}
	if err := s.CreateUser(&invited); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteUser(admin.ID); !errors.Is(err, ErrLastAdmin) {
		t.Fatalf("delete the last admin who can sign in: got %v, want ErrLastAdmin", err)
	}
	if err := s.DeleteUser(invited.ID); err != nil {
		t.Fatal(err)
	}
	second := User{CompanyID: c.ID, Email: "bo@example.com", Role: RoleAdmin, PasswordHash: "set"}
	if err := s.CreateUser(&second); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateUser(admin.ID, func(u *User) error { u.Role = RoleMember; return nil }); err != nil {
		t.Fatalf("demote with another admin: %v", err)
	}
	if err := s.DeleteUser(second.ID); !errors.Is(err, ErrLastAdmin) {
		t.Fatalf("delete the remaining admin: got %v, want ErrLastAdmin", err)
	}
	if err := s.DeleteUser(admin.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UserByEmail("ana@example.com"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted user's e-mail: got %v, want ErrNotFound", err)
	}
	users, _ := s.CompanyUsers(c.ID)
	if len(users) != 1 || users[0].ID != second.ID {
		t.Fatalf("got users %+v, want only %d", users, second.ID)
	}

	// Another company's users are not listed.
	other, _ := newCompany(t, s, "x@other.com", "h3")
	if users, _ := s.CompanyUsers(other.ID); len(users) != 1 {
		t.Fatalf("got %d users for the other company, want 1", len(users))
	}
}

func TestRefreshRotation(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	_, u := newCompany(t, s, "a@example.com", "h")
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := s.StartRefreshFamily([]byte("t1"), RefreshToken{UserID: u.ID, Family: "f", ExpiresAt: now.Add(time.Hour)}, now); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RotateRefreshToken([]byte("t1"), []byte("t2"), now.Add(time.Hour), now); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RotateRefreshToken([]byte("t1"), []byte("t3"), now.Add(time.Hour), now); !errors.Is(err, ErrTokenReused) {
		t.Fatalf("reuse: got %v, want ErrTokenReused", err)
	}
	if _, err := s.RotateRefreshToken([]byte("t2"), []byte("t4"), now.Add(time.Hour), now); !errors.Is(err, ErrTokenRevoked) {
		t.Fatalf("after reuse the family is revoked: got %v, want ErrTokenRevoked", err)
	}
}

func TestRefreshRaceHasOneWinner(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	_, u := newCompany(t, s, "a@example.com", "h")
	now := time.Now()
	if err := s.StartRefreshFamily([]byte("t"), RefreshToken{UserID: u.ID, Family: "f", ExpiresAt: now.Add(time.Hour)}, now); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for i := range 8 {
		wg.Go(func() {
			if _, err := s.RotateRefreshToken([]byte("t"), []byte{byte(i)}, now.Add(time.Hour), now); err == nil {
				mu.Lock()
				wins++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if wins != 1 {
		t.Fatalf("got %d winners of one refresh token, want 1", wins)
	}
}

func TestOneTimeTokens(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	_, u := newCompany(t, s, "a@example.com", "h")
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := s.PutOneTimeToken([]byte("v"), OneTimeToken{Kind: "verify", UserID: u.ID, ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	verify := func(u *User) error { u.EmailVerified = true; return nil }
	if _, err := s.ConsumeOneTimeToken([]byte("v"), []string{"reset"}, now, false, verify); !errors.Is(err, ErrNotFound) {
		t.Fatalf("wrong kind: got %v, want ErrNotFound", err)
	}
	if _, err := s.ConsumeOneTimeToken([]byte("v"), []string{"verify"}, now.Add(time.Hour), false, verify); !errors.Is(err, ErrTokenExpired) {
		t.Fatalf("expired: got %v, want ErrTokenExpired", err)
	}
	got, err := s.ConsumeOneTimeToken([]byte("v"), []string{"verify"}, now, false, verify)
	if err != nil || !got.EmailVerified {
		t.Fatalf("got %+v, %v", got, err)
	}
	if _, err := s.ConsumeOneTimeToken([]byte("v"), []string{"verify"}, now, false, verify); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second use: got %v, want ErrNotFound", err)
	}
	stored, _ := s.User(u.ID)
	if !stored.EmailVerified {
		t.Fatal("the change was not stored")
	}
	// Pruning drops expired tokens only.
	_ = s.PutOneTimeToken([]byte("live"), OneTimeToken{Kind: "reset", UserID: u.ID, ExpiresAt: now.Add(48 * time.Hour)})
	n, err := s.PruneTokens(now.Add(24 * time.Hour))
	if err != nil || n != 1 {
		t.Fatalf("pruned %d (%v), want 1", n, err)
	}
	if _, err := s.ConsumeOneTimeToken([]byte("live"), []string{"reset"}, now, false, verify); err != nil {
		t.Fatalf("a live token was pruned: %v", err)
	}
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

func TestPruneIdempotency(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	if err := s.db.Update(func(tx *bolt.Tx) error {
		for i, age := range []time.Duration{0, 23 * time.Hour, 25 * time.Hour, 48 * time.Hour} {
			if err := putJSON(tx.Bucket(bucketIdempotency), pair(1, uint64(i)), Idempotent{Status: 202, CreatedAt: t0.Add(-age)}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	n, err := s.PruneIdempotency(t0.Add(-24 * time.Hour))
	if err != nil || n != 2 {
		t.Fatalf("got %d dropped (%v), want the 2 older than a day", n, err)
	}
	var left []uint64
	_ = s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketIdempotency).ForEach(func(k, _ []byte) error {
			left = append(left, btoi(k[8:]))
			return nil
		})
	})
	if len(left) != 2 || left[0] != 0 || left[1] != 1 {
		t.Fatalf("left %v, want the answers 0 and 1", left)
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
