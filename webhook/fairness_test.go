package webhook

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/webhook/webhooktest"
)

// One company's receivers that all hang hold at most PerCompany workers:
// another company's delivery arrives while they are all still hanging
// (they answer only when the test ends).
func TestHangingCompanyDoesNotStallOtherCompanies(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	h := newHanger()
	slow := webhooktest.NewReceiver(t, true, func(_ int, r *http.Request, _ http.ResponseWriter) int {
		h.hang(r)
		return http.StatusNoContent
	})
	fast := webhooktest.NewReceiver(t, true, nil)
	defer close(h.release) // before the receivers close: they wait for their handlers
	pool := slow.Pool()
	pool.AddCert(fast.Certificate())
	const workers = 4
	svc, _ := f.start(Config{AllowPrivate: true, RootCAs: pool, Workers: workers, Timeout: time.Minute}, nil)

	// Company A: many entries, every one hanging, many events.
	var entries []EntryInput
	for range 6 {
		entries = append(entries, EntryInput{URL: slow.URL + "/hang"})
	}
	f.configure(svc, entries...)
	for range 4 {
		f.inbound(svc, f.device, "SIM1", time.Now())
	}
	bound := DefaultPerCompany(workers)
	eventually(t, "company A's receivers hanging", func() bool {
		hanging, _ := h.counts()
		return hanging >= bound
	})

	// Company B: one entry, one event.
	c := store.Company{Name: "Beta", APIKeyHash: []byte("kb")}
	u := store.User{FirstName: "Bo", Email: "bo@example.com", PasswordHash: "x"}
	if err := f.st.CreateCompany(&c, &u); err != nil {
		t.Fatal(err)
	}
	if err := f.st.ProvisionDevices([]store.Device{{Fingerprint: "phone-b", CompanyID: c.ID, Status: store.DeviceActive, TokenHash: []byte("t-b")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Replace(context.Background(), c.ID, []EntryInput{{URL: fast.URL + "/b"}}); err != nil {
		t.Fatal(err)
	}
	f.inbound(svc, "phone-b", "SIM1", time.Now())
	eventually(t, "company B's delivery while company A's receivers hang", func() bool {
		return len(fast.Requests()) == 1
	})
	hanging, most := h.counts()
	if len(slow.Requests()) != hanging {
		t.Fatalf("company A: %d requests, %d still hanging; want every one still hanging", len(slow.Requests()), hanging)
	}
	if most > bound {
		t.Fatalf("company A held %d attempts at once, want at most %d", most, bound)
	}
}
