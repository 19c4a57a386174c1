package postgres

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/pgtest"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// migrated is a database of the test's cluster with the schema in place:
// a copy of one migrated once per test binary.
func migrated(t testing.TB) string {
	return pgtest.URLFrom(t, "schema", func(url string) error {
		s, err := Open(context.Background(), url, Options{})
		if err != nil {
			return err
		}
		return s.Close()
	})
}

// openStore opens a store on a new database of the test's cluster.
func openStore(t *testing.T, opt Options) *Store {
	t.Helper()
	return openURL(t, migrated(t), opt)
}

// openURL opens a store on the database at url; it closes with the test.
func openURL(t *testing.T, url string, opt Options) *Store {
	t.Helper()
	s, err := Open(context.Background(), url, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// capPlans caps every company at the given devices and messages.
type capPlans struct{ devices, messages int64 }

func (p capPlans) Limits(_ store.Subscription, _ bool, now time.Time) store.PlanLimits {
	from, to := store.CalendarMonth(now)
	return store.PlanLimits{Devices: p.devices, Messages: p.messages, PeriodStart: from, PeriodEnd: to}
}

// The core rules of the PostgreSQL store: ids carried in the records, an
// address or key in use refused, a pairing code spent once, a handset live
// in one company only, the plan's device cap exact under concurrency.
func TestCoreRegistrations(t *testing.T) {
	t.Parallel()
	s := openStore(t, Options{})
	c, admin := conformance.Company(t, s)
	if c.ID == 0 || admin.ID == 0 || admin.CompanyID != c.ID || admin.Role != store.RoleAdmin {
		t.Fatalf("company %+v admin %+v", c, admin)
	}
	var got store.Company
	if err := s.read("test", func(t *txn) error {
		return getRec(t, &got, "SELECT rec FROM companies WHERE id = $1", id(c.ID))
	}); err != nil || got.ID != c.ID || got.Name != c.Name {
		t.Fatalf("stored company %+v (%v), want %+v", got, err, c)
	}
	dup := store.Company{Name: "Dup", APIKeyHash: []byte("dup")}
	if err := s.CreateCompany(&dup, &store.User{Email: "  " + admin.Email + " "}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("an address in use: %v, want ErrConflict", err)
	}
	d := conformance.Device(t, s, c.ID, "fp-1")
	if d.ID == 0 || d.CompanyID != c.ID {
		t.Fatalf("device %+v", d)
	}
	if got, err := s.CompanyDevice(c.ID, "fp-1"); err != nil || got.ID != d.ID || got.Name != d.Name {
		t.Fatalf("CompanyDevice: %+v (%v)", got, err)
	}
	other, _ := conformance.Company(t, s)
	if _, err := s.CompanyDevice(other.ID, "fp-1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another company's device: %v, want ErrNotFound", err)
	}

	code := []byte("code")
	if err := s.PutPairing(code, store.Pairing{CompanyID: other.ID, ExpiresAt: conformance.T0.Add(time.Minute)}, conformance.T0); err != nil {
		t.Fatal(err)
	}
	build := func(store.Pairing, *store.Device) (store.Device, error) {
		return store.Device{Status: store.DeviceActive, TokenHash: []byte("tok")}, nil
	}
	if _, _, _, err := s.RegisterDevice(code, conformance.T0, "fp-1", build); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a handset live in another company: %v, want ErrConflict", err)
	}
	if _, _, _, err := s.RegisterDevice(code, conformance.T0, "fp-2", build); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := s.RegisterDevice(code, conformance.T0, "fp-3", build); !errors.Is(err, store.ErrPairingUsed) {
		t.Fatalf("a spent code: %v, want ErrPairingUsed", err)
	}
	late := []byte("late")
	if err := s.PutPairing(late, store.Pairing{CompanyID: other.ID, ExpiresAt: conformance.T0}, conformance.T0); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := s.RegisterDevice(late, conformance.T0, "fp-4", build); !errors.Is(err, store.ErrTokenExpired) {
		t.Fatalf("an expired code: %v, want ErrTokenExpired", err)
	}
}

