package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

const (
	waNumber = "+15550001111"
	imHandle = "ana@example.com"
)

// TestAgentNumbersStableAcrossReconnectsAndAgents: announced numbers and
// handles are listed with stable ids, online from the link, the warm-up's
// halved caps and sent_today; a number moving to another agent of the
// company keeps its id.
func TestAgentNumbersStableAcrossReconnectsAndAgents(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	regA := e.pairPhone(a.apiKey, "agent-a")
	ag := e.runAgent(regA, "agent-a", []string{"+1 555 000 1111"}, []string{"Ana@Example.com"}, false)
	list := e.numbers(a.apiKey, "whatsapp")
	if len(list) != 1 {
		t.Fatalf("got %d numbers, want 1", len(list))
	}
	n := list[0]
	id := n["number_id"].(string)
	if !strings.HasPrefix(id, "wa_") || n["phone"] != waNumber || n["device_fingerprint"] != "agent-a" || n["online"] != true || n["status"] != "active" || n["sent_today"] != 0.0 {
		t.Fatalf("got %v", n)
	}
	caps := n["caps"].(map[string]any)
	if caps["per_minute"] != 4.0 || caps["per_hour"] != 100.0 || caps["per_day"] != 500.0 || n["warmup"] != true {
		t.Fatalf("a new number's caps: got %v, want the halved defaults 4/100/500", n)
	}
	handles := e.numbers(a.apiKey, "imessage")
	if len(handles) != 1 || handles[0]["handle"] != imHandle || !strings.HasPrefix(handles[0]["handle_id"].(string), "im_") || handles[0]["caps"].(map[string]any)["per_minute"] != 5.0 {
		t.Fatalf("got handles %v", handles)
	}
	hid := handles[0]["handle_id"].(string)

	ag.halt()
	e.eventually("the number shows offline", func() bool { return e.numbers(a.apiKey, "whatsapp")[0]["online"] == false })
	e.runAgent(regA, "agent-a", []string{waNumber}, []string{imHandle}, false)
	if got := e.numberID(a.apiKey, "whatsapp", waNumber); got != id {
		t.Fatalf("after a reconnect: got id %s, want %s", got, id)
	}
	// Another agent of the company announces the number: it moves, keeping its id.
	e.runAgent(e.pairPhone(a.apiKey, "agent-b"), "agent-b", []string{waNumber}, nil, false)
	list = e.numbers(a.apiKey, "whatsapp")
	if len(list) != 1 || list[0]["number_id"] != id || list[0]["device_fingerprint"] != "agent-b" {
		t.Fatalf("after another agent announced it: got %v", list)
	}
	if got := e.numberID(a.apiKey, "imessage", imHandle); got != hid {
		t.Fatalf("handle id changed: %s, want %s", got, hid)
	}
}

