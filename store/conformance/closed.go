package conformance

import (
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
)

// ClosedStore is what the Closed suite calls.
type ClosedStore interface {
	Base
	AddOptOut(companyID uint64, phone string, now time.Time) (store.OptOut, bool, error)
	AppendMail(m *store.Mail) error
	Close() error
	Company(id uint64) (store.Company, error)
	CompanyDevices(companyID uint64) ([]store.Device, error)
	CopyMedia(w io.Writer, id string, off, n int64) (int64, error)
	DeleteDevice(companyID uint64, fingerprint string, now time.Time) (store.Device, error)
	DeviceCompany(companyID, deviceID uint64) (store.Company, error)
	Generation() (uint64, error)
	History(companyID uint64, device, phone string, page, limit int) ([]store.Message, int, error)
	Mails(pendingOnly bool) ([]store.Mail, error)
	MessageByUUID(companyID uint64, uuid string) (store.Message, error)
	PruneTokens(cutoff time.Time) (int, error)
	PruneAbandonedSignups(cutoff, now time.Time, after uint64, limit int) (removed int, last uint64, err error)
	Ready() error
	Secret(name string, size int) ([]byte, error)
	RotateSecrets(names []string, reseal store.Reseal) ([]string, int, []store.Company, error)
	StatsTotals(companyID uint64) (store.Counts, error)
	TransitionLater(companyID, deviceID uint64, uuid, status, errText, statusAt, detail string, now time.Time) store.Transit
	UpdateCompany(id uint64, fn func(*store.Company) error) (store.Company, error)
	User(id uint64) (store.User, error)
	UserByEmail(email string) (store.User, error)
	Version() (uint64, error)
}

// Closed: once Close returned, every method answers store.ErrClosed (in
// its chain), reads as well as writes, whichever way the backend reaches
// its data: a caller that outlives the store (a worker draining at
// shutdown, an admin command) tells "the store went away" from a fault of
// the data or of the database, and logs it as such rather than as a 500.
func Closed(t *testing.T, open Opener[ClosedStore]) {
	st := open(t)
	c, u := Company(t, st)
	d := Device(t, st, c.ID, "closed-phone")
	if err := st.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	calls := []struct {
		name string
		call func() error
	}{
		{"Company", func() error { _, err := st.Company(c.ID); return err }},
		{"User", func() error { _, err := st.User(u.ID); return err }},
		{"UserByEmail", func() error { _, err := st.UserByEmail(u.Email); return err }},
		{"CompanyDevice", func() error { _, err := st.CompanyDevice(c.ID, d.Fingerprint); return err }},
		{"CompanyDevices", func() error { _, err := st.CompanyDevices(c.ID); return err }},
		{"DeviceCompany", func() error { _, err := st.DeviceCompany(c.ID, d.ID); return err }},
		{"History", func() error { _, _, err := st.History(c.ID, d.Fingerprint, "", 1, 10); return err }},
		{"MessageByUUID", func() error { _, err := st.MessageByUUID(c.ID, "00000000-0000-4000-8000-000000000000"); return err }},
		{"Mails", func() error { _, err := st.Mails(false); return err }},
		{"CopyMedia", func() error { _, err := st.CopyMedia(io.Discard, "no-such-file", 0, -1); return err }},
		{"StatsTotals", func() error { _, err := st.StatsTotals(c.ID); return err }},
		{"Generation", func() error { _, err := st.Generation(); return err }},
		{"Version", func() error { _, err := st.Version(); return err }},
		{"Ready", st.Ready},
		{"Secret", func() error { _, err := st.Secret("closed-suite", 32); return err }},
		{"RotateSecrets", func() error {
			_, _, _, err := st.RotateSecrets([]string{"closed-suite"}, func(_, _ map[string][]byte, sealed []byte) ([]byte, error) { return sealed, nil })
			return err
		}},
		{"CreateCompany", func() error {
			return st.CreateCompany(&store.Company{Name: "After close", CreatedAt: T0},
				&store.User{Email: fmt.Sprintf("after-close-%d@example.com", unique()), PasswordHash: "set", CreatedAt: T0})
		}},
		{"UpdateCompany", func() error {
			_, err := st.UpdateCompany(c.ID, func(c *store.Company) error { c.Name = "Renamed"; return nil })
			return err
		}},
		{"PutPairing", func() error {
			return st.PutPairing([]byte("closed-pairing"), store.Pairing{CompanyID: c.ID, ExpiresAt: T0.Add(time.Hour)}, T0)
		}},
		{"AppendMail", func() error { return st.AppendMail(&store.Mail{To: "a@example.com", Subject: "s", CreatedAt: T0}) }},
		{"AddOptOut", func() error { _, _, err := st.AddOptOut(c.ID, "+15550001111", T0); return err }},
		{"DeleteDevice", func() error { _, err := st.DeleteDevice(c.ID, d.Fingerprint, T0); return err }},
		{"PruneTokens", func() error { _, err := st.PruneTokens(T0); return err }},
		{"PruneAbandonedSignups", func() error { _, _, err := st.PruneAbandonedSignups(T0, T0, 0, 10); return err }},
		{"TransitionLater", func() error {
			_, _, err := st.TransitionLater(c.ID, d.ID, "00000000-0000-4000-8000-000000000000", store.MsgSent, "", "", "", T0).Wait()
			return err
		}},
	}
	for _, tc := range calls {
		if err := tc.call(); !errors.Is(err, store.ErrClosed) {
			t.Errorf("%s after Close: %v, want store.ErrClosed", tc.name, err)
		}
	}
}
