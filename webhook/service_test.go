package webhook

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/internal/syncbuf"
	"github.com/simrelay/simrelay/internal/testclock"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/webhook/webhooktest"
)

// short is a schedule for tests: quick retries, the count of the real one.
var short = []time.Duration{10 * time.Millisecond, 10 * time.Millisecond, 10 * time.Millisecond}

func TestDeliverySignedAndShaped(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rc := webhooktest.NewReceiver(t, true, nil)
	svc, _ := f.start(Config{AllowPrivate: true, RootCAs: rc.Pool(), Schedule: short}, nil)
	entries := f.configure(svc, EntryInput{URL: rc.URL + "/hook"})
	m := f.inbound(svc, f.device, "SIM2", time.Now())

	eventually(t, "the delivery arrives", func() bool { return len(rc.Requests()) == 1 })
	got := rc.Requests()[0]
	h := got.Header
	if want := hmacHex(f.secret(), h.Get(HeaderTimestamp), got.Body); h.Get(HeaderSignature) != want {
		t.Fatalf("got signature %q, want %q", h.Get(HeaderSignature), want)
	}
	if h.Get("Content-Type") != "application/json" || h.Get("User-Agent") != UserAgent || h.Get(HeaderEvent) != "sms.received" {
		t.Fatalf("got headers %v", h)
	}
	var body struct {
		ID        string         `json:"id"`
		Type      string         `json:"type"`
		CreatedAt string         `json:"created_at"`
		Data      map[string]any `json:"data"`
	}
	if err := json.Unmarshal(got.Body, &body); err != nil {
		t.Fatal(err)
	}
	if body.ID == "" || body.ID != h.Get(HeaderDelivery) {
		t.Fatalf("got body id %q and delivery header %q, want them equal", body.ID, h.Get(HeaderDelivery))
	}
	if body.Type != "sms.received" || body.CreatedAt != m.CreatedAt.UTC().Format("2006-01-02T15:04:05.000Z") {
		t.Fatalf("got type %q created_at %q", body.Type, body.CreatedAt)
	}
	want := map[string]any{"id": float64(m.ID), "uuid": m.UUID, "phone": m.Phone, "message": m.Text, "sim_slot": "SIM2",
		"device_fingerprint": f.device, "received_at": m.ReceivedAt, "channel": "sms"}
	for k, v := range want {
		if body.Data[k] != v {
			t.Errorf("data.%s: got %v, want %v", k, body.Data[k], v)
		}
	}
	eventually(t, "the attempt is logged", func() bool { return len(f.lines()) == 1 })
	line := f.lines()[0]
	if line.State != store.WebhookDelivered || line.StatusCode != http.StatusNoContent || line.WebhookID != entries[0].ID || line.DeliveryID != body.ID || line.Attempt != 1 {
		t.Fatalf("got log line %+v", line)
	}
}