// TestAgentSendFramesTextAndMedia: sends reach the agent holding the number
// as send frames with channel, content_type and media_url and no sim_slot;
// reports move them through the SMS statuses, readable per message and in
// the number's history.
func TestAgentSendFramesTextAndMedia(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	ag := e.runAgent(e.pairPhone(a.apiKey, "agent-a"), "agent-a", []string{waNumber}, []string{imHandle}, true)
	wa := e.numberID(a.apiKey, "whatsapp", waNumber)
	im := e.numberID(a.apiKey, "imessage", imHandle)

	r := e.waSend(a.apiKey, wa, "+1 (555) 765-4321", "hello")
	e.want(r, http.StatusAccepted, "")
	if r.str("status") != "queued" || len(r.str("id")) != 36 {
		t.Fatalf("got %s", r.Raw)
	}
	textID := r.str("id")
	e.eventually("the text job arrives", func() bool { jobs, _ := ag.Jobs(); return len(jobs) == 1 })
	jobs, _ := ag.Jobs()
	if j := jobs[0]; j.ID != textID || j.Channel != "whatsapp" || j.From != waNumber || j.To != "+15557654321" || j.Message != "hello" || j.ContentType != "text" || j.MediaURL != "" || j.SIMSlot != "" || j.ExpiresAt == "" {
		t.Fatalf("got send frame %+v", j)
	}
	// The agent's reports taken before the clock moves: a job taken after
	// the gap drawn at its dispatch ended holds the next one a gap's
	// minimum after it (docs/pacing.md), which this clock would never reach.
	e.eventually("the text is delivered", func() bool {
		return e.do(call{method: "GET", path: "/whatsapp/messages/" + textID, token: a.apiKey}).str("status") == "delivered"
	})
	e.clock.Advance(10 * time.Second) // past the gap
	r = e.do(call{method: "POST", path: "/whatsapp/send", token: a.apiKey, body: map[string]any{"number_id": wa, "to": "+15557654321", "type": "image", "media_url": "https://cdn.example.com/a.jpg", "content": "caption"}})
	e.want(r, http.StatusAccepted, "")
	mediaID := r.str("id")
	ag.settle()
	jobs, _ = ag.Jobs()
	if len(jobs) != 2 || jobs[1].ID != mediaID || jobs[1].ContentType != "image" || jobs[1].MediaURL != "https://cdn.example.com/a.jpg" || jobs[1].Message != "caption" {
		t.Fatalf("got jobs %+v", jobs)
	}
	r = e.do(call{method: "POST", path: "/imessage/send", token: a.apiKey, body: map[string]any{"handle_id": im, "to": "Bob@Example.com", "content": "hi"}})
	e.want(r, http.StatusAccepted, "")
	imID := r.str("id")
	ag.settle()
	jobs, _ = ag.Jobs()
	if len(jobs) != 3 || jobs[2].ID != imID || jobs[2].Channel != "imessage" || jobs[2].From != imHandle || jobs[2].To != "bob@example.com" || jobs[2].ContentType != "text" {
		t.Fatalf("got jobs %+v", jobs)
	}
	for _, id := range []string{textID, mediaID} {
		e.eventually("the send is delivered", func() bool {
			r := e.do(call{method: "GET", path: "/whatsapp/messages/" + id, token: a.apiKey})
			return r.Status == http.StatusOK && r.str("status") == "delivered"
		})
	}
	m := e.do(call{method: "GET", path: "/whatsapp/messages/" + mediaID, token: a.apiKey})
	if m.str("number_id") != wa || m.str("to") != "+15557654321" || m.str("type") != "image" || m.str("media_url") != "https://cdn.example.com/a.jpg" || m.str("content") != "caption" || m.Body["error"] != nil || m.str("created_at") == "" || m.str("updated_at") == "" {
		t.Fatalf("got %s", m.Raw)
	}
	// Each channel reads only its own messages.
	e.want(e.do(call{method: "GET", path: "/imessage/messages/" + mediaID, token: a.apiKey}), http.StatusNotFound, "not_found")
	e.eventually("the iMessage is delivered", func() bool {
		return e.do(call{method: "GET", path: "/imessage/messages/" + imID, token: a.apiKey}).str("status") == "delivered"
	})
	h := e.do(call{method: "GET", path: "/whatsapp/messages?number_id=" + wa + "&limit=1", token: a.apiKey})
	e.want(h, http.StatusOK, "")
	items := h.Body["messages"].([]any)
	if h.Body["total"] != 2.0 || h.Body["pages"] != 2.0 || len(items) != 1 || items[0].(map[string]any)["id"] != mediaID {
		t.Fatalf("history: got %s", h.Raw)
	}
	h = e.do(call{method: "GET", path: "/whatsapp/messages?number_id=" + wa + "&limit=1&page=2", token: a.apiKey})
	if items := h.Body["messages"].([]any); len(items) != 1 || items[0].(map[string]any)["id"] != textID {
		t.Fatalf("history page 2: got %s", h.Raw)
	}
	// The number's sends count today.
	if n := e.numbers(a.apiKey, "whatsapp")[0]; n["sent_today"] != 2.0 {
		t.Fatalf("sent_today: got %v, want 2", n["sent_today"])
	}
}

