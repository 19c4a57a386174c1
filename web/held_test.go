package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/android-protocol/client"
	"github.com/simrelay/simrelay/internal/testhttp"
)

// A send outside its hours to a phone that is offline shows when it may go
// at once, in the thread and its reload, as the API's queue item does
// (held_until): no link has come to hold it yet, but its window decides.
// It showed nothing until a link had read the job.
func TestThreadShowsHoursForAnOfflinePhone(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.company("Acme", "ada@acme.test", "Correct1horse")
	if _, err := client.Register(context.Background(), testhttp.Client, e.url, client.RegisterInput{
		PairingCode: e.pairingCode(key), DeviceFingerprint: "off-1", DeviceName: "Offline",
	}); err != nil {
		t.Fatal(err)
	}
	b := e.browser()
	b.signIn("ada@acme.test", "Correct1horse")
	// Open only on the day after tomorrow, so closed by the test's clock, whatever the day.
	day := strings.ToLower(e.clock.Now().AddDate(0, 0, 2).Weekday().String()[:3])
	p := b.post("/console/messages/send", url.Values{"device_fingerprint": {"off-1"}, "phone": {"+15550100000"}, "message": {"hours"}, "sim_slot": {"SIM1"},
		"window_from": {"09:00"}, "window_to": {"17:00"}, "window_zone": {"UTC"}, "window_days": {day}})
	if p.status != http.StatusOK {
		t.Fatalf("send: %d %s", p.status, p.body)
	}
	m, err := e.sms.Queued(t.Context(), 1, queueIDOf.FindStringSubmatch(p.body)[1])
	if err != nil || m.Window == nil || !m.HeldUntil.IsZero() {
		t.Fatalf("queued %+v (%v), want a window and no link's hold yet", m, err)
	}
	opens := m.Window.Next(e.clock.Now()).Format(time.RFC3339)
	if !strings.Contains(p.body, `"held_until":"`+opens+`"`) {
		t.Errorf("the send's answer %s, want held_until %s", p.body, opens)
	}
	if thread := b.get("/console/messages?device=off-1&phone=%2B15550100000"); !strings.Contains(thread.body, `outside its hours, until <time datetime="`+opens+`"`) {
		t.Errorf("the thread does not say the message waits until %s:\n%s", opens, thread.body)
	}
	if reload := b.get("/console/messages/thread?device=off-1&phone=%2B15550100000"); !strings.Contains(reload.body, `"held_until":"`+opens+`"`) {
		t.Errorf("the thread's reload %s, want held_until %s", reload.body, opens)
	}
}