// Failed attempts are retried on the schedule, each signed afresh with the
// same delivery id; after the last retry the delivery fails. A 3xx is a
// failure and is not followed; a timeout is a failure.
func TestRetriesThenFails(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var slow sync.Once
	rc := webhooktest.NewReceiver(t, true, func(n int, r *http.Request, w http.ResponseWriter) int {
		switch n {
		case 1:
			return http.StatusInternalServerError
		case 2:
			w.Header().Set("Location", "/elsewhere")
			return http.StatusFound
		case 3:
			slow.Do(func() { <-r.Context().Done() }) // no answer within the timeout
			return http.StatusOK
		}
		return http.StatusServiceUnavailable
	})
	svc, _ := f.start(Config{AllowPrivate: true, RootCAs: rc.Pool(), Schedule: short, Timeout: 300 * time.Millisecond}, nil)
	f.configure(svc, EntryInput{URL: rc.URL + "/hook"})
	f.inbound(svc, f.device, "SIM1", time.Now())

	eventually(t, "four attempts are logged", func() bool { return len(f.lines()) == len(short)+1 })
	lines := f.lines()
	for i, l := range lines {
		attempt := len(lines) - i
		wantState := store.WebhookPending
		if attempt == len(short)+1 {
			wantState = store.WebhookFailed
		}
		if l.Attempt != attempt || l.State != wantState || l.DeliveryID != lines[0].DeliveryID {
			t.Errorf("line %d: got attempt %d %s of %s, want attempt %d %s of one delivery", i, l.Attempt, l.State, l.DeliveryID, attempt, wantState)
		}
		if (wantState == store.WebhookPending) != !l.NextAttemptAt.IsZero() {
			t.Errorf("attempt %d: got next attempt %v with state %s", attempt, l.NextAttemptAt, l.State)
		}
	}
	byAttempt := func(n int) store.WebhookAttempt { return lines[len(lines)-n] }
	if a := byAttempt(1); a.StatusCode != 500 || !strings.Contains(a.Error, "500") {
		t.Errorf("attempt 1: got %d %q, want 500", a.StatusCode, a.Error)
	}
	if a := byAttempt(2); a.StatusCode != 302 || !strings.Contains(a.Error, "redirects are not followed") {
		t.Errorf("attempt 2: got %d %q, want a refused 302", a.StatusCode, a.Error)
	}
	if a := byAttempt(3); a.StatusCode != 0 || !strings.Contains(a.Error, "no answer within") {
		t.Errorf("attempt 3: got %d %q, want a timeout", a.StatusCode, a.Error)
	}
	reqs := rc.Requests()
	for _, r := range reqs {
		if r.Path != "/hook" {
			t.Errorf("got a request to %s: the redirect was followed", r.Path)
		}
		if r.Header.Get(HeaderDelivery) != lines[0].DeliveryID {
			t.Errorf("got delivery id %q, want %q on every attempt", r.Header.Get(HeaderDelivery), lines[0].DeliveryID)
		}
		if want := hmacHex(f.secret(), r.Header.Get(HeaderTimestamp), r.Body); r.Header.Get(HeaderSignature) != want {
			t.Errorf("attempt signature %q, want %q", r.Header.Get(HeaderSignature), want)
		}
	}
	if ids, _, _ := f.st.DueWebhookDeliveries(time.Now().Add(time.Hour), 10, nil); len(ids) != 0 {
		t.Fatalf("got %d deliveries still in the outbox, want 0", len(ids))
	}
}

// An entry its admin deactivated while an attempt was under way is not
// disabled by that attempt's answer: the receiver's 410 finds it inactive
// already, so nothing is disabled, and neither the operator log nor the
// deliveries log says the attempt disabled it.
func TestAnswerToAnEntryDeactivatedMeanwhileDisablesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var logs syncbuf.Buffer
	f.log = slog.New(slog.NewTextHandler(&logs, nil))
	answering, deactivated := make(chan struct{}), make(chan struct{})
	arrived := sync.OnceFunc(func() { close(answering) })
	rc := webhooktest.NewReceiver(t, true, func(int, *http.Request, http.ResponseWriter) int {
		arrived()
		<-deactivated
		return http.StatusGone
	})
	svc, stop := f.start(Config{AllowPrivate: true, RootCAs: rc.Pool(), Schedule: []time.Duration{time.Hour}}, nil)
	entry := f.configure(svc, EntryInput{URL: rc.URL})[0]
	f.inbound(svc, f.device, "SIM1", time.Now())
	select {
	case <-answering:
	case <-time.After(poll.Timeout):
		t.Fatal("no attempt")
	}
	id := int64(entry.ID)
	f.configure(svc, EntryInput{ID: &id, URL: rc.URL, Active: ptr(false)})
	close(deactivated)
	eventually(t, "the attempt is logged", func() bool { return len(f.lines()) == 1 })
	stop() // the operator log's line is written once the attempt's line is
	if l := f.lines()[0]; l.State != store.WebhookFailed || l.StatusCode != http.StatusGone || strings.Contains(l.Error, "disabled") {
		t.Errorf("got %+v, want a failed attempt with 410 that says nothing of disabling", l)
	}
	if strings.Contains(logs.String(), "webhook entry disabled") {
		t.Errorf("the operator log says the attempt disabled the entry its admin had deactivated:\n%s", logs.String())
	}
	set, _ := f.st.WebhookSet(f.company)
	if e := set.Entries[0]; e.Active || e.DisabledReason != "" || !e.DisabledAt.IsZero() {
		t.Errorf("got entry %+v, want it inactive as its admin left it, with no reason of the server's", e)
	}
}

