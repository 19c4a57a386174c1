package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	androidproto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/device"
	"github.com/simrelay/simrelay/httpapi"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/internal/testhttp"
	"github.com/simrelay/simrelay/pacing"
	"github.com/simrelay/simrelay/store"
)

// summariesDown is the store with its device summaries' read failing, as
// a database that went away after a registration committed fails it.
type summariesDown struct {
	store.Backend
	down atomic.Bool
}

func (s *summariesDown) DeviceSummaries(companyID uint64, ids []uint64) (map[uint64]store.DeviceSummary, error) {
	if s.down.Load() {
		return nil, fmt.Errorf("store: summaries: %w", store.ErrUnavailable)
	}
	return s.Backend.DeviceSummaries(companyID, ids)
}

// noLinks is a hub with no phone linked.
type noLinks struct{}

func (noLinks) Presence(map[string]uint64) map[string]time.Time { return nil }
func (noLinks) Disconnect(string, uint64, int, string) <-chan struct{} {
	done := make(chan struct{})
	close(done)
	return done
}
func (noLinks) Configure(string, uint64, androidproto.Config) {}
func (noLinks) Pace(string, uint64, int)                      {}

// A registration answers from what its commit returned: a store read
// after the commit that failed answered 503 for a registration that was
// made, its pairing code spent, so the phone's retry of the code (what
// PROTOCOL.md says of a 5xx) was refused and it had to be paired again.
// With the store's summaries failing, a new device's registration and a
// registration again (the device's queue and failure kept, and answered)
// are 201, with a token that works.
func TestRegisterAnswersFromItsCommit(t *testing.T) {
	t.Parallel()
	st := &summariesDown{Backend: storetest.Open(t)}
	company := storetest.Company(t, st, "Acme", "register-fault@example.com")
	srv := httptest.NewUnstartedServer(nil)
	publicURL := "http://" + srv.Listener.Addr().String()
	devices := device.New(device.Config{PublicURL: publicURL}, st, time.Now)
	reg := prometheus.NewRegistry()
	api, err := httpapi.New(httpapi.Config{PublicURL: publicURL, GeneralRate: pacing.Rate{Limit: 100, Window: time.Minute},
		AuthRate: pacing.Rate{Limit: 15, Window: 15 * time.Minute}}, httpapi.Deps{Devices: devices, Phones: noLinks{},
		Logger: slog.New(slog.DiscardHandler), Registry: reg, Gatherer: reg, Now: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = api.Handler()
	srv.Start()
	t.Cleanup(srv.Close)

	register := func() (int, map[string]any) {
		t.Helper()
		p, err := devices.CreatePairing(context.Background(), company.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := json.Marshal(map[string]string{"pairing_code": p.Code, "device_fingerprint": "pixel-fault"})
		res, err := testhttp.Client.Post(srv.URL+"/device/register", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		var out map[string]any
		_ = json.Unmarshal(raw, &out)
		if res.StatusCode != http.StatusCreated {
			t.Fatalf("registration with the summaries' read down: %d %s, want 201", res.StatusCode, raw)
		}
		token, _ := out["device_token"].(string)
		if _, err := devices.Authenticate(context.Background(), token); err != nil {
			t.Fatalf("the token answered: %v", err)
		}
		return res.StatusCode, out
	}
	st.down.Store(true)
	_, out := register()
	dev, _ := out["device"].(map[string]any)
	if dev["queue_depth"] != 0.0 || fmt.Sprint(dev["last_failures"]) != "[]" {
		t.Fatalf("a new device's answer: %v, want no queue and no failures", dev)
	}

	d, err := st.CompanyDevice(company.ID, "pixel-fault")
	if err != nil {
		t.Fatal(err)
	}
	for i, status := range []string{store.MsgFailed, ""} {
		m := store.Message{UUID: fmt.Sprintf("fault-%d", i), CompanyID: company.ID, Device: d.Fingerprint, SIMSlot: "SIM1", Channel: "sms",
			Phone: fmt.Sprintf("+1555200000%d", i), Text: "hi"}
		if _, _, err := st.Enqueue(&m, store.IdempotencyKey{}, time.Now, nil, nil); err != nil {
			t.Fatal(err)
		}
		if status != "" {
			if _, _, err := st.Transition(company.ID, d.ID, m.UUID, status, "no_service", "", time.Now()); err != nil {
				t.Fatal(err)
			}
		}
	}
	_, out = register()
	dev, _ = out["device"].(map[string]any)
	failures, _ := dev["last_failures"].([]any)
	if dev["queue_depth"] != 1.0 || len(failures) != 1 {
		t.Fatalf("the answer of a registration again: %v, want the queued send and the failed one", dev)
	}
}
