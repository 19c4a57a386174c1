package web_test

import (
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/store"
)

var queueIDOf = regexp.MustCompile(`"queue_id":"([^"]+)"`)

func TestScheduledSMSIsShownScheduledThenQueuedAndCancels(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.acmeWithPhone()
	events, _ := b.stream(t)
	poll.Until(t, "the stream is open", func() bool { return e.broker.Streams() == 1 })

	// The browser's date-time input: minutes, no zone, taken as UTC.
	at := e.clock.Now().Add(2 * time.Hour).UTC()
	send := func(when string) page {
		return b.post("/console/messages/send", url.Values{"device_fingerprint": {"fp-1"}, "phone": {"+15550100000"}, "message": {"later"}, "sim_slot": {"SIM1"}, "send_at": {when}})
	}
	if p := send("yesterday"); p.status != http.StatusBadRequest || !strings.Contains(p.body, `"field":"send_at"`) {
		t.Errorf("a send-at that is no time: got %d %s, want 400 naming send_at", p.status, p.body)
	}
	p := send(at.Format("2006-01-02T15:04"))
	if p.status != http.StatusOK || !strings.Contains(p.body, `"status":"scheduled"`) || !strings.Contains(p.body, `"send_at":"`+at.Truncate(time.Minute).Format(time.RFC3339)+`"`) {
		t.Fatalf("schedule: %d %s", p.status, p.body)
	}
	first := queueIDOf.FindStringSubmatch(p.body)[1]
	thread := b.get("/console/messages?device=fp-1&phone=%2B15550100000")
	if !strings.Contains(thread.body, `data-status="scheduled"`) || !strings.Contains(thread.body, `value="`+first+`"`) {
		t.Error("the thread shows no scheduled message with its cancel button")
	}
	// Due, it turns queued on the page.
	e.clock.Advance(3 * time.Hour)
	e.sms.ReleaseDue()
	waitEventAll(t, events, `"queue_id":"`+first+`"`, `"status":"queued"`)

	// A second one is cancelled from the page.
	p = send(e.clock.Now().Add(time.Hour).UTC().Format("2006-01-02T15:04"))
	second := queueIDOf.FindStringSubmatch(p.body)[1]
	if p := b.post("/console/messages/cancel", url.Values{"queue_id": {second}}); p.status != http.StatusOK || !strings.Contains(p.body, `"status":"canceled"`) {
		t.Fatalf("cancel: %d %s", p.status, p.body)
	}
	waitEventAll(t, events, `"queue_id":"`+second+`"`, `"status":"canceled"`)
	// A second cancel is a 409, said as a sentence.
	if p := b.post("/console/messages/cancel", url.Values{"queue_id": {second}}); p.status != http.StatusConflict || !strings.Contains(p.body, "only a scheduled or queued message can be canceled") {
		t.Errorf("cancel again: got %d %s, want 409 with the sentence", p.status, p.body)
	}
}

func TestCancelAcrossCompaniesIsNotFound(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.company("Acme", "ada@acme.test", "Correct1horse")
	e.company("Bolt", "bo@bolt.test", "Correct1horse")
	e.pairPhone(e.pairingCode(key), "fp-1", false)
	ada, bo := e.browser(), e.browser()
	ada.signIn("ada@acme.test", "Correct1horse")
	bo.signIn("bo@bolt.test", "Correct1horse")
	p := ada.post("/console/messages/send", url.Values{"device_fingerprint": {"fp-1"}, "phone": {"+15550100000"}, "message": {"later"}, "sim_slot": {"SIM1"},
		"send_at": {e.clock.Now().Add(time.Hour).UTC().Format(time.RFC3339)}})
	id := queueIDOf.FindStringSubmatch(p.body)[1]
	if got := bo.post("/console/messages/cancel", url.Values{"queue_id": {id}}); got.status != http.StatusNotFound {
		t.Errorf("cancel another company's message: got %d %s, want 404", got.status, got.body)
	}
	if m, err := e.store.MessageByUUID(1, id); err != nil || m.Status != store.MsgScheduled {
		t.Errorf("after the refused cancel: %+v %v", m.Status, err)
	}
}

