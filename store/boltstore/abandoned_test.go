package boltstore

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/simrelay/simrelay/internal/syncbuf"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// dumpBuckets reads every record of the file, nested buckets included,
// keyed by its bucket path and key.
func dumpBuckets(t *testing.T, s *Store) map[string]string {
	t.Helper()
	out := map[string]string{}
	var walk func(path string, b *bolt.Bucket) error
	walk = func(path string, b *bolt.Bucket) error {
		return b.ForEach(func(k, v []byte) error {
			if v == nil {
				if nested := b.Bucket(k); nested != nil {
					return walk(path+"/"+string(k), nested)
				}
			}
			out[fmt.Sprintf("%s %x", path, k)] = string(v)
			return nil
		})
	}
	if err := s.db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error { return walk(string(name), b) })
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// An abandoned sign-up goes with every record of it: after the prune,
// every bucket of the file holds what it held before the sign-up, record
// for record, and no key of a bucket keyed by company begins with its id.
func TestAbandonedSignupLeavesNothing(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	now := time.Date(2026, 12, 20, 10, 0, 0, 0, time.UTC)
	cutoff := now.Add(-8 * 24 * time.Hour)
	kept, _ := conformance.Company(t, s)
	conformance.Device(t, s, kept.ID, "fp-kept")
	before := dumpBuckets(t, s)

	c, u, _ := conformance.Signup(t, s, "stranger@example.com", cutoff.Add(-time.Hour))
	if err := s.PutOneTimeToken([]byte("reset-spent"), store.OneTimeToken{Kind: "reset", UserID: u.ID, ExpiresAt: cutoff}); err != nil {
		t.Fatal(err)
	}
	if got := dumpBuckets(t, s); len(got) <= len(before) {
		t.Fatalf("the sign-up added no record (%d before, %d after)", len(before), len(got))
	}
	n, last, err := s.PruneAbandonedSignups(cutoff, now, 0, 100)
	if err != nil || n != 1 || last != 0 {
		t.Fatalf("PruneAbandonedSignups: %d removed, last %d (%v), want 1 and 0", n, last, err)
	}
	after := dumpBuckets(t, s)
	for k, v := range after {
		if w, ok := before[k]; !ok || w != v {
			t.Errorf("left after the prune: %s = %q", k, v)
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			t.Errorf("the prune removed a record of another company: %s", k)
		}
	}
	prefix := itob(c.ID)
	if err := s.db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			if notCompanyKeyed[string(name)] && !slices.Contains([]string{string(bucketCompanyUsers), string(bucketCompanyEmails)}, string(name)) {
				return nil
			}
			if n := countPrefix(b, prefix, math.MaxInt); n > 0 {
				t.Errorf("bucket %s still has %d keys of company %d", name, n, c.ID)
			}
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	// The ids are not given again.
	again, owner, _ := conformance.Signup(t, s, "stranger@example.com", now)
	if again.ID <= c.ID || owner.ID <= u.ID {
		t.Fatalf("the new sign-up got company %d user %d, after %d and %d", again.ID, owner.ID, c.ID, u.ID)
	}
}

