package postgres

import (
	"fmt"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
)

// dueTenant stores a company with entries webhook entries and one event
// with n deliveries due a millisecond apart from at, spread over the
// entries in turn.
func dueTenant(t *testing.T, s *Store, name string, entries, n int, at time.Time) store.WebhookSet {
	t.Helper()
	c := store.Company{Name: name, APIKeyHash: []byte("due-" + name)}
	if err := s.CreateCompany(&c, &store.User{Email: "a@" + name + ".test", PasswordHash: "x", Role: store.RoleAdmin}); err != nil {
		t.Fatal(err)
	}
	set, err := s.UpdateWebhookSet(c.ID, at, func(w *store.WebhookSet) error {
		for i := range entries {
			w.Entries = append(w.Entries, store.WebhookEntry{URL: fmt.Sprintf("https://hooks.example.com/%d", i), Active: true})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = s.write("test event", func(tx *txn) error {
		_, err := s.addWebhookEvent(tx, c.ID, at, store.OutboxLimits{}, func(set store.WebhookSet) (store.WebhookEvent, []store.WebhookDelivery, error) {
			ev := store.WebhookEvent{ID: "ev-" + name, Body: []byte(`{"type":"sms.received"}`)}
			var ds []store.WebhookDelivery
			for i := range n {
				due := at.Add(time.Duration(i) * time.Millisecond)
				ds = append(ds, store.WebhookDelivery{UUID: fmt.Sprintf("%s-%d", name, i), EventType: "sms.received",
					WebhookID: set.Entries[i%entries].ID, CreatedAt: at, NextAttemptAt: due})
			}
			return ev, ds, nil
		})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// duePassReads runs a pass (scanDue, as DueWebhookDeliveries does) and
// counts, in its transaction, the rows and index entries it read of the
// outbox: the table's by sequential scans, and those of every index on it.
// (The counts are the backend's not yet reported, which may hold earlier
// transactions': the pass's are the difference over it.)
func duePassReads(t *testing.T, s *Store, now time.Time, limit int, skip store.DueSkip) ([]store.WebhookDue, int64) {
	t.Helper()
	var due []store.WebhookDue
	var read int64
	err := s.read("test pass", func(tx *txn) (err error) {
		read, err = tuplesRead(tx, "webhook_deliveries", func() (err error) {
			due, _, err = scanDue(tx, now, limit, false, nil, skip)
			return err
		})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return due, read
}

// A pass over the due deliveries while a company is at its bound of
// attempts under way, with 2,000 due over its 2 entries, and another has
// 6 due over 2 entries, one of which is at its own bound: the pass takes
// the other company's 3 on its free entry, oldest first, and reads a few
// of the full company's rows, not its 2,000 (it read them all, stepping
// over their index entries, through the index by due time).
func TestDuePassReadsNoneOfAFullCompany(t *testing.T) {
	t.Parallel()
	s := openStore(t, Options{})
	at := time.Now().Add(-time.Hour).UTC().Truncate(time.Millisecond)
	full := dueTenant(t, s, "full", 2, 2000, at)
	other := dueTenant(t, s, "other", 2, 6, at.Add(500*time.Microsecond))
	// A test's database may be one an earlier test wrote deliveries to:
	// their dead index entries would count.
	if _, err := s.pool.Exec(t.Context(), "VACUUM (ANALYZE) webhook_deliveries"); err != nil {
		t.Fatal(err)
	}
	asked := 0
	due, read := duePassReads(t, s, time.Now(), 64, func(d store.WebhookDue) store.DueVerdict {
		asked++
		switch {
		case d.CompanyID == full.CompanyID:
			return store.DuePassCompany
		case d.WebhookID == other.Entries[1].ID:
			return store.DuePassEntry
		}
		return store.DueTake
	})
	if len(due) != 3 || asked != 5 {
		t.Fatalf("took %+v after asking of %d; want other's 3 on its entry 0 after asking of 5", due, asked)
	}
	for i, d := range due {
		if d.WebhookID != other.Entries[0].ID || (i > 0 && d.ID <= due[i-1].ID) {
			t.Fatalf("took %+v, want other's entry 0's in due order", due)
		}
	}
	// The walk in due order reads a page (its rows and their index
	// entries) before it reads by entry: a few per entry besides.
	if want := int64(2*dueWalkPage + 40); read > want {
		t.Fatalf("the pass read %d rows and index entries of the outbox, want at most %d (a page in due order, then a few per entry of 4)", read, want)
	}

	// With nothing full the pass merges the entries oldest due first,
	// reading on an entry's deliveries past its first read.
	due, _ = duePassReads(t, s, time.Now(), 50, nil)
	if len(due) != 50 {
		t.Fatalf("took %d, want 50", len(due))
	}
	var all []store.WebhookDue
	if err := s.read("test order", func(tx *txn) error {
		rows, err := tx.query("SELECT id, webhook_id, company_id FROM webhook_deliveries ORDER BY next_attempt_at, id LIMIT 50")
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var d store.WebhookDue
			if err := rows.Scan(&d.ID, &d.WebhookID, &d.CompanyID); err != nil {
				return err
			}
			all = append(all, d)
		}
		return rows.Err()
	}); err != nil {
		t.Fatal(err)
	}
	for i := range all {
		if due[i] != all[i] {
			t.Fatalf("pass took %+v, want the outbox's oldest due in order %+v", due, all)
		}
	}
}

// A pass while a company of 20 entries is at its bound of attempts under
// way, 2,000 due over its entries, reads as much of the outbox as one
// while a company of 2 entries is: once the pass knows the company is
// full, its read by entry steps past all its entries at once. It stepped
// from entry to entry, a probe for each of the 20.
func TestDuePassStepsOverAFullCompanyAtOnce(t *testing.T) {
	t.Parallel()
	reads := map[int]int64{}
	for _, entries := range []int{2, 20} {
		s := openStore(t, Options{})
		at := time.Now().Add(-time.Hour).UTC().Truncate(time.Millisecond)
		full := dueTenant(t, s, "full", entries, 2000, at)
		dueTenant(t, s, "other", 2, 6, at.Add(500*time.Microsecond))
		if _, err := s.pool.Exec(t.Context(), "VACUUM (ANALYZE) webhook_deliveries"); err != nil {
			t.Fatal(err)
		}
		due, read := duePassReads(t, s, time.Now(), 64, func(d store.WebhookDue) store.DueVerdict {
			if d.CompanyID == full.CompanyID {
				return store.DuePassCompany
			}
			return store.DueTake
		})
		if len(due) != 6 {
			t.Fatalf("%d entries: took %+v, want the other company's 6", entries, due)
		}
		reads[entries] = read
	}
	if reads[20] > reads[2]+2 {
		t.Errorf("a pass read %d rows and index entries of the outbox with a full company of 20 entries, %d with one of 2: want as many",
			reads[20], reads[2])
	}
}