func TestOptOutsPage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.company("Acme", "ada@acme.test", "Correct1horse")
	e.pairPhone(e.pairingCode(key), "fp-1", false)
	admin := e.browser()
	admin.signIn("ada@acme.test", "Correct1horse")
	mo := e.member(admin)

	if p := mo.post("/console/opt-outs", url.Values{"phone": {"5550100000"}}); p.status != http.StatusBadRequest || !strings.Contains(p.body, `"field":"phone"`) {
		t.Errorf("a number without +: got %d %s", p.status, p.body)
	}
	if p := mo.post("/console/opt-outs", url.Values{"phone": {"+15550100000"}}); p.status != http.StatusOK {
		t.Fatalf("a member adds: %d %s", p.status, p.body)
	}
	if p := mo.get("/console/opt-outs"); !strings.Contains(p.body, "15550100000") || !strings.Contains(p.body, "api") {
		t.Error("the list lacks the number")
	}
	// A send to it is refused as the API refuses it.
	if p := mo.post("/console/messages/send", url.Values{"device_fingerprint": {"fp-1"}, "phone": {"+15550100000"}, "message": {"hi"}, "sim_slot": {"SIM1"}}); p.status != http.StatusForbidden || !strings.Contains(p.body, `"error":"recipient_opted_out"`) {
		t.Errorf("a send to an opted-out number: got %d %s, want 403 recipient_opted_out", p.status, p.body)
	}
	// The keyword switch is an admin's: hidden from a member, 403 when forged.
	if p := mo.get("/console/opt-outs"); strings.Contains(p.body, `action="/console/opt-outs/keywords"`) {
		t.Error("a member's page offers the keyword switch")
	}
	if p := mo.post("/console/opt-outs/keywords", url.Values{"opt_out_keywords": {"false"}}); p.status != http.StatusForbidden {
		t.Errorf("a member's forged switch: got %d, want 403", p.status)
	}
	if p := admin.post("/console/opt-outs/keywords", url.Values{"opt_out_keywords": {"false"}}); p.status != http.StatusOK {
		t.Fatalf("the admin's switch: %d %s", p.status, p.body)
	}
	if co, _ := e.store.Company(1); co.OptOutKeywords == nil || *co.OptOutKeywords {
		t.Error("the keywords are still on")
	}
	if p := admin.get("/console/opt-outs"); !strings.Contains(p.body, "Turn the keywords on") {
		t.Error("the page does not show the keywords off")
	}
	if p := mo.post("/console/opt-outs/remove", url.Values{"phone": {"+15550100000"}}); p.status != http.StatusOK {
		t.Fatalf("a member removes: %d %s", p.status, p.body)
	}
	if p := mo.post("/console/opt-outs/remove", url.Values{"phone": {"+15550100000"}}); p.status != http.StatusNotFound {
		t.Errorf("remove again: got %d, want 404", p.status)
	}
	if list, _ := e.store.OptOuts(1, "", 10); len(list) != 0 {
		t.Errorf("the list after removal: %v", list)
	}
}

func TestWebhookEditorEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.company("Acme", "ada@acme.test", "Correct1horse")
	b := e.browser()
	b.signIn("ada@acme.test", "Correct1horse")
	// A new entry's boxes are the inbound types, and saving them keeps the default.
	p := b.get("/console/webhooks")
	for _, ev := range []string{"sms.received", "whatsapp.received", "imessage.received"} {
		if !strings.Contains(p.body, `name="webhooks[0].events" value="`+ev+`" checked`) {
			t.Errorf("a new entry's %s box is not ticked", ev)
		}
	}
	if strings.Contains(p.body, `value="message.delivered" checked`) {
		t.Error("a status event is ticked by default")
	}
	save := func(events ...string) page {
		return b.post("/console/webhooks", url.Values{"rows": {"1"}, "webhooks[0].url": {"http://127.0.0.1:9/hook"}, "webhooks[0].events": events})
	}
	if p := save("sms.received", "whatsapp.received", "imessage.received"); p.status != http.StatusOK {
		t.Fatalf("save: %d %s", p.status, p.body)
	}
	set, _ := e.store.WebhookSet(1)
	if len(set.Entries) != 1 || set.Entries[0].Events != nil {
		t.Fatalf("the default boxes stored %v, want no list", set.Entries)
	}
	b2 := url.Values{"rows": {"1"}, "webhooks[0].id": {"1"}, "webhooks[0].url": {"http://127.0.0.1:9/hook"}, "webhooks[0].events": {"sms.received", "message.delivered", "message.failed"}}
	if p := b.post("/console/webhooks", b2); p.status != http.StatusOK {
		t.Fatalf("opt in: %d %s", p.status, p.body)
	}
	set, _ = e.store.WebhookSet(1)
	if got := set.Entries[0].Events; !slices.Equal(got, []string{"sms.received", "message.delivered", "message.failed"}) {
		t.Errorf("stored events %v", got)
	}
	p = b.get("/console/webhooks")
	if !strings.Contains(p.body, `value="message.delivered" checked`) || strings.Contains(p.body, `name="webhooks[0].events" value="whatsapp.received" checked`) {
		t.Error("the page does not show the entry's events")
	}
	b2.Set("webhooks[0].events", "message.read")
	if p := b.post("/console/webhooks", b2); p.status != http.StatusBadRequest || !strings.Contains(p.body, `"field":"webhooks[0].events"`) {
		t.Errorf("an unknown event: got %d %s", p.status, p.body)
	}
}

