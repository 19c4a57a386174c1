package httpapi

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/simrelay/simrelay/account"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/store"
)

// BenchmarkAnalyticsByDevice merges the byDevice list of a fleet: 10,000
// phones plus 50, each counted in the range, their fingerprints in no
// particular order of their ids.
func BenchmarkAnalyticsByDevice(b *testing.B) {
	const n = 10050
	regs := make([]store.StatsDevice, n)
	counts := make(map[uint64]store.Counts, n)
	for i := range regs {
		id := uint64(i + 1)
		regs[i] = store.StatsDevice{ID: id, Fingerprint: fmt.Sprintf("phone-%05d", i*7919%n), Name: fmt.Sprint("Phone ", i), Live: true}
		counts[id] = store.Counts{Sent: 100, Delivered: 99, Received: 50}
	}
	for b.Loop() {
		if out := byDevice(regs, nil, counts); len(out) != n {
			b.Fatalf("%d items, want %d", len(out), n)
		}
	}
}

// BenchmarkAnalyticsFleet answers GET /analytics over 90 days with no
// filter, through the handler and a real store: a fleet of 10,000 phones,
// each with an outbound and an inbound message on three of the days, so
// byDevice lists all 10,000 (as in simrelay bench after its phases). Each
// answer is read and encoded: as if the store had been written since the
// last one.
func BenchmarkAnalyticsFleet(b *testing.B) { benchAnalyticsFleet(b, false) }

// BenchmarkAnalyticsFleetKept is the same answer asked again with nothing
// written since: the kept answer.
func BenchmarkAnalyticsFleetKept(b *testing.B) { benchAnalyticsFleet(b, true) }

func benchAnalyticsFleet(b *testing.B, kept bool) {
	st, company := benchFleet(b, 10000)
	srv := &Server{deps: Deps{Analytics: st, Now: time.Now}}
	e := echo.New()
	cpu := processCPU()
	for b.Loop() {
		if !kept {
			srv.answers = answerCache{}
		}
		rec := httptest.NewRecorder()
		c := e.NewContext(httptest.NewRequest(http.MethodGet, "/analytics?from="+time.Now().UTC().AddDate(0, 0, -89).Format(dateLayout), nil), rec)
		c.Set(keyPrincipal, account.Principal{CompanyID: company, Role: store.RoleAdmin, ViaAPIKey: true})
		if err := srv.analytics(c); err != nil || rec.Code != http.StatusOK {
			b.Fatal(rec.Code, err)
		}
		if b.N == 1 && rec.Body.Len() < 1e6 {
			b.Fatalf("a %d-byte answer, want byDevice of every phone", rec.Body.Len())
		}
	}
	// The process's CPU time per answer (garbage collection included),
	// which other work on a shared machine moves less than the wall time.
	b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
}

// processCPU is the CPU time the process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchFleet is a store with one company and n phones, each with an
// outbound (delivered) and an inbound message on three of the last 90 days.
func benchFleet(b testing.TB, n int) (store.Backend, uint64) {
	b.Helper()
	st := storetest.OpenWith(b, storetest.Options{})
	c := store.Company{Name: "Fleet", APIKeyHash: []byte("k")}
	if err := st.CreateCompany(&c, &store.User{Email: "fleet@example.com", PasswordHash: "x"}); err != nil {
		b.Fatal(err)
	}
	devs := make([]store.Device, n)
	for i := range devs {
		devs[i] = store.Device{Fingerprint: fmt.Sprintf("phone-%05d", i), Name: fmt.Sprint("Phone ", i), CompanyID: c.ID, Status: store.DeviceActive, TokenHash: []byte(fmt.Sprint("t-", i))}
	}
	if err := st.ProvisionDevices(devs); err != nil {
		b.Fatal(err)
	}
	today := time.Now().UTC().Truncate(24 * time.Hour)
	var msgs []store.Message
	for i := range n {
		for j, ago := range []int{89 - i%45, 44 - i%44, 0} {
			at := today.AddDate(0, 0, -ago).Add(time.Duration(i) * time.Millisecond)
			base := store.Message{CompanyID: c.ID, Device: devs[i].Fingerprint, Channel: "sms", Phone: "+15550100001", SIMSlot: "SIM1",
				Text: "hi", Segments: 1, CreatedAt: at, UpdatedAt: at}
			out, in := base, base
			out.UUID, out.Direction, out.Status = fmt.Sprintf("o-%d-%d", i, j), store.Outbound, store.MsgDelivered
			in.UUID, in.Direction, in.Status, in.ClientID, in.ReceivedAt = fmt.Sprintf("i-%d-%d", i, j), store.Inbound, store.MsgReceived, fmt.Sprintf("c-%d-%d", i, j), at.Format(time.RFC3339)
			msgs = append(msgs, out, in)
		}
	}
	slices.SortFunc(msgs, func(a, b store.Message) int { return a.CreatedAt.Compare(b.CreatedAt) })
	for chunk := range slices.Chunk(msgs, 20000) {
		if err := st.ImportMessages(chunk); err != nil {
			b.Fatal(err)
		}
	}
	return st, c.ID
}