// A 410 disables the entry at once; its other pending deliveries are then
// failed without being sent.
func TestGoneDisablesTheEntry(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rc := webhooktest.NewReceiver(t, true, func(int, *http.Request, http.ResponseWriter) int { return http.StatusGone })
	svc, _ := f.start(Config{AllowPrivate: true, RootCAs: rc.Pool(), Schedule: short}, nil)
	f.configure(svc, EntryInput{URL: rc.URL})
	f.inbound(svc, f.device, "SIM1", time.Now())
	eventually(t, "the attempt is logged", func() bool { return len(f.lines()) == 1 })
	if l := f.lines()[0]; l.State != store.WebhookFailed || l.StatusCode != http.StatusGone {
		t.Fatalf("got %+v, want a failed delivery with 410", l)
	}
	set, _ := f.st.WebhookSet(f.company)
	if e := set.Entries[0]; e.Active || e.DisabledReason == "" || e.DisabledAt.IsZero() {
		t.Fatalf("got entry %+v, want it disabled with a reason", e)
	}
	// An inactive entry gets no new deliveries.
	f.inbound(svc, f.device, "SIM1", time.Now())
	if ids, _, _ := f.st.DueWebhookDeliveries(time.Now().Add(time.Hour), 10, nil); len(ids) != 0 {
		t.Fatalf("got %d deliveries for a disabled entry, want 0", len(ids))
	}
	if n := len(rc.Requests()); n != 1 {
		t.Fatalf("got %d requests, want 1", n)
	}
}

