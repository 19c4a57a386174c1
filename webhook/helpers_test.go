package webhook

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/store"
)

// fixture is a real store with one company and one paired device.
type fixture struct {
	t       *testing.T
	dir     string
	st      store.Backend
	company uint64
	device  string
	seq     int
	// events is the service whose inbound events the store writes.
	events *Service
	// log, when set, is the log of the services start runs.
	log *slog.Logger
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	st := storetest.Open(t)
	c := store.Company{Name: "Acme", APIKeyHash: []byte("k")}
	u := store.User{FirstName: "Ana", Email: "ana@example.com", EmailVerified: true, PasswordHash: "x"}
	if err := st.CreateCompany(&c, &u); err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, dir: dir, st: st, company: c.ID, device: "phone-1"}
	f.addDevice(f.device)
	return f
}

func (f *fixture) addDevice(fp string) {
	f.t.Helper()
	if err := f.st.ProvisionDevices([]store.Device{{Fingerprint: fp, CompanyID: f.company, Status: store.DeviceActive, TokenHash: []byte("t-" + fp)}}); err != nil {
		f.t.Fatal(err)
	}
}

// start runs a service on the fixture's store until the test ends (or the
// returned stop is called).
func (f *fixture) start(cfg Config, now func() time.Time) (*Service, func()) {
	f.t.Helper()
	if now == nil {
		now = time.Now
	}
	log := f.log
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	svc, err := New(cfg, f.st, log, now)
	if err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := svc.Run(ctx); err != nil {
			f.t.Errorf("Run: %v", err)
		}
	}()
	stop := sync.OnceFunc(func() { cancel(); <-done })
	f.t.Cleanup(stop)
	return svc, stop
}

// configure replaces the company's webhook set through the service.
func (f *fixture) configure(svc *Service, entries ...EntryInput) []store.WebhookEntry {
	f.t.Helper()
	out, err := svc.Replace(context.Background(), f.company, entries)
	if err != nil {
		f.t.Fatal(err)
	}
	return out
}

// inbound stores an SMS the device (of whichever company holds it) received,
// with the service's inbound events.
func (f *fixture) inbound(svc *Service, device, slot string, now time.Time) store.Message {
	f.t.Helper()
	if f.events != svc {
		f.st.SetInboundEvents(svc.InboundEvents())
		f.events = svc
	}
	f.seq++
	d, err := f.st.Device(device)
	if err != nil {
		f.t.Fatal(err)
	}
	m := store.Message{UUID: fmt.Sprintf("00000000-0000-7000-8000-%012d", f.seq), CompanyID: d.CompanyID, DeviceID: d.ID, Channel: "sms", Phone: "+15550100001",
		Text: fmt.Sprintf("hello %d", f.seq), SIMSlot: slot, ClientID: fmt.Sprintf("c%d", f.seq), ReceivedAt: "2026-11-22T10:00:00.000Z"}
	stored, _, err := f.st.StoreInbound(&m, func() time.Time { return now })
	if err != nil {
		f.t.Fatal(err)
	}
	return stored
}

func (f *fixture) secret() string {
	f.t.Helper()
	set, err := f.st.WebhookSet(f.company)
	if err != nil {
		f.t.Fatal(err)
	}
	return set.Secret
}

// lines returns the deliveries log, newest first.
func (f *fixture) lines() []store.WebhookAttempt {
	f.t.Helper()
	out, err := f.st.WebhookAttempts(f.company, 0, 100)
	if err != nil {
		f.t.Fatal(err)
	}
	return out
}

// eventually waits, with a deadline, for cond.
var eventually = poll.Until

func hmacHex(secret, timestamp string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(timestamp + "." + string(body)))
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

func ptr[T any](v T) *T { return &v }

// hanger holds receiver requests until released, counting those hanging now
// and the most that ever hung at once.
type hanger struct {
	release chan struct{}
	mu      sync.Mutex
	now     int // guarded by mu
	most    int // guarded by mu
}

func newHanger() *hanger { return &hanger{release: make(chan struct{})} }

// hang holds r until release is closed or the client gives up.
func (h *hanger) hang(r *http.Request) {
	h.mu.Lock()
	h.now++
	h.most = max(h.most, h.now)
	h.mu.Unlock()
	select {
	case <-h.release:
	case <-r.Context().Done():
	}
	h.mu.Lock()
	h.now--
	h.mu.Unlock()
}

// counts returns the requests hanging now and the most at once.
func (h *hanger) counts() (now, most int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.now, h.most
}

// holdCommits keeps the store's group commit busy with an inbound message
// whose event builder waits, until the returned release is called: what a
// slow fsync looks like to every write queued behind it. The builder stands
// in for a service's and writes no event; the store calls it only for a
// company with webhook entries, so the fixture's company needs one.
func (f *fixture) holdCommits() (release func()) {
	f.t.Helper()
	d, err := f.st.Device(f.device)
	if err != nil {
		f.t.Fatal(err)
	}
	entered, free, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	enter := sync.OnceFunc(func() { close(entered) }) // a transaction tried again builds again
	f.st.SetInboundEvents(store.InboundEvents{Build: func(store.WebhookSet, store.Message) (store.WebhookEvent, []store.WebhookDelivery, error) {
		enter()
		<-free
		return store.WebhookEvent{}, nil, nil
	}})
	f.events = nil
	go func() {
		defer close(done)
		m := store.Message{UUID: "00000000-0000-7000-8000-999999999999", CompanyID: d.CompanyID, DeviceID: d.ID, Channel: "sms", Phone: "+15550100009",
			Text: "held", SIMSlot: "SIM1", ClientID: "held", ReceivedAt: "2026-11-22T10:00:00.000Z"}
		_, _, _ = f.st.StoreInbound(&m, time.Now)
	}()
	<-entered
	return sync.OnceFunc(func() { close(free); <-done })
}

// TestMain stops the PostgreSQL cluster of a run on it (storetest.EnvStore).
func TestMain(m *testing.M) { storetest.Main(m) }