// TestAgentSendValidation: every field of a send is checked and named.
func TestAgentSendValidation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	e.runAgent(e.pairPhone(a.apiKey, "agent-a"), "agent-a", []string{waNumber}, []string{imHandle}, false)
	wa := e.numberID(a.apiKey, "whatsapp", waNumber)
	im := e.numberID(a.apiKey, "imessage", imHandle)
	cases := []struct {
		path   string
		body   any
		status int
		code   string
		field  string
	}{
		{"/whatsapp/send", map[string]any{"to": "+15557654321", "content": "x"}, 400, "validation_failed", "number_id"},
		{"/whatsapp/send", map[string]any{"number_id": wa, "content": "x"}, 400, "validation_failed", "to"},
		{"/whatsapp/send", map[string]any{"number_id": wa, "to": "15557654321", "content": "x"}, 400, "validation_failed", "to"},
		{"/whatsapp/send", map[string]any{"number_id": wa, "to": "bob@example.com", "content": "x"}, 400, "validation_failed", "to"},
		{"/whatsapp/send", map[string]any{"number_id": wa, "to": "+15557654321"}, 400, "validation_failed", "content"},
		{"/whatsapp/send", map[string]any{"number_id": wa, "to": "+15557654321", "content": strings.Repeat("x", 4097)}, 400, "validation_failed", "content"},
		{"/whatsapp/send", map[string]any{"number_id": wa, "to": "+15557654321", "content": "x", "type": "sticker"}, 400, "validation_failed", "type"},
		{"/whatsapp/send", map[string]any{"number_id": wa, "to": "+15557654321", "type": "image"}, 400, "validation_failed", "media_url"},
		{"/whatsapp/send", map[string]any{"number_id": wa, "to": "+15557654321", "type": "video", "media_url": "http://cdn.example.com/v.mp4"}, 400, "validation_failed", "media_url"},
		{"/whatsapp/send", map[string]any{"number_id": wa, "to": "+15557654321", "type": "document", "media_url": "not a url"}, 400, "validation_failed", "media_url"},
		{"/whatsapp/send", map[string]any{"number_id": wa, "to": "+15557654321", "content": "x", "media_url": "https://cdn.example.com/a.jpg"}, 400, "validation_failed", "media_url"},
		{"/whatsapp/send", map[string]any{"number_id": "wa_unknown", "to": "+15557654321", "content": "x"}, 404, "not_found", "number_id"},
		{"/whatsapp/send", map[string]any{"number_id": im, "to": "+15557654321", "content": "x"}, 404, "not_found", "number_id"},
		{"/whatsapp/send", map[string]any{"number_id": 12, "to": "+15557654321", "content": "x"}, 400, "validation_failed", "number_id"},
		{"/whatsapp/send", `{"number_id":`, 400, "invalid_json", ""},
		{"/imessage/send", map[string]any{"to": "bob@example.com", "content": "x"}, 400, "validation_failed", "handle_id"},
		{"/imessage/send", map[string]any{"handle_id": im, "to": "bob@", "content": "x"}, 400, "validation_failed", "to"},
		{"/imessage/send", map[string]any{"handle_id": im, "to": "bob@example.com"}, 400, "validation_failed", "content"},
		{"/imessage/send", map[string]any{"handle_id": wa, "to": "bob@example.com", "content": "x"}, 404, "not_found", "handle_id"},
	}
	for i, c := range cases {
		r := e.do(call{method: "POST", path: c.path, token: a.apiKey, body: c.body})
		if r.Status != c.status || r.str("error") != c.code || r.str("field") != c.field || r.str("message") == "" {
			t.Errorf("case %d (%v): got %d %s, want %d %s field %q", i, c.body, r.Status, r.Raw, c.status, c.code, c.field)
		}
	}
	h := e.do(call{method: "GET", path: "/whatsapp/messages?number_id=" + wa, token: a.apiKey})
	if h.Body["total"] != 0.0 {
		t.Fatalf("refused sends were stored: %s", h.Raw)
	}
	for _, q := range []struct{ query, field string }{{"", "number_id"}, {"number_id=" + wa + "&limit=0", "limit"}, {"number_id=" + wa + "&page=0", "page"}, {"number_id=" + wa + "&limit=x", "limit"}} {
		r := e.do(call{method: "GET", path: "/whatsapp/messages?" + q.query, token: a.apiKey})
		if r.Status != 400 || r.str("field") != q.field {
			t.Errorf("GET /whatsapp/messages?%s: got %d %s, want 400 field %s", q.query, r.Status, r.Raw, q.field)
		}
	}
}

