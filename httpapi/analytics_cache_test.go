package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/simrelay/simrelay/account"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/store"
)

// readsCounted is the store, counting the analytics reads it answers.
type readsCounted struct {
	store.Backend
	stats atomic.Int64
}

func (r *readsCounted) Stats(q store.StatsQuery) (store.Stats, error) {
	r.stats.Add(1)
	return r.Backend.Stats(q)
}

// TestAnalyticsAnswersAreKeptUntilTheStoreIsWritten: asked again with
// nothing written, /analytics answers the same bytes without reading the
// counters again; another range, another filter or another company is its
// own answer; any write to the store (here, more history for the company,
// then another company's) makes the next answer read again, and it counts
// what was written.
func TestAnalyticsAnswersAreKeptUntilTheStoreIsWritten(t *testing.T) {
	t.Parallel()
	// PostgreSQL's generation counts every transaction of the database
	// server (never stale: store/postgres TestGenerationSeesLateCommits),
	// and the other tests' databases share the test cluster, so whether an
	// answer is kept depends on what they do meanwhile.
	storetest.EmbeddedOnly(t, "a kept answer needs a server whose other databases are quiet")
	st, company := benchFleet(t, 4)
	other := store.Company{Name: "Other", APIKeyHash: []byte("k2")}
	if err := st.CreateCompany(&other, &store.User{Email: "other@example.com", PasswordHash: "x"}); err != nil {
		t.Fatal(err)
	}
	if err := st.ProvisionDevices([]store.Device{{Fingerprint: "other-1", CompanyID: other.ID, Status: store.DeviceActive, TokenHash: []byte("t-o")}}); err != nil {
		t.Fatal(err)
	}
	reads := &readsCounted{Backend: st}
	srv := &Server{deps: Deps{Analytics: reads, Now: time.Now}}
	e := echo.New()
	get := func(companyID uint64, query string) []byte {
		t.Helper()
		rec := httptest.NewRecorder()
		c := e.NewContext(httptest.NewRequest(http.MethodGet, "/analytics?"+query, nil), rec)
		c.Set(keyPrincipal, account.Principal{CompanyID: companyID, Role: store.RoleAdmin, ViaAPIKey: true})
		if err := srv.analytics(c); err != nil || rec.Code != http.StatusOK {
			t.Fatalf("%s: %d %v", query, rec.Code, err)
		}
		return rec.Body.Bytes()
	}
	sent := func(body []byte) float64 {
		t.Helper()
		var a struct{ Totals struct{ Sent float64 } }
		if err := json.Unmarshal(body, &a); err != nil {
			t.Fatal(err)
		}
		return a.Totals.Sent
	}
	wantReads := func(when string, n int64) {
		t.Helper()
		if got := reads.stats.Load(); got != n {
			t.Fatalf("%s: %d reads of the counters, want %d", when, got, n)
		}
	}
	from := "from=" + time.Now().UTC().AddDate(0, 0, -89).Format(dateLayout)

	first := get(company, from)
	if sent(first) != 4*3 {
		t.Fatalf("the fleet's answer counts %v sent, want 12: %s", sent(first), first)
	}
	wantReads("first", 1)
	if again := get(company, from); !bytes.Equal(again, first) {
		t.Fatalf("asked again: %s, first %s", again, first)
	}
	wantReads("asked again, nothing written", 1)
	if got := get(company, from+"&devices=phone-00001"); sent(got) != 3 {
		t.Fatalf("one device's answer counts %v sent, want 3", sent(got))
	}
	get(company, "")
	wantReads("another filter and another range", 3)
	if got := get(other.ID, from); sent(got) != 0 {
		t.Fatalf("the other company's answer counts %v sent, want its own 0", sent(got))
	}
	wantReads("another company", 4)
	get(company, from)
	wantReads("the first asked once more", 4)

	at := time.Now().UTC().Add(-time.Minute)
	if err := st.ImportMessages([]store.Message{{UUID: "more-1", CompanyID: company, Device: "phone-00002", Direction: store.Outbound, Status: store.MsgDelivered,
		Channel: "sms", Phone: "+15550100001", SIMSlot: "SIM1", Text: "hi", Segments: 1, CreatedAt: at, UpdatedAt: at}}); err != nil {
		t.Fatal(err)
	}
	if got := get(company, from); sent(got) != 4*3+1 {
		t.Fatalf("after one more sent message the answer counts %v sent, want 13", sent(got))
	}
	wantReads("after a write", 5)
	if err := st.ProvisionDevices([]store.Device{{Fingerprint: "other-2", CompanyID: other.ID, Status: store.DeviceActive, TokenHash: []byte("t-o2")}}); err != nil {
		t.Fatal(err)
	}
	latest := get(company, from)
	wantReads("after another company's write", 6)
	// ?pretty is no parameter of the API's: the answer is the same bytes.
	if pretty := get(company, from+"&pretty"); !bytes.Equal(pretty, latest) {
		t.Fatalf("?pretty answered %s, without it %s", pretty, latest)
	}
	wantReads("with ?pretty", 6)
}
