package postgres

import (
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// The key columns of the accounts' tables follow their records: a pending
// invitee holds no address until it accepts, and a touched session's
// seen_at is the record's.
func TestAccountsColumnsFollowRecords(t *testing.T) {
	t.Parallel()
	s := openStore(t, Options{})
	c, _ := conformance.Company(t, s)
	inv := store.User{CompanyID: c.ID, Email: " Invitee@Example.com", Role: store.RoleMember, CreatedAt: conformance.T0}
	if _, err := s.InviteUser(&inv, conformance.T0); err != nil {
		t.Fatal(err)
	}
	held := func() (email string, held bool) {
		t.Helper()
		if err := s.read("test", func(t *txn) error {
			return t.row("SELECT email, held FROM users WHERE id = $1", id(inv.ID)).Scan(&email, &held)
		}); err != nil {
			t.Fatal(err)
		}
		return email, held
	}
	if email, h := held(); email != "invitee@example.com" || h {
		t.Fatalf("a pending invitee: email %q held %v, want the lower-case address not held", email, h)
	}
	if err := s.PutOneTimeToken([]byte("inv"), store.OneTimeToken{Kind: "invite", UserID: inv.ID, ExpiresAt: conformance.T0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ConsumeOneTimeToken([]byte("inv"), []string{"invite"}, conformance.T0, true, func(u *store.User) error { u.PasswordHash = "set"; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, h := held(); !h {
		t.Fatal("an accepted invitee does not hold its address")
	}

	sess := []byte("sess")
	if err := s.PutConsoleSession(sess, store.ConsoleSession{UserID: inv.ID, SeenAt: conformance.T0, ExpiresAt: conformance.T0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	at := conformance.T0.Add(1500 * time.Millisecond)
	if err := s.TouchConsoleSession(sess, at); err != nil {
		t.Fatal(err)
	}
	var col time.Time
	if err := s.read("test", func(t *txn) error {
		return t.row("SELECT seen_at FROM console_sessions WHERE hash = $1", sess).Scan(&col)
	}); err != nil {
		t.Fatal(err)
	}
	got, err := s.ConsoleSession(sess)
	if err != nil || !got.SeenAt.Equal(at) || !col.Equal(at) {
		t.Fatalf("after a touch: record %v, column %v (%v); want both %v", got.SeenAt, col, err, at)
	}
}