// Twenty registrations racing for a plan of three devices: exactly three
// are stored.
func TestCoreDeviceCapExact(t *testing.T) {
	t.Parallel()
	s := openStore(t, Options{})
	s.SetPlans(capPlans{devices: 3, messages: -1})
	c, _ := conformance.Company(t, s)
	var wg sync.WaitGroup
	var mu sync.Mutex
	stored, capped := 0, 0
	for i := range 20 {
		code := []byte{'p', byte(i)}
		if err := s.PutPairing(code, store.Pairing{CompanyID: c.ID, ExpiresAt: conformance.T0.Add(time.Hour)}, conformance.T0); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			_, _, _, err := s.RegisterDevice(code, conformance.T0, string(rune('a'+i)), func(store.Pairing, *store.Device) (store.Device, error) {
				return store.Device{Status: store.DeviceActive, TokenHash: []byte{'t', byte(i)}}, nil
			})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				stored++
			case errors.As(err, new(*store.PlanLimitError)):
				capped++
			default:
				t.Errorf("registration %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if stored != 3 || capped != 17 {
		t.Fatalf("stored %d, capped %d; want 3 and 17", stored, capped)
	}
}

// The budget refuses a write that would go over it, having written
// nothing, and counts across shards.
func TestCoreBudget(t *testing.T) {
	t.Parallel()
	s := openStore(t, Options{CompanyDailyStorage: 3 * store.PairingCost})
	c, _ := conformance.Company(t, s)
	for i := range 3 {
		if err := s.PutPairing([]byte{byte(i)}, store.Pairing{CompanyID: c.ID, ExpiresAt: conformance.T0.Add(time.Hour)}, conformance.T0); err != nil {
			t.Fatalf("pairing %d: %v", i, err)
		}
	}
	err := s.PutPairing([]byte{9}, store.Pairing{CompanyID: c.ID, ExpiresAt: conformance.T0.Add(time.Hour)}, conformance.T0)
	var be *store.BudgetError
	if !errors.As(err, &be) || be.Used != 3*store.PairingCost || !be.Reset.Equal(store.NextDay(conformance.T0)) {
		t.Fatalf("over the budget: %v, want a *BudgetError with 3 codes used", err)
	}
	if err := s.PutPairing([]byte{9}, store.Pairing{CompanyID: c.ID, ExpiresAt: conformance.T0.Add(48 * time.Hour)}, store.NextDay(conformance.T0)); err != nil {
		t.Fatalf("the next day: %v", err)
	}
}

// The activity feed keeps the newest store.ActivityKeep events.
func TestCoreActivityKept(t *testing.T) {
	t.Parallel()
	s := openStore(t, Options{})
	c, _ := conformance.Company(t, s)
	for i := range store.ActivityKeep + 5 {
		if err := s.write("test", func(t *txn) error {
			return addActivity(t, c.ID, store.Activity{Type: store.ActUserInvited, At: conformance.T0, Description: string(rune('A' + i))})
		}); err != nil {
			t.Fatal(err)
		}
	}
	var n int
	var oldest []byte
	if err := s.read("test", func(t *txn) error {
		if err := t.row("SELECT count(*) FROM activity WHERE company_id = $1", id(c.ID)).Scan(&n); err != nil {
			return err
		}
		return t.row("SELECT rec->>'description' FROM activity WHERE company_id = $1 ORDER BY seq LIMIT 1", id(c.ID)).Scan(&oldest)
	}); err != nil {
		t.Fatal(err)
	}
	if n != store.ActivityKeep || string(oldest) != string(rune('A'+5)) {
		t.Fatalf("kept %d events, oldest %q; want %d from %q", n, oldest, store.ActivityKeep, string(rune('A'+5)))
	}
}

// The operator's backup route is refused: pg_dump backs the database up.
func TestCoreSnapshotIsExternal(t *testing.T) {
	t.Parallel()
	s := openStore(t, Options{})
	if snap, err := s.Snapshot(t.TempDir()); !errors.Is(err, store.ErrBackupExternal) || snap != nil {
		t.Fatalf("Snapshot: %v, %v; want ErrBackupExternal", snap, err)
	}
}