// An entry that fails for DisableAfter without a success is disabled; a
// success in between resets the clock.
func TestFailingTooLongDisables(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	clock := testclock.New(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	fail := true
	var mu sync.Mutex
	rc := webhooktest.NewReceiver(t, true, func(int, *http.Request, http.ResponseWriter) int {
		mu.Lock()
		defer mu.Unlock()
		if fail {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	hour := []time.Duration{time.Hour, time.Hour, time.Hour}
	svc, _ := f.start(Config{AllowPrivate: true, RootCAs: rc.Pool(), Schedule: hour, Jitter: -1}, clock.Now)
	f.configure(svc, EntryInput{URL: rc.URL})
	entry := func() store.WebhookEntry {
		set, _ := f.st.WebhookSet(f.company)
		return set.Entries[0]
	}

	f.inbound(svc, f.device, "SIM1", clock.Now())
	eventually(t, "the first attempt", func() bool { return len(f.lines()) == 1 })
	if since := entry().FailingSince; !since.Equal(clock.Now()) {
		t.Fatalf("got failing since %v, want %v", since, clock.Now())
	}
	// Four days later the retry fails too, but the entry stays on.
	clock.Advance(4 * 24 * time.Hour)
	svc.Kick()
	eventually(t, "the second attempt", func() bool { return len(f.lines()) == 2 })
	if e := entry(); !e.Active {
		t.Fatalf("disabled after 4 days: %+v", e)
	}
	// A day later a failure crosses five days: disabled.
	clock.Advance(24 * time.Hour)
	svc.Kick()
	eventually(t, "the third attempt", func() bool { return len(f.lines()) == 3 })
	l := f.lines()[0]
	if e := entry(); e.Active || !strings.Contains(e.DisabledReason, "5 days") {
		t.Fatalf("got entry %+v, want it disabled after 5 days", e)
	}
	if l.State != store.WebhookFailed || !strings.Contains(l.Error, "disabled") {
		t.Fatalf("got %+v, want the last attempt failed, saying the entry is disabled", l)
	}

	// Re-enabled (by a PUT), a success clears the streak.
	id := int64(entry().ID)
	f.configure(svc, EntryInput{ID: &id, URL: rc.URL})
	if e := entry(); !e.Active || !e.FailingSince.IsZero() || e.DisabledReason != "" {
		t.Fatalf("after re-enabling: got %+v, want a clean active entry", e)
	}
	mu.Lock()
	fail = false
	mu.Unlock()
	f.inbound(svc, f.device, "SIM1", clock.Now())
	eventually(t, "the delivery", func() bool { return len(f.lines()) == 4 && f.lines()[0].State == store.WebhookDelivered })
}

// The dispatcher never hands one delivery to two workers at once, whatever
// the retries and wake-ups; every delivery ends delivered exactly once.
func TestNoDeliveryRunsTwiceAtOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var mu sync.Mutex
	inFlight := map[string]bool{}
	okCount := map[string]int{}
	calls := map[string]int{}
	overlap := 0
	rc := webhooktest.NewReceiver(t, true, func(_ int, r *http.Request, _ http.ResponseWriter) int {
		id := r.Header.Get(HeaderDelivery)
		mu.Lock()
		if inFlight[id] {
			overlap++
		}
		inFlight[id] = true
		calls[id]++
		first := calls[id] == 1
		mu.Unlock()
		time.Sleep(2 * time.Millisecond) // widen the window an overlap would need
		mu.Lock()
		defer mu.Unlock()
		inFlight[id] = false
		if first {
			return http.StatusInternalServerError
		}
		okCount[id]++
		return http.StatusOK
	})
	svc, _ := f.start(Config{AllowPrivate: true, RootCAs: rc.Pool(), Workers: 8, Schedule: []time.Duration{time.Millisecond, time.Millisecond}}, nil)
	f.configure(svc, EntryInput{URL: rc.URL + "/a"}, EntryInput{URL: rc.URL + "/b"})
	const messages = 30
	for range messages {
		f.inbound(svc, f.device, "SIM1", time.Now())
		svc.Kick()
	}
	eventually(t, "every delivery delivered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(okCount) == 2*messages
	})
	eventually(t, "every attempt logged", func() bool {
		lines, _ := f.st.WebhookAttempts(f.company, 0, 1000)
		return len(lines) == 4*messages
	})
	mu.Lock()
	defer mu.Unlock()
	if overlap != 0 {
		t.Fatalf("got %d overlapping attempts at one delivery, want 0", overlap)
	}
	for id, n := range okCount {
		if n != 1 || calls[id] != 2 {
			t.Fatalf("delivery %s: got %d successes in %d calls, want 1 in 2", id, n, calls[id])
		}
	}
}

// A service started again on the same store picks up the retries the last
// one scheduled.
func TestRetriesSurviveARestart(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	clock := testclock.New(time.Now())
	var mu sync.Mutex
	up := false
	rc := webhooktest.NewReceiver(t, true, func(int, *http.Request, http.ResponseWriter) int {
		mu.Lock()
		defer mu.Unlock()
		if up {
			return http.StatusOK
		}
		return http.StatusBadGateway
	})
	cfg := Config{AllowPrivate: true, RootCAs: rc.Pool(), Schedule: []time.Duration{time.Hour}}
	first, stop := f.start(cfg, clock.Now)
	f.configure(first, EntryInput{URL: rc.URL})
	f.inbound(first, f.device, "SIM1", clock.Now())
	eventually(t, "the first attempt", func() bool { return len(f.lines()) == 1 })
	stop()
	mu.Lock()
	up = true
	mu.Unlock()

	clock.Advance(2 * time.Hour)
	f.start(cfg, clock.Now)
	eventually(t, "the retry after the restart", func() bool { return len(f.lines()) == 2 })
	lines := f.lines()
	if lines[0].State != store.WebhookDelivered || lines[0].Attempt != 2 || lines[0].DeliveryID != lines[1].DeliveryID {
		t.Fatalf("got %+v, want attempt 2 of the same delivery delivered", lines)
	}
	reqs := rc.Requests()
	if len(reqs) != 2 || reqs[0].Header.Get(HeaderDelivery) != reqs[1].Header.Get(HeaderDelivery) {
		t.Fatalf("got %d requests, want 2 of one delivery", len(reqs))
	}
}

// Deliveries of an entry removed after they were queued are failed without
// being sent; a rotated secret signs the retries.
func TestRemovedEntryAndRotatedSecret(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	clock := testclock.New(time.Now())
	var mu sync.Mutex
	calls := map[string]int{}
	rc := webhooktest.NewReceiver(t, true, func(_ int, r *http.Request, _ http.ResponseWriter) int {
		mu.Lock()
		defer mu.Unlock()
		calls[r.URL.Path]++
		if calls[r.URL.Path] == 1 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	svc, _ := f.start(Config{AllowPrivate: true, RootCAs: rc.Pool(), Schedule: []time.Duration{time.Hour}}, clock.Now)
	entries := f.configure(svc, EntryInput{URL: rc.URL + "/keep"}, EntryInput{URL: rc.URL + "/drop"})
	f.inbound(svc, f.device, "SIM1", clock.Now())
	eventually(t, "two first attempts", func() bool { return len(f.lines()) == 2 })
	keep := int64(entries[0].ID)
	f.configure(svc, EntryInput{ID: &keep, URL: rc.URL + "/keep"})
	secret, err := svc.RotateSecret(context.Background(), f.company)
	if err != nil || secret == "" {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Hour)
	svc.Kick()
	eventually(t, "both retries", func() bool { return len(f.lines()) == 4 })
	for _, l := range f.lines()[:2] {
		switch l.WebhookID {
		case entries[0].ID:
			if l.State != store.WebhookDelivered {
				t.Errorf("kept entry: got %+v, want delivered", l)
			}
		case entries[1].ID:
			if l.State != store.WebhookFailed || l.StatusCode != 0 || !strings.Contains(l.Error, "removed") {
				t.Errorf("removed entry: got %+v, want failed, not sent", l)
			}
		}
	}
	reqs := rc.Requests()
	last := reqs[len(reqs)-1]
	if len(reqs) != 3 || last.Path != "/keep" {
		t.Fatalf("got %d requests, the last to %s; want 3, the last to /keep", len(reqs), last.Path)
	}
	if want := hmacHex(secret, last.Header.Get(HeaderTimestamp), last.Body); last.Header.Get(HeaderSignature) != want {
		t.Fatalf("the retry after rotation is not signed with the new secret")
	}
}

// A receiver that hangs holds at most maxPerEntry workers: the other
// entry's deliveries go on meanwhile.
func TestHangingReceiverDoesNotStallOthers(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	h := newHanger()
	rc := webhooktest.NewReceiver(t, true, func(_ int, r *http.Request, _ http.ResponseWriter) int {
		if r.URL.Path == "/slow" {
			h.hang(r)
		}
		return http.StatusNoContent
	})
	defer close(h.release)
	svc, _ := f.start(Config{AllowPrivate: true, RootCAs: rc.Pool(), Workers: 4, Timeout: time.Minute}, nil)
	entries := f.configure(svc, EntryInput{URL: rc.URL + "/slow"}, EntryInput{URL: rc.URL + "/fast"})
	const messages = 10
	for range messages {
		f.inbound(svc, f.device, "SIM1", time.Now())
	}
	eventually(t, "every delivery to the fast entry", func() bool {
		lines, _ := f.st.WebhookAttempts(f.company, entries[1].ID, 100)
		return len(lines) == messages
	})
	if _, most := h.counts(); most > maxPerEntry {
		t.Fatalf("the hanging entry held %d attempts at once, want at most %d", most, maxPerEntry)
	}
}

// An answer from a URL the entry no longer has does not judge the entry:
// a 410 from the old URL neither disables it nor ends the delivery.
func TestAnswerFromAnOldURLDoesNotJudgeTheEntry(t *testing.T) {
	t.Parallel()
	svc, err := New(Config{}, nil, slog.New(slog.DiscardHandler), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	e := &store.WebhookEntry{ID: 1, URL: "https://new.example.com/hook", Active: true}
	a, why := svc.decide(store.WebhookDelivery{}, e, outcome{status: http.StatusGone, url: "https://old.example.com/hook", err: "gone"})
	if why != "" || !e.Active || !e.FailingSince.IsZero() {
		t.Fatalf("got entry %+v (why %q), want it untouched", e, why)
	}
	if a.State != store.WebhookPending || a.NextAttemptAt.IsZero() {
		t.Fatalf("got %+v, want the delivery retried (to the new URL)", a)
	}
	// The same answer from the entry's own URL disables it.
	if _, why := svc.decide(store.WebhookDelivery{}, e, outcome{status: http.StatusGone, url: e.URL}); why == "" || e.Active {
		t.Fatalf("410 from the entry's URL: got entry %+v, want it disabled", e)
	}
}

// The shared event body with a delivery's id in front is, byte for byte,
// the Payload the contract describes.
func TestEventBodyIsThePayload(t *testing.T) {
	t.Parallel()
	m := benchMessage()
	m.Text = "quote \" back\\slash <tag> & é 😀\n"
	got, err := payload("0193a1c2-7d4e-7f00-8a1b-2c3d4e5f6a7b", EventSMSReceived, m)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(Payload{ID: "0193a1c2-7d4e-7f00-8a1b-2c3d4e5f6a7b", Type: EventSMSReceived, CreatedAt: m.CreatedAt.UTC().Format(timeLayout),
		Data: InboundData{ID: m.ID, UUID: m.UUID, Phone: m.Phone, Message: m.Text, SIMSlot: m.SIMSlot, DeviceFingerprint: m.Device, ReceivedAt: m.ReceivedAt, Channel: m.Channel}})
	if string(got) != string(want) {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

// A worker does not wait for its attempt's line to be durable: while the
// store's writer is held (a slow fsync), one entry's deliveries go on past
// its bound of attempts under way, and their lines are written, each
// delivery once, when the writer goes on.
func TestAttemptsDoNotWaitForTheirLines(t *testing.T) {
	storetest.EmbeddedOnly(t, "holdCommits holds the single writer every commit queues behind; PostgreSQL's commits do not queue")
	t.Parallel()
	f := newFixture(t)
	var posts atomic.Int64
	rc := webhooktest.NewReceiver(t, true, func(int, *http.Request, http.ResponseWriter) int {
		posts.Add(1)
		return http.StatusOK
	})
	cfg := Config{AllowPrivate: true, RootCAs: rc.Pool(), Workers: 8}
	// Stored before the service runs, so that every delivery waits for it.
	setup, err := New(cfg, f.st, slog.New(slog.NewTextHandler(io.Discard, nil)), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	f.configure(setup, EntryInput{URL: rc.URL + "/a"})
	const n = 12
	for range n {
		f.inbound(setup, f.device, "SIM1", time.Now())
	}
	if bound := cfg.withDefaults().entryBound(); n <= bound {
		t.Fatalf("the test needs more deliveries (%d) than the entry's bound (%d)", n, bound)
	}
	release := f.holdCommits()
	f.start(cfg, nil)
	t.Cleanup(release) // before the service stops: it waits for its lines
	eventually(t, "every delivery posted while the writer is held", func() bool { return posts.Load() == n })
	if lines := f.lines(); len(lines) != 0 {
		t.Fatalf("got %d lines before the commit, want none", len(lines))
	}
	release()
	eventually(t, "every attempt logged", func() bool { return len(f.lines()) == n })
	for _, l := range f.lines() {
		if l.State != store.WebhookDelivered || l.Attempt != 1 {
			t.Fatalf("got line %+v, want a first attempt delivered", l)
		}
	}
	if got := posts.Load(); got != n {
		t.Fatalf("the receiver got %d posts, want %d", got, n)
	}
}