// TestAgentIdempotency: the same Idempotency-Key answers the first send again and queues nothing new.
func TestAgentIdempotency(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	e.runAgent(e.pairPhone(a.apiKey, "agent-a"), "agent-a", []string{waNumber}, nil, false)
	wa := e.numberID(a.apiKey, "whatsapp", waNumber)
	send := func() resp {
		return e.do(call{method: "POST", path: "/whatsapp/send", token: a.apiKey, header: map[string]string{"Idempotency-Key": "order-42"},
			body: map[string]any{"number_id": wa, "to": "+15557654321", "content": "once"}})
	}
	r1, r2 := send(), send()
	e.want(r1, http.StatusAccepted, "")
	e.want(r2, http.StatusAccepted, "")
	if r1.str("id") != r2.str("id") || r2.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("got %s then %s", r1.Raw, r2.Raw)
	}
	h := e.do(call{method: "GET", path: "/whatsapp/messages?number_id=" + wa, token: a.apiKey})
	if h.Body["total"] != 1.0 {
		t.Fatalf("got %s, want one message", h.Raw)
	}
	// A replay takes no slot of the governor: 3 more pass the warm-up cap of 4.
	for i := range 3 {
		e.want(e.waSend(a.apiKey, wa, "+15557654321", "more"), http.StatusAccepted, "")
		_ = i
	}
	e.want(e.waSend(a.apiKey, wa, "+15557654321", "over"), http.StatusTooManyRequests, "number_capped")
}

// TestAgentCapsAndRetryAfter: a new number's fifth send in a minute and an
// old number's ninth answer 429 number_capped with the true Retry-After, and
// the send after Retry-After passes.
func TestAgentCapsAndRetryAfter(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	ag := e.runAgent(e.pairPhone(a.apiKey, "agent-a"), "agent-a", []string{waNumber}, []string{imHandle}, false)
	ag.halt() // sends wait for the agent; the caps count accepted sends
	wa := e.numberID(a.apiKey, "whatsapp", waNumber)
	for i := range 4 {
		e.want(e.waSend(a.apiKey, wa, "+15557654321", "new"), http.StatusAccepted, "")
		if i < 3 {
			e.clock.Advance(2 * time.Second)
		}
	}
	r := e.waSend(a.apiKey, wa, "+15557654321", "fifth")
	e.want(r, http.StatusTooManyRequests, "number_capped")
	// Sends at +0, +2, +4, +6 s; the first leaves the minute a minute
	// after the end of its second, 61 s after it.
	if got := retryAfter(r); got != 55 {
		t.Fatalf("new number: got Retry-After %d, want 55", got)
	}
	e.clock.Advance(54 * time.Second)
	e.want(e.waSend(a.apiKey, wa, "+15557654321", "early"), http.StatusTooManyRequests, "number_capped")
	e.clock.Advance(time.Second)
	e.want(e.waSend(a.apiKey, wa, "+15557654321", "after Retry-After"), http.StatusAccepted, "")

	// Past its first week the number takes 8 a minute.
	e.clock.Advance(8 * 24 * time.Hour)
	for range 8 {
		e.want(e.waSend(a.apiKey, wa, "+15557654321", "old"), http.StatusAccepted, "")
	}
	r = e.waSend(a.apiKey, wa, "+15557654321", "ninth")
	e.want(r, http.StatusTooManyRequests, "number_capped")
	if got := retryAfter(r); got != 61 {
		t.Fatalf("old number: got Retry-After %d, want 61", got)
	}
	e.clock.Advance(61 * time.Second)
	e.want(e.waSend(a.apiKey, wa, "+15557654321", "after Retry-After"), http.StatusAccepted, "")

	// iMessage: the same governor with its own caps (10 a minute past the warm-up).
	im := e.numberID(a.apiKey, "imessage", imHandle)
	imSend := func() resp {
		return e.do(call{method: "POST", path: "/imessage/send", token: a.apiKey, body: map[string]any{"handle_id": im, "to": "+15557654321", "content": "x"}})
	}
	for range 10 {
		e.want(imSend(), http.StatusAccepted, "")
	}
	e.want(imSend(), http.StatusTooManyRequests, "number_capped")
}