// The send box's working hours reach the message as its window; a bad one
// answers 400 naming the window's field, and empty times send at any hour.
func TestSendBoxWorkingHours(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.acmeWithPhone()
	if p := b.get("/console/messages?device=fp-1"); !strings.Contains(p.body, `name="window_from"`) || !strings.Contains(p.body, `name="window_days" value="mon"`) {
		t.Fatal("the send box has no working hours")
	}
	send := func(from, to, zone string, days ...string) page {
		return b.post("/console/messages/send", url.Values{"device_fingerprint": {"fp-1"}, "phone": {"+15550100000"}, "message": {"hours"}, "sim_slot": {"SIM1"},
			"window_from": {from}, "window_to": {to}, "window_zone": {zone}, "window_days": days})
	}
	if p := send("09:00", "17:00", "Mars/Olympus"); p.status != http.StatusBadRequest || !strings.Contains(p.body, `"field":"window.time_zone"`) {
		t.Errorf("a zone that is none: got %d %s, want 400 naming window.time_zone", p.status, p.body)
	}
	if p := send("17:00", "09:00", "UTC"); p.status != http.StatusBadRequest || !strings.Contains(p.body, `"field":"window.to"`) {
		t.Errorf("until before from: got %d %s, want 400 naming window.to", p.status, p.body)
	}
	// Open only on the day after tomorrow, so closed by the test's clock, whatever the day.
	day := strings.ToLower(e.clock.Now().AddDate(0, 0, 2).Weekday().String()[:3])
	p := send("09:00", "17:00", "UTC", day)
	if p.status != http.StatusOK {
		t.Fatalf("send: %d %s", p.status, p.body)
	}
	m, err := e.sms.Queued(t.Context(), 1, queueIDOf.FindStringSubmatch(p.body)[1])
	if err != nil || m.Window == nil || m.Window.TimeZone != "UTC" || m.Window.From != "09:00" || m.Window.To != "17:00" || !slices.Equal(m.Window.Days, []string{day}) {
		t.Fatalf("got window %+v (%v), want %s 09:00-17:00 UTC", m.Window, err, day)
	}
	// Outside its hours a link's read holds it; the thread says until when.
	dev, err := e.store.Device("fp-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.sms.Pending(t.Context(), dev, 0, 10); err != nil {
		t.Fatal(err)
	}
	// The hold is written in the store's next shared commit (a link's read
	// does not wait for it), so the thread says so once that commit is in.
	opens := m.Window.Next(e.clock.Now())
	poll.Until(t, "the thread says the held message waits until "+opens.String(), func() bool {
		thread := b.get("/console/messages?device=fp-1&phone=%2B15550100000")
		return strings.Contains(thread.body, `outside its hours, until <time datetime="`+opens.Format(time.RFC3339)+`"`)
	})
	p = send("", "", "Europe/Berlin")
	m, err = e.sms.Queued(t.Context(), 1, queueIDOf.FindStringSubmatch(p.body)[1])
	if err != nil || m.Window != nil {
		t.Fatalf("empty times: got window %+v (%v), want none", m.Window, err)
	}
}

// The webhook editor reads the numbers of its WhatsApp and iMessage scopes
// in the company's region, as PUT /webhooks/inbound-sms does: a national
// number is kept, and shown, as the E.164 number the number list shows.
func TestWebhookEditorNumbersInTheRegion(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.company("Acme", "ada@acme.test", "Correct1horse")
	b := e.browser()
	b.signIn("ada@acme.test", "Correct1horse")
	row := url.Values{"rows": {"1"}, "webhooks[0].url": {"http://127.0.0.1:9/hook"}, "webhooks[0].wa_numbers": {"07400 654321, 447400123456"}, "webhooks[0].im_handles": {"020 7946 0958"}}
	if p := b.post("/console/webhooks", row); p.status != http.StatusBadRequest || !strings.Contains(p.body, `"field":"webhooks[0].wa_numbers"`) {
		t.Fatalf("a national number without a region: got %d %s", p.status, p.body)
	}
	if _, err := e.store.UpdateCompany(1, func(c *store.Company) error { c.Region = "GB"; return nil }); err != nil {
		t.Fatal(err)
	}
	if p := b.post("/console/webhooks", row); p.status != http.StatusOK {
		t.Fatalf("save: %d %s", p.status, p.body)
	}
	set, _ := e.store.WebhookSet(1)
	if len(set.Entries) != 1 || !slices.Equal(set.Entries[0].WANumbers, []string{"+447400654321", "+447400123456"}) || !slices.Equal(set.Entries[0].IMHandles, []string{"+442079460958"}) {
		t.Fatalf("stored %+v, want the numbers in E.164", set.Entries)
	}
	if p := b.get("/console/webhooks"); !strings.Contains(p.body, `value="&#43;447400654321, &#43;447400123456"`) {
		t.Errorf("the editor does not show the stored numbers")
	}
}
