package boltstore

import (
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// mailIndex is the keys of bucketMailCompany as company and mail ids.
func mailIndex(t *testing.T, s *Store) []uint64 {
	t.Helper()
	var out []uint64
	if err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMailCompany).ForEach(func(k, _ []byte) error {
			out = append(out, btoi(k[:8]), btoi(k[8:]))
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// A company's removal finds its mails through the index by company and
// reads none of the other companies' mails: a record of another company's
// that no decoder reads is left as it was. The removal read the outbox
// whole, twice, and failed on that record; with a week of 100,000 mails of
// 1 KB it took 1.9 to 4.0 s of the file's single writer, now 47 to 72 ms
// (TestMeasureRemovalCredentials).
func TestRemovalReadsNoOtherCompanysMail(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	c, _ := conformance.Company(t, s)
	at := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	var mine []uint64
	for _, state := range []string{MailPending, MailSent} {
		m := Mail{CompanyID: c.ID, To: "ops@example.com", Subject: "SMS", Text: "hi", State: state, CreatedAt: at}
		if err := s.AppendCompanyMail(&m, store.MailLimits{}); err != nil {
			t.Fatal(err)
		}
		mine = append(mine, m.ID)
	}
	server := Mail{To: "ana@example.com", Subject: "Verify", Text: "link", State: MailPending, CreatedAt: at}
	if err := s.AppendMail(&server); err != nil {
		t.Fatal(err)
	}
	unread := []byte("{not a mail a decoder could read")
	if err := s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMailOutbox).Put(itob(1<<40), unread)
	}); err != nil {
		t.Fatal(err)
	}
	if got, want := mailIndex(t, s), []uint64{c.ID, mine[0], c.ID, mine[1]}; !slices.Equal(got, want) {
		t.Fatalf("index %v, want %v", got, want)
	}
	conformance.RemoveCompany(t, s, c.ID, 1000)
	if got := mailIndex(t, s); len(got) != 0 {
		t.Fatalf("index after the removal: %v, want empty", got)
	}
	if err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketMailOutbox)
		for _, id := range mine {
			if b.Get(itob(id)) != nil {
				t.Errorf("the company's mail %d is left", id)
			}
		}
		if b.Get(itob(server.ID)) == nil {
			t.Error("the server's own mail went with the company")
		}
		if got := b.Get(itob(1 << 40)); !slices.Equal(got, unread) {
			t.Errorf("the record of another company's is %q", got)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestMigrateV14IndexesCompanyMail: the migration to schema 14 indexes
// the mails of a store written before mail_company by their company,
// pending and done, and leaves out the server's own; a prune of a mail
// takes its entry, and a company's removal then takes its mails.
func TestMigrateV14IndexesCompanyMail(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := open(t, dir)
	a, _ := conformance.Company(t, s)
	b, _ := conformance.Company(t, s)
	old := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	at := old.AddDate(0, 0, 28)
	var ids []uint64
	for _, m := range []Mail{
		{CompanyID: a.ID, State: MailPending, CreatedAt: at},
		{CompanyID: a.ID, State: MailSent, CreatedAt: at},
		{CompanyID: b.ID, State: MailSent, CreatedAt: old},
		{State: MailPending, CreatedAt: at}, // the server's own
	} {
		m.To, m.Subject, m.Text = "ops@example.com", "SMS", "hi"
		var err error
		if m.CompanyID != 0 {
			err = s.AppendCompanyMail(&m, store.MailLimits{})
		} else {
			err = s.AppendMail(&m)
		}
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, m.ID)
	}
	want := []uint64{a.ID, ids[0], a.ID, ids[1], b.ID, ids[2]}
	// Back to schema 13: no index.
	if err := s.db.Update(func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket(bucketMailCompany); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put(keySchemaVersion, itob(13))
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir)
	if v, err := s.Version(); err != nil || v != SchemaVersion() || v < 14 {
		t.Fatalf("version %d (%v) after the migration, want %d", v, err, SchemaVersion())
	}
	if got := mailIndex(t, s); !slices.Equal(got, want) {
		t.Fatalf("after the migration: %v, want %v", got, want)
	}
	if done, _, err := s.PruneMail(old.AddDate(0, 0, 7), old); err != nil || done != 1 {
		t.Fatalf("pruned %d (%v), want b's sent mail", done, err)
	}
	if got := mailIndex(t, s); !slices.Equal(got, want[:4]) {
		t.Fatalf("after the prune: %v, want %v", got, want[:4])
	}
	conformance.RemoveCompany(t, s, a.ID, 1000)
	mails, err := s.Mails(false)
	if err != nil || len(mails) != 1 || mails[0].ID != ids[3] {
		t.Fatalf("left after a's removal: %+v (%v), want the server's own mail", mails, err)
	}
}