// A prune pass over companies none of which is an abandoned sign-up
// commits nothing: it looks in read transactions and leaves the file's
// single writer to the sends. A batch with one takes the writer once.
func TestAbandonedSignupsFoundWithoutWriting(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	now := time.Date(2026, 12, 20, 10, 0, 0, 0, time.UTC)
	cutoff := now.Add(-8 * 24 * time.Hour)
	for i := range 3 {
		conformance.Company(t, s)
		conformance.Signup(t, s, fmt.Sprintf("young-%d@example.com", i), cutoff.Add(time.Hour))
		c, _, _ := conformance.Signup(t, s, fmt.Sprintf("used-%d@example.com", i), cutoff.Add(-time.Hour))
		conformance.Device(t, s, c.ID, fmt.Sprintf("fp-used-%d", i))
	}
	txID := func() int {
		var id int
		if err := s.db.View(func(tx *bolt.Tx) error { id = tx.ID(); return nil }); err != nil {
			t.Fatal(err)
		}
		return id
	}
	pass := func() int {
		total := 0
		for after := uint64(0); ; {
			n, last, err := s.PruneAbandonedSignups(cutoff, now, after, 2)
			if err != nil {
				t.Fatal(err)
			}
			total += n
			if last == 0 {
				return total
			}
			after = last
		}
	}
	before := txID()
	if n := pass(); n != 0 {
		t.Fatalf("removed %d, want none", n)
	}
	if after := txID(); after != before {
		t.Fatalf("a pass with nothing to remove committed %d write transactions, want none", after-before)
	}

	gone, _, _ := conformance.Signup(t, s, "stranger@example.com", cutoff.Add(-time.Hour))
	before = txID()
	if n := pass(); n != 1 {
		t.Fatalf("removed %d, want the abandoned sign-up", n)
	}
	if after := txID(); after != before+1 {
		t.Fatalf("a pass removing one sign-up committed %d write transactions, want 1", after-before)
	}
	if _, err := s.Company(gone.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the abandoned sign-up: %v, want it removed", err)
	}
}

func TestAbandonedSignupRecords(t *testing.T) {
	t.Parallel()
	conformance.AbandonedSignupRecords(t, open(t, t.TempDir()))
}

// A company whose member entry names a user whose record is not there (a
// damaged file) is no abandoned sign-up: the prune keeps it, logs it once
// a pass, and goes on with the companies after it, whose abandoned sign-up
// goes as ever. It failed every pass before, removing nothing.
func TestAbandonedSignupPruneKeepsACompanyWithoutItsUser(t *testing.T) {
	t.Parallel()
	logs := &syncbuf.Buffer{}
	s, err := Open(t.TempDir(), Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	now := time.Date(2026, 12, 20, 10, 0, 0, 0, time.UTC)
	cutoff := now.Add(-8 * 24 * time.Hour)
	broken, owner, _ := conformance.Signup(t, s, "damaged@example.com", cutoff.Add(-time.Hour))
	gone, _, _ := conformance.Signup(t, s, "stranger@example.com", cutoff.Add(-time.Hour))
	if err := s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketUsers).Delete(itob(owner.ID)) }); err != nil {
		t.Fatal(err)
	}
	const warn = "names a user whose record is not there"
	for pass := 1; pass <= 2; pass++ {
		for _, limit := range []int{1, 100} { // the company alone in its batch, and with the other
			total := 0
			for after := uint64(0); ; {
				n, last, err := s.PruneAbandonedSignups(cutoff, now, after, limit)
				if err != nil {
					t.Fatalf("pass %d, batches of %d: %v, want the damaged company passed over", pass, limit, err)
				}
				total += n
				if last == 0 {
					break
				}
				after = last
			}
			if want := map[bool]int{true: 1, false: 0}[pass == 1 && limit == 1]; total != want {
				t.Fatalf("pass %d, batches of %d: removed %d, want %d", pass, limit, total, want)
			}
		}
	}
	if _, err := s.Company(gone.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the abandoned sign-up after the damaged company: %v, want it removed", err)
	}
	if _, err := s.Company(broken.ID); err != nil {
		t.Errorf("the damaged company: %v, want it kept", err)
	}
	var lines []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, warn) {
			lines = append(lines, l)
		}
	}
	want := fmt.Sprintf("company_id=%d user_id=%d", broken.ID, owner.ID)
	if len(lines) != 4 {
		t.Fatalf("%d warnings in 4 passes, want one a pass:\n%s", len(lines), logs.String())
	}
	for _, l := range lines {
		if !strings.Contains(l, "level=WARN") || !strings.Contains(l, want) {
			t.Errorf("the warning %q names not %s at WARN", l, want)
		}
	}
}
